"""A folder of Harbor task folders (what `harbor run -p DIR` takes) as one upload: where its task folders are, and
each task read within the same rules and bounds as a single task's upload (domain.harbor_task).

The upload is a tar (gzip or not) of the folder (`tar -czf - -C parent DIR`: every entry under `DIR/`) or of its
contents (`tar -czf - -C DIR .`). Each sub-folder of it is a task folder, sorted by name as Harbor lists them, except
hidden ones (`.git`); files beside the task folders (a README) are no task and are left out. A single folder holding
instruction.md itself is read as a folder holding that one task.

It is read twice, as a stream both times, so what is held is at most one task's files whatever the upload expands
to: `survey_dataset_archive` reads only the headers (refusing from them, before any task is read: more than
MAX_DATASET_TASKS task folders or MAX_DATASET_ENTRIES entries, a file or task over MAX_TREE_BYTES, a task of more
than MAX_ENTRIES entries, more than MAX_DATASET_TREE_BYTES of files; the tar itself stops at MAX_DATASET_TAR_BYTES);
then `read_dataset_tasks` reads the tasks one after the other, each as a single task's upload is read. A task's
entries come together in the archive (tar writes a folder's entries together); a task folder scattered through the
archive is refused, as is one whose name cannot name an environment (1 to 200 characters, no space at either end)
and a link where a task folder would be (Harbor would follow it; a task folder here is a folder).
An entry that cannot be kept is named by its path in the archive (`tasks/greet/link`), a file a task lacks or cannot
read inside its task folder (`greet/instruction.md`).
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field

from domain.datasets import MAX_DATASET_TASKS
from domain.harbor_task import (
    MAX_ENTRIES,
    MAX_TREE_BYTES,
    OVER_SIZE,
    TarEntry,
    TaskFiles,
    TaskRefused,
    TaskTree,
    not_a_file,
    tar_entries,
)
from domain.rules import NAME, NAME_CHARS, Refused

MB = 1024 * 1024
MAX_DATASET_TREE_BYTES = 256 * MB  # the files of every task together, uncompressed
# The upload's tar, uncompressed (files, headers and padding), is read up to the dataset's size and one tar block.
MAX_DATASET_TAR_BYTES = MAX_DATASET_TREE_BYTES + tarfile.BLOCKSIZE
MAX_DATASET_UPLOAD_BYTES = 64 * MB  # an upload as sent
# 10 for each of MAX_DATASET_TASKS tasks (a folder, instruction.md, task.toml, environment/Dockerfile, tests/test.sh,
# solution/solve.sh and their folders); tarfile reads a header in about 50 µs, so 5 s of a core at most.
MAX_DATASET_ENTRIES = 100_000
DATASET_OVER_SIZE = f"the dataset is over {MAX_DATASET_TREE_BYTES // MB} MB uncompressed"
NO_TASK = "a sub-folder holding instruction.md and tests/test.sh"
FOLDER_NAME = NAME  # a task folder names its environment, as an environment's name is held


@dataclass(frozen=True)
class DatasetLayout:
    """Where an upload's task folders are: `root`, the folder that holds them (`tasks/`, or "" for the archive's
    top), and their names, sorted as Harbor lists them."""

    root: str
    folders: tuple[str, ...]

    def folder_of(self, entry: TarEntry) -> str | None:
        """The task folder `entry` belongs to, or None (the root itself, a file beside the tasks, a hidden folder)."""
        if not entry.path.startswith(self.root):
            return None
        inside = entry.path[len(self.root) :]
        if not inside or ("/" not in inside and not entry.member.isdir()):
            return None
        folder = inside.split("/", 1)[0]
        return None if _hidden(folder) else folder


@dataclass
class _Group:
    """A folder's files and entries so far."""

    bytes: int = 0
    entries: int = 0


@dataclass
class _Sequence:
    """The folders a run of entries passed through, in order: the first one met again after another began."""

    current: str | None = None
    done: set[str] = field(default_factory=set)
    scattered: str | None = None

    def meet(self, name: str) -> None:
        if name == self.current:
            return
        if name in self.done and self.scattered is None:
            self.scattered = name
        if self.current is not None:
            self.done.add(self.current)
        self.current = name


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _holds(where: str, says: str) -> TaskRefused:
    """A refusal of the folder `where` (or "" for the archive's top) for what it holds: `says` follows "holds"."""
    return TaskRefused(where, f"holds {says}" if where else f"the archive holds {says}")


def _too_many(where: str) -> TaskRefused:
    return _holds(where, f"more than {MAX_DATASET_TASKS} task folders, the most a dataset version holds")


class _Survey:
    """What an upload's headers say, entry by entry: its top folders (and, while every entry is in one folder, that
    folder's sub-folders), each with its files' bytes and its entries, and whether each was written together."""

    def __init__(self) -> None:
        self.entries = self.total = 0
        self.first: str | None = None  # the first folder at the top
        self.many = False  # more than one folder at the top, or a file there: the tasks are the top's folders
        self.flat_task = False  # instruction.md at the archive's top: a task's own files, not a folder of tasks
        self.first_is_task = False  # <first>/instruction.md: the one folder is a task itself
        self.tops: dict[str, _Group] = {}
        self.children: dict[str, _Group] = {}  # the first folder's sub-folders, while it may hold the tasks
        self.top_order, self.child_order = _Sequence(), _Sequence()
        self.long_child: str | None = None
        self.top_link: str | None = None  # a link at the archive's top, or in the first folder (beside its tasks)
        self.child_link: str | None = None

    def add(self, entry: TarEntry) -> None:
        member, path = entry.member, entry.path
        self.entries += 1
        if self.entries > MAX_DATASET_ENTRIES:
            raise TaskRefused("", f"the archive has more than {MAX_DATASET_ENTRIES} entries")
        if not path:
            return
        size = 0
        if member.isfile():
            size = member.size
            self.total += size
            if size > MAX_TREE_BYTES:  # over any task it could be in
                raise TaskRefused(path, OVER_SIZE)
            if self.total > MAX_DATASET_TREE_BYTES:
                raise TaskRefused(path, DATASET_OVER_SIZE)
        elif not (member.isdir() or member.issym() or member.islnk()):
            raise not_a_file(member, path)
        parts = path.split("/")
        link = member.issym() or member.islnk()
        if len(parts) == 1 and not member.isdir():
            self.flat_task = self.flat_task or path == "instruction.md"
            self.top_link = self.top_link or (path if link else None)
            self._many()
            return
        self._top(parts[0], path, size)
        if not self.many and parts[0] == self.first:
            if parts[1:] == ["instruction.md"] and member.isfile():
                self.first_is_task = True
            if len(parts) > 2 or (len(parts) == 2 and member.isdir()):
                self._child(parts[0], parts[1], path, size)
            elif len(parts) == 2 and link:
                self.child_link = self.child_link or path

    def _many(self) -> None:
        """The tasks are the top's folders: each is held to a task's bounds from now on."""
        if not self.many:
            self.many, self.children = True, {}
            for name, group in self.tops.items():
                self._within_task(name, name, group)

    def _top(self, name: str, path: str, size: int) -> None:
        if self.first is None:
            self.first = name
        elif name != self.first:
            self._many()
        if _hidden(name):
            return
        group = self.tops.get(name)
        if group is None:
            if len(self.tops) >= MAX_DATASET_TASKS:
                raise _too_many("")
            if len(name) > NAME_CHARS and self.many:  # a task folder (the tops are), and not worth holding
                raise TaskRefused(name[:NAME_CHARS], NAME_SAYS)
            group = self.tops[name] = _Group()
        group.bytes += size
        group.entries += 1
        self.top_order.meet(name)
        if self.many:
            self._within_task(name, path, group)

    def _child(self, top: str, name: str, path: str, size: int) -> None:
        if _hidden(name):
            return
        if len(name) > NAME_CHARS:  # cannot name an environment, and not worth holding: refused if it is a task folder
            self.long_child = self.long_child or f"{top}/{name[:NAME_CHARS]}"
            return
        group = self.children.get(name)
        if group is None:
            if len(self.children) >= MAX_DATASET_TASKS:
                raise _too_many(top)
            group = self.children[name] = _Group()
        group.bytes += size
        group.entries += 1
        self.child_order.meet(name)
        self._within_task(f"{top}/{name}", path, group)  # over a task's bounds either way: it is one, or in one

    @staticmethod
    def _within_task(task: str, path: str, group: _Group) -> None:
        if group.bytes > MAX_TREE_BYTES:
            raise TaskRefused(path, OVER_SIZE)
        if group.entries > MAX_ENTRIES:
            raise TaskRefused(task, f"the task has more than {MAX_ENTRIES} entries")

    def layout(self) -> DatasetLayout:
        """Where the task folders are, once every header is read, or TaskRefused."""
        if self.flat_task:
            raise TaskRefused(
                "",
                "the archive holds a task's own files at its top (instruction.md), not a folder of task folders: "
                "archive the folder that holds the task folders (tar -czf - -C parent folder)",
            )
        if self.many or self.first is None or self.first_is_task:
            root, names, order, link = "", self.tops, self.top_order, self.top_link
            for name, group in self.tops.items():
                self._within_task(name, name, group)
        else:
            if self.long_child:
                raise TaskRefused(self.long_child, NAME_SAYS)
            root, names, order, link = self.first + "/", self.children, self.child_order, self.child_link
        if link is not None:
            raise TaskRefused(
                link, "a link beside the task folders is not allowed: a task folder is a folder (copy it in)"
            )
        if not names:
            raise _holds(root.rstrip("/"), f"no task folder ({NO_TASK})")
        if order.scattered is not None:
            raise TaskRefused(
                root + order.scattered,
                "the task folder's entries are not together in the archive (tar writes each folder's entries "
                "together: archive the folder with tar)",
            )
        for name in names:
            if not _names_an_environment(name):
                raise TaskRefused(root + name, NAME_SAYS)
        return DatasetLayout(root, tuple(sorted(names)))


NAME_SAYS = (
    f"cannot name an environment: a task folder's name is 1 to {NAME_CHARS} characters, without a space at either end"
)


def _names_an_environment(name: str) -> bool:
    """Whether `name` is an environment's name as it is (the name rule holds names stripped)."""
    try:
        return bool(FOLDER_NAME.apply(name) == name)
    except Refused:
        return False


def survey_dataset_archive(data: bytes) -> DatasetLayout:
    """Where the task folders of a tar or tar.gz upload are, read from its headers alone (no file's data is held), or
    TaskRefused naming the entry (or "" for the archive itself)."""
    survey = _Survey()
    for entry in tar_entries(data, MAX_DATASET_TAR_BYTES, DATASET_OVER_SIZE):
        survey.add(entry)
    return survey.layout()


def read_dataset_tasks(data: bytes, layout: DatasetLayout) -> Iterator[tuple[str, TaskTree]]:
    """Each task of the upload, as `(folder, tree)` in the archive's order, read and checked as a single task's upload
    is, one at a time (a task's files are let go before the next task is read); TaskRefused names the entry."""
    current: str | None = None
    files = TaskFiles()
    for entry in tar_entries(data, MAX_DATASET_TAR_BYTES, DATASET_OVER_SIZE):
        folder = layout.folder_of(entry)
        if folder is None:
            continue
        if folder != current:
            if current is not None:
                yield current, files.tree(layout.root + current + "/", current)
            current, files = folder, TaskFiles()
        files.add(entry)
    if current is not None:
        yield current, files.tree(layout.root + current + "/", current)
