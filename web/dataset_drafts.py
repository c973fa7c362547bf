"""A dataset version's draft as the dataset page keeps it: in the form itself, as lines of a textarea, never on the
server.

One line per run of tasks: `<environment version id> <world seeds>  # <environment> v<n>`. World seeds are written
`1..50` (1 through 50), `3, 9, 27`, or both (`1..5, 9`), in the order the tasks take; a Harbor-task version's line
has none (it is one task by itself). What follows `#` is the page's note of what the version is, and is not read.
The lines become the tasks an API request would list (domain.datasets.TaskInput), each refusal naming its line (every
line that cannot be read at once), so writes.datasets refuses the page's draft with the rules and words it refuses
the API's body with.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from domain.datasets import MAX_DATASET_TASKS, WORLD_SEED, DatasetRefusals, DatasetRefused, TaskInput
from domain.rules import UUID_RULE, Refused, Rule

MAX_DRAFT_CHARS = 400_000  # the textarea: 10,000 tasks of ten-digit seeds, one line each with its note, fit
NOTE_CHARS = 60  # of an environment's name in a line's note
DRAFT = "The task list"
ADDED = "The tasks to add"
_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class DraftLine:
    """One line read: what names it in a refusal (`Line 3`), its environment version, and its world seeds as
    (first, last) runs, None for a line without seeds."""

    label: str
    version_id: uuid.UUID
    runs: tuple[tuple[int, int], ...] | None

    @property
    def count(self) -> int:
        """How many tasks the line stands for."""
        return 1 if self.runs is None else sum(last - first + 1 for first, last in self.runs)


def _apply(rule: Rule, text: str, field: str) -> Any:
    try:
        return rule.apply_text(text)
    except Refused as refused:
        raise DatasetRefused(field, refused.says) from None


def seed_runs(text: str, label: str) -> tuple[tuple[int, int], ...]:
    """World seeds as written (`1..50, 77`) as (first, last) runs in order; DatasetRefused naming `label` for a seed
    out of range or a run that goes down."""
    runs = []
    for item in (part for part in _SEPARATORS.split(text.strip()) if part):
        first_text, dots, last_text = item.partition("..")
        first = _apply(WORLD_SEED, first_text, f"{label}: world seed")
        last = _apply(WORLD_SEED, last_text, f"{label}: world seed") if dots else first
        if last < first:
            raise DatasetRefused(f"{label}: world seeds {item}", "must go up, first..last (1..50)")
        runs.append((first, last))
    return tuple(runs)


def read_line(text: str, label: str) -> DraftLine | None:
    """A line of the draft (None when it holds nothing but a note); DatasetRefused naming `label`."""
    body = text.split("#", 1)[0].strip()
    if not body:
        return None
    head, *seeds = body.split(None, 1)
    version_id = _apply(UUID_RULE, head, f"{label}: the environment version id")
    return DraftLine(label, version_id, seed_runs(seeds[0], label) if seeds else None)


def read_draft(draft: str, added: str = "") -> list[DraftLine]:
    """The draft's lines, `added` (the line being added, named "The tasks to add") last; DatasetRefusals naming every
    line that cannot be read, else DatasetRefused for more than MAX_DATASET_TASKS tasks in all."""
    numbered = [(f"Line {number}", text) for number, text in enumerate(draft.splitlines(), start=1)]
    lines: list[DraftLine] = []
    refusals: list[DatasetRefused] = []
    for label, text in [*numbered, (ADDED, added)]:
        try:
            line = read_line(text, label)
        except DatasetRefused as refused:
            refusals.append(refused)
            continue
        if line is not None:
            lines.append(line)
    if refusals:
        raise DatasetRefusals(refusals)
    total = sum(line.count for line in lines)
    if total > MAX_DATASET_TASKS:
        raise DatasetRefused(DRAFT, f"holds {total} tasks; a dataset version holds 1 to {MAX_DATASET_TASKS}")
    return lines


def draft_tasks(lines: Sequence[DraftLine]) -> list[TaskInput]:
    """The tasks `lines` stand for, in order, each naming its line for the rules of domain.datasets and
    writes.datasets (a task twice, a seed on a Harbor task, none on a built-in or MCP one, a version not ours)."""
    if not lines:
        raise DatasetRefused(DRAFT, "holds no task yet: add tasks of an environment version first")
    tasks = []
    for line in lines:
        version = f"{line.label}: environment version"
        if line.runs is None:
            tasks.append(TaskInput(line.version_id, None, version, f"{line.label}: a world seed"))
            continue
        for first, last in line.runs:
            for seed in range(first, last + 1):
                tasks.append(TaskInput(line.version_id, seed, version, f"{line.label}: world seed {seed}"))
    return tasks


def _runs_text(runs: Iterable[tuple[int, int]]) -> str:
    """Runs of seeds as a line writes them: `1..3, 7`."""
    return ", ".join(f"{first}..{last}" if last > first else str(first) for first, last in runs)


def runs_of(seeds: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Seeds in order as runs of consecutive ones: 1, 2, 3, 7 → (1, 3), (7, 7)."""
    runs: list[list[int]] = []
    for seed in seeds:
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    return tuple((first, last) for first, last in runs)


def note(environment_name: str, version: int) -> str:
    """The note a line carries: the environment (its name on one line, cut) and version number."""
    name = " ".join(environment_name.split())
    return f"{name[:NOTE_CHARS]}{'…' if len(name) > NOTE_CHARS else ''} v{version}"


def line_of(version_id: uuid.UUID, runs: Iterable[tuple[int, int]] | None, what: str | None) -> str:
    """A draft line: the version, its seeds as runs (None: a Harbor task's line, no seed) and the note `what`."""
    return f"{version_id}{'' if runs is None else ' ' + _runs_text(runs)}{'' if what is None else '  # ' + what}"


def draft_of(tasks: Iterable[tuple[uuid.UUID, int | None, str]]) -> str | None:
    """The draft that lists `tasks` (environment version, world seed, note) in order: one line per run of tasks of
    one version, without the notes when they would not fit MAX_DRAFT_CHARS; None when even that does not fit."""
    lines: list[tuple[uuid.UUID, list[int] | None, str]] = []
    for version_id, seed, what in tasks:
        last = lines[-1] if lines else None
        if last is not None and last[0] == version_id and last[1] is not None and seed is not None:
            last[1].append(seed)
        else:
            lines.append((version_id, None if seed is None else [seed], what))
    noted = "\n".join(
        line_of(version_id, None if seeds is None else runs_of(seeds), what) for version_id, seeds, what in lines
    )
    if len(noted) <= MAX_DRAFT_CHARS:
        return noted
    bare = "\n".join(
        line_of(version_id, None if seeds is None else runs_of(seeds), None) for version_id, seeds, _ in lines
    )
    return bare if len(bare) <= MAX_DRAFT_CHARS else None
