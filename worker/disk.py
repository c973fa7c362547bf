"""A sandbox's disk: a file system of `diskMb` of its own, mounted over a party's directory, so that everything the
party's programs can write on the host (its workspace, the log folders bound into it) shares one size and the rest
of the host's disk is out of their reach.

The file system is ext4 in a sparse image file beside the directory, a copy of an empty image made once per size by
mkfs.ext4, mounted through a loop device: it takes from the host's disk only what its files use, at most diskMb,
and its files are disk, not memory (a tmpfs would count them toward memoryMb). Only root can mount, so only a
worker run as root gets it (its start line says which); without it each file is held to fileSizeMb and nothing
holds their number.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import tempfile
import uuid
from pathlib import Path

from domain.limits import MIB
from worker.files import copy_data

FULL_BELOW = MIB  # free bytes under which a sandbox's disk counts as full (a write that failed left less)
# No journal (the image dies with its trial), no blocks kept for root, inode tables written as they are used.
MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "root_owner=0:0,lazy_itable_init=1,nodiscard"]


class MountFailed(OSError):
    """mkfs.ext4, mount or umount refused; the message is what it printed."""


def _run(argv: list[str]) -> None:
    environment = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=environment)
    if done.returncode != 0:
        raise MountFailed(f"{argv[0]} failed: {(done.stderr or done.stdout).strip()}")


def _mount_image(image: Path, point: Path) -> None:
    """Mount the ext4 image `image` on `point` through a loop device, no set-uid programs or device files on it."""
    _run(["mount", "-t", "ext4", "-o", "loop,nosuid,nodev", str(image), str(point)])


def image_of(path: Path) -> Path:
    """The image file of the disk mounted at `path`: beside it, never inside what a sandbox sees."""
    return path.with_name(path.name + ".disk")


def _empty_image(folder: Path, size_mb: int) -> Path:
    """The empty disk of `size_mb` MB every sandbox's disk of that size starts as a copy of: made once per size by
    mkfs.ext4 (and emptied of lost+found, its root made 0711) under `folder`, which only the worker can write."""
    made = folder / f"{size_mb}.img"
    if made.exists():
        return made
    staging = folder / f"{size_mb}.img.{uuid.uuid4().hex[:8]}"
    _sparse_file(staging, size_mb * MIB)
    try:
        _run([*MKFS, str(staging)])
        point = Path(tempfile.mkdtemp(prefix="mkfs-", dir=folder))
        try:
            _mount_image(staging, point)
            try:
                os.rmdir(point / "lost+found")
                os.chmod(point, 0o711)
            finally:
                _run(["umount", str(point)])
        finally:
            os.rmdir(point)
        os.rename(staging, made)  # whole or not at all, whichever worker of this machine made it first
    finally:
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
    return made


def _sparse_file(path: Path, size: int, like: Path | None = None) -> None:
    """Create `path` anew (O_EXCL, never a file that was there) as a sparse file of `size` bytes, holding the data
    of `like` where it has any (its holes stay holes: a copy of an empty 1 GB disk writes some 600 kB)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, size)
        if like is None:
            return
        with open(like, "rb") as source:
            copy_data(source.fileno(), fd)
    finally:
        os.close(fd)


def mount(path: Path, size_mb: int) -> None:
    """Give the empty directory `path` a disk of `size_mb` MB: a fresh copy of the empty image of that size, mounted
    on it, mode 0711, owned by the worker, no set-uid programs or device files on it."""
    image = image_of(path)
    folder = path.parent / "disk-images"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    try:
        _sparse_file(image, size_mb * MIB, like=_empty_image(folder, size_mb))
        _mount_image(image, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            image.unlink()  # a mounted image stays open by its loop device, and goes with it


def unmount(path: Path) -> None:
    """Detach the disk at `path` (lazily: the loop device lets go of it once nothing is open on it)."""
    _run(["umount", "--lazy", str(path)])


def full(path: Path) -> bool:
    """True when the disk at `path` has less than FULL_BELOW bytes or no inode left to give."""
    try:
        seen = os.statvfs(path)
    except OSError:
        return False
    return seen.f_bavail * seen.f_frsize < FULL_BELOW or seen.f_favail == 0


@functools.lru_cache(maxsize=4)
def mountable(state_dir: str) -> str | None:
    """None when this process can give a sandbox a disk under `state_dir` (tried once, with a 1 MB one), else why."""
    if os.geteuid() != 0:
        return "the worker is not root"
    try:
        probe = Path(tempfile.mkdtemp(prefix="disk-probe-", dir=state_dir))
    except OSError as error:
        return f"could not make a directory in {state_dir} ({error.strerror})"
    try:
        mount(probe, 1)
        unmount(probe)
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)
    return None
