"""A folder of Harbor task folders read as a stream within bounds: where its task folders are (either way it is
archived), refusals from the headers before any task is read, and never more held than one task's files, however far
a small upload would expand."""

from __future__ import annotations

import functools
import gzip
import tarfile
import tracemalloc
import zlib
from collections.abc import Callable

import pytest

from domain.datasets import MAX_DATASET_TASKS
from domain.harbor_dataset import (
    DATASET_OVER_SIZE,
    MAX_DATASET_ENTRIES,
    MAX_DATASET_TREE_BYTES,
    DatasetLayout,
    read_dataset_tasks,
    survey_dataset_archive,
)
from domain.harbor_task import AFTER_THE_END, MAX_ENTRIES, MAX_TREE_BYTES, TaskRefused
from tests.unit.test_harbor_archive import BOMB_MB, END, MB, OVER, files, gzipped, header

TEST_SH = b"echo 1 > /logs/verifier/reward.txt"


def task(folder: str, instruction: bytes = b"Do it.") -> tuple[tuple[str, bytes], ...]:
    return ((f"{folder}/instruction.md", instruction), (f"{folder}/tests/test.sh", TEST_SH))


def pax(*entries: tuple[str, bytes]) -> bytes:
    """Tar entries in the pax format (names of any length), with no end-of-archive blocks."""
    return b"".join(
        header(name, len(data), tar_format=tarfile.PAX_FORMAT) + data + bytes(-len(data) % tarfile.BLOCKSIZE)
        for name, data in entries
    )


def folder(name: str) -> bytes:
    return header(name, 0, tarfile.DIRTYPE)


def layout_of(data: bytes) -> DatasetLayout:
    return survey_dataset_archive(data)


def read(data: bytes) -> list[tuple[str, list[str]]]:
    """Each task the upload holds, in the archive's order, with its files' paths."""
    return [(name, [f.path for f in tree.files]) for name, tree in read_dataset_tasks(data, layout_of(data))]


def refusal(data: bytes) -> TaskRefused:
    with pytest.raises(TaskRefused) as refused:
        read(data)
    return refused.value


@pytest.mark.parametrize(
    ("body", "root"),
    [
        (files(*task("ds/b"), *task("ds/a"), ("ds/README.md", b"about")) + END, "ds/"),  # tar -C parent ds
        (files(*task("./b"), *task("./a"), ("./README.md", b"about")) + END, ""),  # tar -C ds .
        (files(*task("b"), *task("a")) + END, ""),  # tar -C ds a b
    ],
    ids=["the folder", "its contents", "its task folders"],
)
def test_the_task_folders_are_the_archives_folders_sub_folders_sorted_by_name(body, root):
    for data in (body, gzip.compress(body)):
        assert layout_of(data) == DatasetLayout(root, ("a", "b"))
        assert read(data) == [("b", ["instruction.md", "tests/test.sh"]), ("a", ["instruction.md", "tests/test.sh"])]


def test_hidden_folders_and_files_beside_the_task_folders_are_no_tasks():
    body = files(*task("ds/a"), ("ds/.git/HEAD", b"ref"), ("ds/notes.txt", b"x"), *task("ds/.cache")) + END
    assert layout_of(body) == DatasetLayout("ds/", ("a",))
    assert read(body) == [("a", ["instruction.md", "tests/test.sh"])]


def test_one_folder_holding_a_task_is_a_dataset_of_that_task():
    body = files(*task("greet"), ("greet/.hidden/kept", b"x")) + END  # a task's own hidden folder is its own
    assert layout_of(body) == DatasetLayout("", ("greet",))
    assert read(body) == [("greet", [".hidden/kept", "instruction.md", "tests/test.sh"])]


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("body", "entry", "says"),
    [
        (END, "", "the archive holds no task folder"),
        (files(("README.md", b"x"), ("notes.txt", b"y")) + END, "", "the archive holds no task folder"),
        (files(("ds/README.md", b"x")) + folder("ds/.git") + END, "ds", "holds no task folder"),
        (files(*task(".")) + END, "", "the archive holds a task's own files at its top (instruction.md)"),
        (files(*task("ds/a"), ("ds/b/tests/test.sh", TEST_SH)) + END, "b/instruction.md", "is missing"),
        (files(*task("ds/a"), ("ds/a/task.toml", b"[agent\n")) + END, "a/task.toml", "is not valid TOML"),
        (files(*task("ds/a"), ("ds/a/../../x", b"x")) + END, "ds/a/../../x", "a path with .. is not allowed"),
        (
            files(("ds/a/instruction.md", b"x"), *task("ds/b"), ("ds/a/tests/test.sh", TEST_SH)) + END,
            "ds/a",
            "the task folder's entries are not together in the archive",
        ),
        (files(*task("ds/ a")) + END, "ds/ a", "cannot name an environment"),
        (pax(*task("ds/" + "n" * 201)) + END, "ds/" + "n" * 200, "cannot name an environment"),
        (pax(*task("a"), *task("n" * 60_000)) + END, "n" * 200, "cannot name an environment"),
        (files(*task("ds/a")) + header("ds/b", 0, tarfile.SYMTYPE) + END, "ds/b", "a link beside the task folders"),
        (files(*task("a")) + header("b", 0, tarfile.LNKTYPE) + END, "b", "a link beside the task folders"),
    ],
    ids=[
        "empty",
        "files only",
        "a folder of files",
        "a task's own files",
        "no instruction.md",
        "bad task.toml",
        "..",
        "scattered",
        "a space",
        "201 characters",
        "60,000 characters",
        "a symbolic link to a task folder",
        "a hard link at the top",
    ],
)
def test_an_archive_or_task_that_cannot_be_kept_is_refused_naming_the_entry(body, entry, says):
    refused = refusal(body)
    assert (refused.entry, says in refused.says) == (entry, True), str(refused)


def held_mb(action: Callable[[], object]) -> tuple[float, TaskRefused | None]:
    """The most memory (MB) `action` held at once, and its refusal (if any)."""
    tracemalloc.start()
    refused = None
    try:
        action()
    except TaskRefused as error:
        refused = error
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / MB, refused


ZEROS_PER_TASK = 15  # MB: each task within its bound, together past the dataset's
SPREAD = MAX_DATASET_TREE_BYTES // (ZEROS_PER_TASK * MB) + 1  # tasks


def spread_bomb() -> bytes:
    """Task folders of 15 MB of zeros each, past the dataset's 256 MB: each header within a task's bound."""
    head = files(*task("ds/a"))
    parts = [(header(f"ds/t{i:02}/zeros", ZEROS_PER_TASK * MB), ZEROS_PER_TASK) for i in range(SPREAD)]
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31, 9, zlib.Z_RLE)  # as small as the default, twice as fast
    out = [deflate.compress(head)]
    block = bytes(MB)
    for entry, zeros in parts:
        out.append(deflate.compress(entry))
        out += [deflate.compress(block) for _ in range(zeros)]
    out += [deflate.compress(END), deflate.flush()]
    return b"".join(out)


BOMBS = {  # how each is made, and the refusal
    "spread over tasks": (spread_bomb, DATASET_OVER_SIZE),
    "one entry": (lambda: gzipped(files(*task("ds/a")), header("ds/a/z", BOMB_MB * MB), zeros_mb=BOMB_MB), OVER),
    "after the end": (lambda: gzipped(files(*task("ds/a")), END, zeros_mb=BOMB_MB), AFTER_THE_END),
}


@functools.cache
def bomb(kind: str) -> bytes:
    return BOMBS[kind][0]()


@pytest.mark.bad_input
@pytest.mark.parametrize("kind", list(BOMBS))
def test_a_gzip_bomb_is_refused_from_the_headers_holding_next_to_nothing(kind):
    assert len(bomb(kind)) < MB  # under 1 MB that would expand to hundreds
    peak_mb, refused = held_mb(lambda: survey_dataset_archive(bomb(kind)))
    assert refused is not None and BOMBS[kind][1] in refused.says, refused
    assert peak_mb < 1, f"{peak_mb:.1f} MB held reading a {kind} bomb"


def test_the_spread_bomb_is_refused_at_the_entry_past_the_datasets_size():
    refused = refusal(bomb("spread over tasks"))
    assert refused.entry == f"ds/t{SPREAD - 1:02}/zeros" and refused.says == DATASET_OVER_SIZE


def test_tasks_are_read_one_at_a_time_holding_no_more_than_one_task():
    # Eight tasks of 15 MB each (120 MB in all, within the dataset's bound): one is held at a time.
    body = gzipped(*(files(*task(f"ds/t{i}"), (f"ds/t{i}/zeros", bytes(ZEROS_PER_TASK * MB))) for i in range(8)), END)
    layout = survey_dataset_archive(body)
    sizes: list[int] = []
    peak_mb, refused = held_mb(lambda: sizes.extend(tree.size for _, tree in read_dataset_tasks(body, layout)))
    assert refused is None and len(sizes) == 8 and all(size > ZEROS_PER_TASK * MB for size in sizes)
    assert peak_mb < 4 * MAX_TREE_BYTES / MB, f"{peak_mb:.0f} MB held reading 120 MB of tasks"


@pytest.mark.bad_input
def test_ten_thousand_and_one_task_folders_are_refused_from_the_headers():
    for top, entry in (("ds/", "ds"), ("./", "")):  # the folder, or its contents
        body = b"".join(folder(f"{top}t{i:05}") for i in range(MAX_DATASET_TASKS + 1)) + END
        with pytest.raises(TaskRefused) as refused:
            survey_dataset_archive(body)
        assert refused.value.entry == entry
        assert f"holds more than {MAX_DATASET_TASKS} task folders" in refused.value.says


@pytest.mark.bad_input
def test_a_task_past_its_entries_or_size_is_refused_from_its_headers():
    many = files(*task("a"), *((f"a/e{i}", b"") for i in range(MAX_ENTRIES)), *task("b")) + END
    refused = refusal(many)
    assert refused.entry == "a" and f"the task has more than {MAX_ENTRIES} entries" in refused.says
    big = gzipped(files(*task("ds/a"), ("ds/a/x/one", bytes(9 * MB)), ("ds/a/y/two", bytes(9 * MB))), END)
    refused = refusal(big)
    assert refused.entry == "ds/a/y/two" and refused.says == OVER


@pytest.mark.bad_input
def test_entries_past_the_datasets_count_are_refused_before_their_data():
    rounds = MAX_DATASET_ENTRIES // 50 + 1  # the same 50 folders over and over: 2,001 entries of each task
    entries = b"".join(folder(f"ds/t{i}/d") for i in range(50)) * rounds
    body = gzipped(entries, header("ds/zeros", BOMB_MB * MB))  # never reached: refused at the entry past the count
    with pytest.raises(TaskRefused, match=f"the archive has more than {MAX_DATASET_ENTRIES} entries"):
        survey_dataset_archive(body)
