"""The worker's walks over trees a tenant's program may have made: iterative, by descriptor, bounded.

A build or a trial can leave any tree it likes: folders 100,000 levels deep, paths longer than PATH_MAX, sparse
files of terabytes. What the worker copies out of such a tree (a built /app into its task cache) is held to a size in
apparent and in allocated bytes, checked from each file's status before a byte of it is written, and to a depth of
MAX_DEPTH folders; holes stay holes. A copy that fails is removed before the error leaves. Removal walks any depth
with a few descriptors: folders are moved up to the top as they are found, so no path grows and nothing recurses.
Links are copied as links and never followed; FIFOs, sockets and devices are left out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from domain.limits import MIB

MAX_DEPTH = 128  # folders below the top of a tree the worker copies
COPY_CHUNK = 1 << 20  # bytes read at a time between two file systems
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TreeRefused(OSError):
    """A tree the worker will not copy: deeper than MAX_DEPTH, or larger than its bound (the message says which)."""


@dataclass
class Budget:
    """What a copy may still write: `limit` bytes, counted apparently (st_size) and as allocated (st_blocks)."""

    limit: int
    what: str = "the tree"
    apparent: int = 0
    allocated: int = 0

    def spend(self, status: os.stat_result) -> None:
        self.apparent += status.st_size
        self.allocated += status.st_blocks * 512
        if max(self.apparent, self.allocated) > self.limit:
            size = "apparent" if self.apparent > self.limit else "allocated"
            raise TreeRefused(
                errno.EFBIG,
                f"{self.what} holds more than {self.limit // MIB} MB ({size} size, sparse files counted whole)",
            )


def copy_data(source: int, target: int) -> None:
    """Copy the data of the open file `source` into `target` (already truncated to its size): only the parts that
    hold data, so its holes stay holes."""
    offset, end = 0, os.fstat(source).st_size
    while offset < end:
        try:
            data = os.lseek(source, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        offset = os.lseek(source, data, os.SEEK_HOLE)
        while data < offset:
            data += _copy_range(source, target, data, offset - data)


def _copy_range(source: int, target: int, at: int, count: int) -> int:
    """Copy up to `count` bytes at offset `at` of `source` to the same offset of `target`; the number copied. In the
    kernel within one file system, through a buffer between two (copy_file_range answers EXDEV there)."""
    try:
        copied = os.copy_file_range(source, target, count, at, at)
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        chunk = os.pread(source, min(count, COPY_CHUNK), at)
        copied = os.pwrite(target, chunk, at) if chunk else 0
    if copied <= 0:
        raise OSError(errno.EIO, "the file ended early")
    return copied


def _copy_file(name: str, source: int, target: int, mode: int) -> None:
    read = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        write = os.open(name, flags, 0o600, dir_fd=target)
        try:
            os.ftruncate(write, os.fstat(read).st_size)
            copy_data(read, write)
            os.fchmod(write, stat.S_IMODE(mode) & 0o777)
        finally:
            os.close(write)
    finally:
        os.close(read)


def copy_tree(source: Path, target: Path, *, limit: int, what: str = "the tree", owner: int | None = None) -> None:
    """Copy the tree at `source` (nothing runs in it any more) to the new folder `target`: folders, regular files and
    links, within `limit` bytes and MAX_DEPTH folders, owned by `owner` (as root) or the worker. TreeRefused when the
    tree is too deep or too large, OSError when the disk is full; either way `target` is gone when it is raised."""
    budget = Budget(limit, what)
    os.mkdir(target, 0o700)
    try:
        _copy_into(source, target, budget, owner)
    except BaseException:
        remove_tree(target)
        raise


def _copy_into(source: Path, target: Path, budget: Budget, owner: int | None) -> None:
    top_source, top_target = os.open(source, _DIRECTORY), os.open(target, _DIRECTORY)
    pending = [("", 0)]  # folders (relative to both tops) whose entries are still to copy, and their depth
    try:
        while pending:
            folder, depth = pending.pop()
            here = os.open(folder or ".", _DIRECTORY, dir_fd=top_source)
            there = os.open(folder or ".", _DIRECTORY, dir_fd=top_target)
            try:
                with os.scandir(here) as entries:
                    listing = [(entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
                for name, status in listing:
                    mode = status.st_mode
                    if stat.S_ISLNK(mode):
                        os.symlink(os.readlink(name, dir_fd=here), name, dir_fd=there)
                    elif stat.S_ISDIR(mode):
                        if depth + 1 > MAX_DEPTH:
                            raise TreeRefused(
                                errno.ELOOP, f"{budget.what} has folders more than {MAX_DEPTH} levels deep"
                            )
                        os.mkdir(name, 0o755, dir_fd=there)
                        pending.append((f"{folder}/{name}" if folder else name, depth + 1))
                    elif stat.S_ISREG(mode):
                        budget.spend(status)
                        _copy_file(name, here, there, mode)
                    else:
                        continue
                    if owner is not None:
                        os.chown(name, owner, owner, dir_fd=there, follow_symlinks=False)
                os.fchmod(there, 0o755)
                if owner is not None:
                    os.fchown(there, owner, owner)
            except OSError as error:
                if error.errno == errno.ENAMETOOLONG:
                    raise TreeRefused(errno.ENAMETOOLONG, f"{budget.what} has a path too long to copy") from None
                raise
            finally:
                os.close(here)
                os.close(there)
    finally:
        os.close(top_source)
        os.close(top_target)


def remove_tree(path: Path) -> None:
    """Remove the tree at `path` (a link is removed, never followed), whatever its depth: each folder's folders are
    moved up beside it under a fresh name before it is emptied, so every path stays one level long. Nothing is
    raised for what is already gone."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(status.st_mode):
        os.unlink(path)
        return
    top = os.open(path, _DIRECTORY)
    try:
        with contextlib.suppress(PermissionError):
            os.fchmod(top, 0o700)
        with os.scandir(top) as entries:
            left = [entry.name for entry in entries]
        _empty(top, left)
    finally:
        os.close(top)
    os.rmdir(path)


def _empty(top: int, names: list[str]) -> None:
    """Remove every entry `names` of the open folder `top`: files at once, folders after their own folders have been
    moved up into `top`."""
    while names:
        name = names.pop()
        try:
            status = os.lstat(name, dir_fd=top)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(status.st_mode):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=top)
            continue
        folder = os.open(name, _DIRECTORY, dir_fd=top)
        try:
            os.fchmod(folder, 0o700)  # a folder its program made unwritable is still emptied
            with os.scandir(folder) as entries:
                inside = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
            for child, is_folder in inside:
                if is_folder:
                    moved = f".rm-{uuid.uuid4().hex}"
                    os.rename(child, moved, src_dir_fd=folder, dst_dir_fd=top)
                    names.append(moved)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(child, dir_fd=folder)
        finally:
            os.close(folder)
        os.rmdir(name, dir_fd=top)
