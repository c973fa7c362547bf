"""The two sides of a comparison, parsed once for the compare page and GET /api/v1/compare."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated

from pydantic import Field
from sqlalchemy.orm import Session

from domain.rules import UUID_RULE
from queries.compare import BadSide, SideRef, find_side
from web.validation import REPORT_MISSING, Invalid, QueryModel, parse

SIDE = "A run id, an environment version id or a dataset run id"


class CompareQuery(QueryModel):
    """GET /compare: two sides, each a run, an environment version (optionally narrowed to one evaluator) or a
    dataset run."""

    a: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING, Field(description=SIDE)]
    b: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING, Field(description=SIDE)]
    a_evaluator_config_id: Annotated[
        uuid.UUID | None, UUID_RULE, Field(description="Narrow version side A to one evaluator")
    ] = None
    b_evaluator_config_id: Annotated[
        uuid.UUID | None, UUID_RULE, Field(description="Narrow version side B to one evaluator")
    ] = None


def requested_sides(session: Session, args: Mapping[str, str]) -> tuple[SideRef, SideRef]:
    """The sides `a` and `b` (with aEvaluatorConfigId / bEvaluatorConfigId) name; Invalid when malformed (400) or
    unknown in this organization (404)."""
    query = parse(CompareQuery, dict(args))
    refs = []
    for name, side_id, evaluator_id in (
        ("a", query.a, query.a_evaluator_config_id),
        ("b", query.b, query.b_evaluator_config_id),
    ):
        try:
            ref = find_side(session, side_id, evaluator_id)
        except BadSide as error:
            raise Invalid(f"invalid {name}EvaluatorConfigId", f"{name}EvaluatorConfigId: {error}") from None
        if ref is None:
            raise Invalid(
                "not found",
                f"no run, environment version, dataset run or evaluator configuration {side_id} for {name}",
                404,
            )
        refs.append(ref)
    return refs[0], refs[1]
