"""Two trajectories aligned step by step: the trial diff's rows and where the two first part ways.

Tool calls are the spine. Each step that calls a tool (or, with no call recorded, acts under a tool name, as an
MCP server's `initialize` does) has a key: its calls' (tool name, arguments as canonical JSON), in order. The
longest common subsequence of the two sides' keys pairs the calls both made in the same order; between two paired
calls, the steps that call nothing (messages, notes) pair by position (the first message after a call in A with
the first in B), and every other step stands alone on its side. So

    A: list_inventory {} · restock {"sku": "SKU-2", "quantity": 4} · "Done."
    B: list_inventory {} · restock {"sku": "SKU-2", "quantity": 5} · "Done."

becomes four rows: both list_inventory, A's restock alone, B's restock alone, both messages; the first divergence
is the second row.

A row is `same` when both sides made the same calls (their results may still differ: `result_differs`) or said the
same words, `changed` when both sides speak but in other words, `only_a`/`only_b` when one side has no step there.
The first divergence is the first row that is not `same`; None when the two take the same steps.

Cost: the common start and end are matched in linear time; what lies between is aligned by the classic dynamic
programme over (tool-call steps of A) x (those of B) cells, exact up to EXACT_CELLS cells (two trials of 500 calls
each that share nothing). Beyond that (imported trajectories can be longer) the middle is split on calls that occur
once on each side (patience anchors) and each piece aligned the same way; a piece still too large and without such
an anchor is left unpaired, and the diff says it is not exact (`exact` False).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from domain.trajectory import Step, content_text

RowKind = Literal["same", "other_arguments", "changed", "only_a", "only_b"]
EXACT_CELLS = 250_000  # the largest middle aligned exactly: 500 x 500 tool-call steps


def canonical(value: Any) -> str:
    """`value` as canonical JSON: keys sorted, no spaces, text as it is (what two equal arguments share)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def call_key(step: Step) -> str | None:
    """What a step is aligned by: its calls' (tool name, canonical JSON arguments), or, for a step that acts under a
    tool name without a recorded call (an environment's `initialize`), that name and its command; None for a step
    that calls nothing (a message)."""
    if step.tool_calls:
        calls = []
        for call in step.tool_calls:
            arguments = call.arguments if call.arguments is not None else call.other.get("arguments")
            calls.append([call.name or step.tool, arguments])
        return canonical(calls)
    if step.tool:
        return canonical([step.tool, step.command])
    return None


def name_key(step: Step) -> str | None:
    """What a call pairs by when its arguments differ: its step's tool names, in order (a step acting under a tool
    name without a recorded call keeps its whole `call_key`: an `initialize` never pairs with a `tools/list`); None
    for a step that calls nothing."""
    if step.tool_calls:
        return canonical([call.name or step.tool for call in step.tool_calls])
    return call_key(step)


def _arguments(call: Any) -> Any:
    return call.arguments if call.arguments is not None else call.other.get("arguments")


@dataclass(frozen=True)
class ArgumentChange:
    """An argument two calls of the same tool gave differently: the call's place in its step (`call`, from 0), the
    key (`path`: nested keys, outermost first; empty when the arguments are no object) and each side's value as
    canonical JSON, None when that side gave no such key."""

    call: int
    path: tuple[str, ...]
    a: str | None
    b: str | None


def argument_changes(a: Step, b: Step) -> tuple[ArgumentChange, ...]:
    """The arguments in which two steps calling the same tools differ, call by call, each key by key inside objects
    (a list or any other value compares whole), in key order."""
    changes: list[ArgumentChange] = []
    for index, (call_a, call_b) in enumerate(zip(a.tool_calls or (), b.tool_calls or (), strict=False)):
        pending: list[tuple[tuple[str, ...], Any, Any]] = [((), _arguments(call_a), _arguments(call_b))]
        while pending:
            path, value_a, value_b = pending.pop()
            if isinstance(value_a, dict) and isinstance(value_b, dict):
                for key in sorted(set(value_a) | set(value_b), reverse=True):  # popped in key order
                    pending.append(
                        (
                            (*path, key),
                            value_a.get(key, _ABSENT),
                            value_b.get(key, _ABSENT),
                        )
                    )
                continue
            shown_a = None if value_a is _ABSENT else canonical(value_a)
            shown_b = None if value_b is _ABSENT else canonical(value_b)
            if shown_a != shown_b:
                changes.append(ArgumentChange(index, path, shown_a, shown_b))
    return tuple(changes)


_ABSENT = object()  # a key one side's arguments do not have


def _said(step: Step) -> tuple[str | None, str, tuple[str, ...]]:
    """What a step that calls nothing said: who, its words, what came back (compared to pair messages)."""
    return step.source, content_text(step.message), _results(step)


def _results(step: Step) -> tuple[str, ...]:
    """The texts that came back to a step, in order (its observation when it recorded no results)."""
    if step.results:
        return tuple(result.text for result in step.results)
    return (step.observation,) if step.observation else ()


@dataclass(frozen=True)
class AlignedRow:
    """One row of the diff: A's step and B's step beside it (None: that side has no step here)."""

    a: Step | None
    b: Step | None
    kind: RowKind
    result_differs: bool = False  # a `same` call whose results differ (another world, another answer)
    arguments: tuple[ArgumentChange, ...] = ()  # an `other_arguments` row's differing arguments


@dataclass(frozen=True)
class TrajectoryDiff:
    """The aligned rows, the index of the first that is not `same` (None: the same steps), and whether the
    alignment is the exact longest common subsequence of the calls (see the module's text)."""

    rows: tuple[AlignedRow, ...]
    first_divergence: int | None
    exact: bool = True

    @property
    def identical(self) -> bool:
        """True when both sides took the same steps (results aside)."""
        return self.first_divergence is None

    def count(self, kind: RowKind) -> int:
        """How many rows are of `kind`."""
        return sum(1 for row in self.rows if row.kind == kind)


def align(a: Sequence[Step], b: Sequence[Step]) -> TrajectoryDiff:
    """The two trajectories aligned (see the module's text)."""
    keys_a, keys_b = [call_key(step) for step in a], [call_key(step) for step in b]
    keyed_a = [(index, key) for index, key in enumerate(keys_a) if key is not None]
    keyed_b = [(index, key) for index, key in enumerate(keys_b) if key is not None]
    numbers: dict[str, int] = {}  # each distinct key as a small integer: cheaper to compare
    xs = [numbers.setdefault(key, len(numbers)) for _, key in keyed_a]
    ys = [numbers.setdefault(key, len(numbers)) for _, key in keyed_b]
    pairs, exact = common_subsequence(xs, ys)

    rows: list[AlignedRow] = []
    start_a = start_b = 0
    for i, j in [*((keyed_a[x][0], keyed_b[y][0]) for x, y in pairs), (len(a), len(b))]:
        rows.extend(_between(a[start_a:i], b[start_b:j], keys_a[start_a:i], keys_b[start_b:j]))
        if i < len(a):
            rows.append(AlignedRow(a[i], b[j], "same", _results(a[i]) != _results(b[j])))
        start_a, start_b = i + 1, j + 1
    first = next((index for index, row in enumerate(rows) if row.kind != "same"), None)
    return TrajectoryDiff(tuple(rows), first, exact)


def _between(
    a: Sequence[Step], b: Sequence[Step], keys_a: Sequence[str | None], keys_b: Sequence[str | None]
) -> list[AlignedRow]:
    """The rows between two calls paired whole: the calls of the same tools paired by a longest common subsequence of
    their names (`name_key`), and between those the rest (`_unpaired`)."""
    named_a = [(index, name_key(step)) for index, step in enumerate(a) if keys_a[index] is not None]
    named_b = [(index, name_key(step)) for index, step in enumerate(b) if keys_b[index] is not None]
    if not named_a or not named_b:
        return _unpaired(a, b, keys_a, keys_b)
    numbers: dict[str | None, int] = {}
    xs = [numbers.setdefault(name, len(numbers)) for _, name in named_a]
    ys = [numbers.setdefault(name, len(numbers)) for _, name in named_b]
    pairs, _ = common_subsequence(xs, ys)
    rows: list[AlignedRow] = []
    start_a = start_b = 0
    for i, j in [*((named_a[x][0], named_b[y][0]) for x, y in pairs), (len(a), len(b))]:
        rows.extend(_unpaired(a[start_a:i], b[start_b:j], keys_a[start_a:i], keys_b[start_b:j]))
        if i < len(a):
            if keys_a[i] == keys_b[j]:  # the same call, left unpaired by the whole keys' order
                rows.append(AlignedRow(a[i], b[j], "same", _results(a[i]) != _results(b[j])))
            else:
                changes = argument_changes(a[i], b[j])
                rows.append(AlignedRow(a[i], b[j], "other_arguments", _results(a[i]) != _results(b[j]), changes))
        start_a, start_b = i + 1, j + 1
    return rows


def _unpaired(
    a: Sequence[Step], b: Sequence[Step], keys_a: Sequence[str | None], keys_b: Sequence[str | None]
) -> list[AlignedRow]:
    """The rows between two paired calls: the steps that call nothing paired by position, each unpaired step on its
    own row (A's before B's)."""
    quiet_a = [index for index, key in enumerate(keys_a) if key is None]
    quiet_b = [index for index, key in enumerate(keys_b) if key is None]
    rows: list[AlignedRow] = []
    start_a = start_b = 0
    for i, j in [*zip(quiet_a, quiet_b, strict=False), (len(a), len(b))]:
        rows.extend(AlignedRow(step, None, "only_a") for step in a[start_a:i])
        rows.extend(AlignedRow(None, step, "only_b") for step in b[start_b:j])
        if i < len(a) and j < len(b):
            rows.append(AlignedRow(a[i], b[j], "same" if _said(a[i]) == _said(b[j]) else "changed"))
        start_a, start_b = i + 1, j + 1
    return rows


def common_subsequence(xs: Sequence[int], ys: Sequence[int]) -> tuple[list[tuple[int, int]], bool]:
    """The index pairs (i, j), in order, of a longest common subsequence of `xs` and `ys`, and True when it is
    one (False when a middle over EXACT_CELLS was split on unique anchors instead; see the module's text)."""
    pairs: list[tuple[int, int]] = []
    exact = True
    pending = [(0, len(xs), 0, len(ys))]
    while pending:
        x0, x1, y0, y1 = pending.pop()
        while x0 < x1 and y0 < y1 and xs[x0] == ys[y0]:  # the common start
            pairs.append((x0, y0))
            x0, y0 = x0 + 1, y0 + 1
        while x0 < x1 and y0 < y1 and xs[x1 - 1] == ys[y1 - 1]:  # the common end
            x1, y1 = x1 - 1, y1 - 1
            pairs.append((x1, y1))
        if x0 == x1 or y0 == y1:
            continue
        if (x1 - x0) * (y1 - y0) <= EXACT_CELLS:
            pairs.extend((x0 + i, y0 + j) for i, j in _table_lcs(xs[x0:x1], ys[y0:y1]))
            continue
        exact = False
        anchors = _unique_anchors(xs, ys, x0, x1, y0, y1)
        last_x, last_y = x0, y0
        for i, j in anchors:
            pairs.append((i, j))
            pending.append((last_x, i, last_y, j))
            last_x, last_y = i + 1, j + 1
        if anchors:
            pending.append((last_x, x1, last_y, y1))
    pairs.sort()
    return pairs, exact


def _table_lcs(xs: Sequence[int], ys: Sequence[int]) -> list[tuple[int, int]]:
    """A longest common subsequence by the O(n·m) table of suffix lengths, read from the front (a tie skips A's
    element first, so A's unpaired steps come before B's)."""
    n, m = len(xs), len(ys)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        x, row, below = xs[i], table[i], table[i + 1]
        for j in range(m - 1, -1, -1):
            if x == ys[j]:
                row[j] = below[j + 1] + 1
            else:
                down, right = below[j], row[j + 1]
                row[j] = down if down >= right else right
    pairs = []
    i = j = 0
    while i < n and j < m:
        if xs[i] == ys[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _unique_anchors(xs: Sequence[int], ys: Sequence[int], x0: int, x1: int, y0: int, y1: int) -> list[tuple[int, int]]:
    """The values that occur once in xs[x0:x1] and once in ys[y0:y1], as (i, j) pairs: the longest chain of them
    increasing on both sides (patience sorting, O(k log k))."""
    seen_x: dict[int, int] = {}
    for i in range(x0, x1):
        seen_x[xs[i]] = -1 if xs[i] in seen_x else i
    seen_y: dict[int, int] = {}
    for j in range(y0, y1):
        seen_y[ys[j]] = -1 if ys[j] in seen_y else j
    candidates = sorted((i, seen_y[v]) for v, i in seen_x.items() if i >= 0 and seen_y.get(v, -1) >= 0)
    tails: list[int] = []  # the smallest j ending a chain of each length
    ends: list[int] = []  # the candidate index ending it
    back: list[int] = []  # each candidate's predecessor in its chain
    for index, (_, j) in enumerate(candidates):
        length = bisect.bisect_left(tails, j)
        back.append(ends[length - 1] if length else -1)
        if length == len(tails):
            tails.append(j)
            ends.append(index)
        else:
            tails[length], ends[length] = j, index
    chain = []
    index = ends[-1] if ends else -1
    while index >= 0:
        chain.append(candidates[index])
        index = back[index]
    return chain[::-1]
