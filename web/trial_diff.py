"""The trial diff page's request and rows: two trials' steps aligned (domain.trajectory_diff), each side shaped as
the transcript shapes a step (web.transcript.step_view) but with JSON kept as folded text rather than drawn as a
tree (two texts read side by side compare line by line, and two hundred trees a side would cost the page most of its
time), and the stage keys of both in one order."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Annotated

from pydantic import Field

from domain.rules import UUID_RULE
from domain.trajectory import Step
from domain.trajectory_diff import ArgumentChange, TrajectoryDiff, align
from queries.trials import TrialDetail
from web.transcript import StepView, Text, fold, step_view
from web.validation import REPORT_MISSING, QueryModel


class TrialDiffQuery(QueryModel):
    """GET /trials/diff: the two trials, A shown on the left (above on a phone), B on the right."""

    a: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING, Field(description="The trial shown as A")]
    b: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING, Field(description="The trial shown as B")]


KIND_NOTES = {  # what a row that is not the same says beside its steps
    "other_arguments": "same tool, other arguments",
    "changed": "other words",
    "only_a": "only in A",
    "only_b": "only in B",
}


ARGUMENT_SHOWN_CHARS = 300  # of an argument's value in the row's list of differences (the steps show it whole)


@dataclass(frozen=True)
class ArgumentView:
    """An argument two calls of the same tool gave differently, as the row lists it: which (`label`: the key, nested
    keys joined by ".", "call 2 · " first in a step of several calls) and each side's value as JSON (None: not
    given)."""

    label: str
    a: str | None
    b: str | None


def _shown(value: str | None) -> str | None:
    if value is None or len(value) <= ARGUMENT_SHOWN_CHARS:
        return value
    return value[:ARGUMENT_SHOWN_CHARS] + "…"


def argument_views(changes: tuple[ArgumentChange, ...], calls: int) -> list[ArgumentView]:
    """The row's differing arguments as the page lists them (`calls`: how many calls the step made)."""
    views = []
    for change in changes:
        key = ".".join(change.path) or "the arguments"
        label = f"call {change.call + 1} · {key}" if calls > 1 else key
        views.append(ArgumentView(label, _shown(change.a), _shown(change.b)))
    return views


@dataclass(frozen=True)
class DiffRow:
    """One aligned row as the page shows it."""

    a: StepView | None
    b: StepView | None
    kind: str  # a domain.trajectory_diff.RowKind
    result_differs: bool
    first_divergence: bool
    arguments: list[ArgumentView]

    @property
    def note(self) -> str | None:
        """What the row says about itself: "only in A", "other words", "same call, other result"; None when the
        two sides are the same."""
        if self.kind == "same":
            return "same call, other result" if self.result_differs else None
        return KIND_NOTES[self.kind]

    @property
    def css(self) -> str:
        return self.kind.replace("_", "-")


@dataclass(frozen=True)
class DiffView:
    """The page's figures: the aligned rows, the first divergence's row (index), the stage keys of both trials."""

    rows: list[DiffRow]
    diff: TrajectoryDiff
    stage_keys: list[str]

    @property
    def first(self) -> DiffRow | None:
        index = self.diff.first_divergence
        return self.rows[index] if index is not None else None


def flat(text: Text) -> Text:
    """A text as the diff shows it: a JSON tree becomes its text, folded like any other long text."""
    if not text.is_tree:
        return text
    shown, rest = fold(text.text)
    return Text(text.text, shown, rest)


def side_view(step: Step | None, trial: TrialDetail) -> StepView | None:
    """One side of a row: the step of `trial` as the transcript shapes it, its texts flat (see `flat`)."""
    if step is None:
        return None
    view = step_view(step, imported=trial.imported, offered=trial.offered_tools)
    texts = [view.message, view.reasoning, *(call.result for call in view.calls), *view.results]
    if not any(text is not None and text.is_tree for text in texts):
        return view
    return replace(
        view,
        message=flat(view.message) if view.message else None,
        reasoning=flat(view.reasoning) if view.reasoning else None,
        calls=[replace(call, result=flat(call.result) if call.result else None) for call in view.calls],
        results=[flat(result) for result in view.results],
    )


def diff_view(a: TrialDetail, b: TrialDetail) -> DiffView:
    """The two trials' steps aligned and shaped for the page."""
    diff = align(a.steps, b.steps)
    rows = [
        DiffRow(
            side_view(row.a, a),
            side_view(row.b, b),
            row.kind,
            row.result_differs,
            index == diff.first_divergence,
            argument_views(row.arguments, len(row.a.tool_calls or ()) if row.a else 0),
        )
        for index, row in enumerate(diff.rows)
    ]
    return DiffView(rows, diff, list(dict.fromkeys([*a.stages, *b.stages])))
