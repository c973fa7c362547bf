"""The two sides of a comparison, parsed once for the compare page and GET /api/v1/compare, and the picker's
default sides."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import Field
from sqlalchemy.orm import Session

from domain.rules import UUID_RULE
from queries.compare import BadSide, Choice, SideRef, find_side
from web.validation import REPORT_MISSING, Invalid, QueryModel, parse

SIDE = "A run id, an environment version id or a dataset run id"
KINDS = {"run": "run", "version": "version", "dataset_run": "dataset run"}


class CompareQuery(QueryModel):
    """GET /compare: two sides, each a run, an environment version (optionally narrowed to one evaluator) or a
    dataset run; A and B differ (a version against itself only under two different evaluators)."""

    a: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING, Field(description=SIDE)]
    b: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING, Field(description=SIDE)]
    a_evaluator_config_id: Annotated[
        uuid.UUID | None, UUID_RULE, Field(description="Narrow version side A to one evaluator")
    ] = None
    b_evaluator_config_id: Annotated[
        uuid.UUID | None, UUID_RULE, Field(description="Narrow version side B to one evaluator")
    ] = None


class SideRefused(Invalid):
    """A pair of sides refused: the API's `error` and `detail`, and `says`, the same refusal in the picker's words,
    `side` the menu it is about ("a", "b", or None for both)."""

    def __init__(self, error: str, detail: str, says: str, side: str | None, status: int = 400) -> None:
        super().__init__(error, detail, status)
        self.says, self.side = says, side


def _named(side: str) -> str:
    return f"side {side.upper()}"


def _query(args: Mapping[str, str]) -> CompareQuery:
    """The query string as CompareQuery, a refusal saying which menu is wrong."""
    try:
        return parse(CompareQuery, dict(args))
    except Invalid as invalid:
        name = invalid.error.split(" ", 1)[-1]
        side = name[0] if name[:1] in ("a", "b") else None
        if invalid.error.startswith("missing"):
            says = f"Choose {_named(side or 'a')}: a version, a run or a dataset run."
        elif name.endswith("EvaluatorConfigId"):
            says = f"Choose the evaluator of {_named(side or 'a')} from its menu."
        else:
            says = f"Choose {_named(side or 'a')} from its menu: a version, a run or a dataset run."
        raise SideRefused(invalid.error, invalid.detail, says, side) from None


def requested_sides(session: Session, args: Mapping[str, str]) -> tuple[SideRef, SideRef]:
    """The sides `a` and `b` (with aEvaluatorConfigId / bEvaluatorConfigId) name; SideRefused when malformed, when
    both name the same thing (400), or unknown in this organization (404)."""
    query = _query(args)
    refs = []
    for name, side_id, evaluator_id in (
        ("a", query.a, query.a_evaluator_config_id),
        ("b", query.b, query.b_evaluator_config_id),
    ):
        try:
            ref = find_side(session, side_id, evaluator_id)
        except BadSide as error:
            kind = "dataset run" if "dataset run" in str(error) else "run"
            raise SideRefused(
                f"invalid {name}EvaluatorConfigId",
                f"{name}EvaluatorConfigId: {error}",
                f"Side {name.upper()} is a {kind}: an evaluator narrows a version, not a {kind}. Choose "
                "“Every evaluator” for it, or a version.",
                name,
            ) from None
        if ref is None:
            raise SideRefused(
                "not found",
                f"no run, environment version, dataset run or evaluator configuration {side_id} for {name}",
                f"Side {name.upper()} names nothing in this organization (it may have been removed): choose another.",
                name,
                404,
            )
        refs.append(ref)
    a, b = refs
    if a.id == b.id and a.evaluator_id == b.evaluator_id:
        what = KINDS.get(a.kind, a.kind)
        raise SideRefused(
            "invalid b",
            "b must differ from a (one version is compared with itself only under two different evaluators)",
            f"A and B are the same {what}: choose two different sides (or one version with two different evaluators).",
            "b",
        )
    return a, b


def picker_defaults(
    versions: Sequence[Choice],
    runs: Sequence[Choice],
    dataset_runs: Sequence[Choice],
    with_run: uuid.UUID | None = None,
) -> tuple[uuid.UUID | None, uuid.UUID | None]:
    """The sides the picker starts from, never one thing on both: `with_run` as B and the run before it of its
    version as A (else the newest other run); else the two newest versions; else the only version's two newest
    runs; else the two newest dataset runs. A side without a distinct candidate is None (the menu asks for one).
    Each list is newest first, versions and runs those of the environment shown."""
    by_id = {run.id: run for run in runs}
    if with_run is not None and with_run in by_id:
        chosen = by_id[with_run]
        position = list(by_id).index(with_run)
        older = [r for r in runs[position + 1 :] if r.version_id == chosen.version_id]
        other = next((r for r in runs if r.id != with_run), None)
        return (older[0].id if older else other.id if other else None), with_run
    if len(versions) > 1:
        return versions[1].id, versions[0].id
    if versions:
        own = [r for r in runs if r.version_id == versions[0].id]
        if len(own) > 1:
            return own[1].id, own[0].id
        return None, versions[0].id
    if len(dataset_runs) > 1:
        return dataset_runs[1].id, dataset_runs[0].id
    return None, (dataset_runs[0].id if dataset_runs else None)
