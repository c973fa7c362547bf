"""A sandbox's disk: a file system of `diskMb` of its own, mounted over a party's directory, so that everything the
party's programs can write on the host (its workspace, the log folders bound into it) shares one size and the rest
of the host's disk is out of their reach.

The file system is ext4 in a sparse image file beside the directory (mkfs.ext4, mounted through a loop device):
it takes from the host's disk only what its files use, at most diskMb, and its files are disk, not memory. Only
root can mount, so only a worker run as root gets it (its start line says which); without it each file is held to
fileSizeMb and nothing holds their number.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import tempfile
from pathlib import Path

from domain.limits import MIB

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


def image_of(path: Path) -> Path:
    """The image file of the disk mounted at `path`: beside it, never inside what a sandbox sees."""
    return path.with_name(path.name + ".disk")


def mount(path: Path, size_mb: int) -> None:
    """Make a disk of `size_mb` MB and mount it on the empty directory `path`: mode 0711, owned by the worker, no
    set-uid programs or device files on it. The image is made anew (O_EXCL), never one that was there."""
    image = image_of(path)
    fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, size_mb * MIB)
    finally:
        os.close(fd)
    try:
        _run([*MKFS, str(image)])
        _run(["mount", "-t", "ext4", "-o", "loop,nosuid,nodev", str(image), str(path)])
    finally:
        image.unlink()  # a mounted image stays open by its loop device, and goes with it
    os.rmdir(path / "lost+found")
    os.chmod(path, 0o711)


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
