"""The worker's walks over trees a tenant's program made (worker/files.py): a copy held to its bound in apparent and
allocated bytes before a byte is written, holes kept, depth bounded, nothing left of a copy that failed; removal at
any depth (shutil.rmtree of Python 3.11 recurses, and died of RecursionError on a tree 1,100 folders deep)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worker.files import MAX_DEPTH, TreeRefused, copy_tree, remove_tree

MB = 1024 * 1024


def nested(top: Path, depth: int) -> None:
    """Folders `depth` levels deep under `top`, made by descriptor (the path outgrows PATH_MAX)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("last.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as last:
            last.write("the bottom")
    finally:
        os.close(fd)


def test_a_copy_keeps_files_links_modes_and_holes(tmp_path):
    source = tmp_path / "app"
    (source / "bin").mkdir(parents=True)
    (source / "bin" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(source / "bin" / "run.sh", 0o750)
    os.symlink("/etc/shadow", source / "link")  # kept as a link, never followed
    with open(source / "sparse.bin", "wb") as sparse:
        sparse.truncate(8 * MB)
        sparse.seek(4 * MB)
        sparse.write(b"data in the middle")
    os.mkfifo(source / "pipe")  # left out
    copy_tree(source, tmp_path / "copy", limit=16 * MB)
    copy = tmp_path / "copy"
    assert sorted(p.name for p in copy.iterdir()) == ["bin", "link", "sparse.bin"]
    assert (copy / "bin" / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert oct((copy / "bin" / "run.sh").stat().st_mode & 0o777) == "0o750"
    assert os.readlink(copy / "link") == "/etc/shadow"
    copied = (copy / "sparse.bin").stat()
    assert copied.st_size == 8 * MB
    assert copied.st_blocks * 512 < MB  # the holes stayed holes
    with open(copy / "sparse.bin", "rb") as read:
        read.seek(4 * MB)
        assert read.read(18) == b"data in the middle"


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse files", "tiny files"])
def test_a_tree_over_its_bound_is_refused_before_it_is_written_and_nothing_is_left(tmp_path, sparse):
    """Sparse files: 3 x 60 MB apparent, nothing allocated, against 32 MB. Tiny files: 3,000 of one byte, 3 kB
    apparent but 12 MB allocated (a block each), against 8 MB."""
    source = tmp_path / "app"
    source.mkdir()
    for number in range(3 if sparse else 3000):
        with open(source / f"s-{number}", "wb") as made:
            if sparse:
                made.truncate(60 * MB)
            else:
                made.write(b"x")
    limit = 32 if sparse else 8
    with pytest.raises(TreeRefused) as refused:
        copy_tree(source, tmp_path / "copy", limit=limit * MB, what="the built /app")
    size = "apparent" if sparse else "allocated"
    assert (
        refused.value.strerror == f"the built /app holds more than {limit} MB ({size} size, sparse files counted whole)"
    )
    assert not (tmp_path / "copy").exists()


def test_a_tree_deeper_than_the_limit_is_refused_and_nothing_is_left(tmp_path):
    source = tmp_path / "app"
    source.mkdir()
    nested(source, MAX_DEPTH + 1)
    with pytest.raises(TreeRefused, match=f"has folders more than {MAX_DEPTH} levels deep"):
        copy_tree(source, tmp_path / "copy", limit=64 * MB, what="the built /app")
    assert not (tmp_path / "copy").exists()
    shallow = tmp_path / "shallow"
    shallow.mkdir()
    nested(shallow, MAX_DEPTH)
    copy_tree(shallow, tmp_path / "shallow-copy", limit=64 * MB)  # the limit itself is fine
    assert (tmp_path / "shallow-copy" / "/".join(["d"] * MAX_DEPTH) / "last.txt").read_text() == "the bottom"


@pytest.mark.slow  # some 25 s: 100,000 folders made and removed
def test_a_tree_100000_folders_deep_is_removed_whole(tmp_path):
    top = tmp_path / "workspace"
    top.mkdir()
    nested(top, 100_000)
    (top / "d").chmod(0o500)  # a folder its program made unwritable
    remove_tree(top)
    assert not top.exists()
    remove_tree(top)  # already gone: nothing to do
