"""Insights area: capability gap (failure categories) and partial rewards (stage_* keys)."""

import uuid

from flask import Blueprint, abort
from sqlalchemy.orm import Session

from queries.insights import (
    EvaluatorOption,
    capability_gap,
    evaluator_options,
    find_evaluator,
    version_options,
    version_stages,
    versions_stages,
)
from web.database import request_session
from web.htmx import render, wants_fragment
from web.params import optional_uuid

bp = Blueprint("insights", __name__)

# Versions whose stage tables the first response holds (one statement for all of them): the page reads without
# JavaScript; any further version loads as an htmx fragment when revealed, with a link to its own page.
EAGER_VERSIONS = 10


def chosen_evaluator(session: Session) -> EvaluatorOption | None:
    """The evaluatorConfigId query parameter's evaluator: None when absent, 400 when malformed, 404 when it is not
    one of the organization's (unknown and another organization's alike)."""
    evaluator_id = optional_uuid("evaluatorConfigId")
    if evaluator_id is None:
        return None
    evaluator = find_evaluator(session, evaluator_id)
    if evaluator is None:
        abort(404, description=f"No evaluator configuration {evaluator_id} in this organization.")
    return evaluator


@bp.get("/capability-gap")
def gap():
    """Counts of the real failure_category values, overall and per environment version, with filters (environment,
    version, evaluator)."""
    session = request_session()
    environment_id, version_id = optional_uuid("environmentId"), optional_uuid("environmentVersionId")
    evaluator = chosen_evaluator(session)
    data = capability_gap(session, environment_id, version_id, evaluator.id if evaluator else None)
    return render(
        "insights/capability_gap.html",
        "gap_results",
        gap=data,
        environment_id=environment_id,
        version_id=version_id,
        evaluator=evaluator,
    )


@bp.get("/partial-rewards")
def partial_rewards():
    """Every environment version with its stage table (of every trial, or of one evaluator's): the first
    EAGER_VERSIONS in this response, each further one as its own htmx fragment."""
    session = request_session()
    evaluator = chosen_evaluator(session)
    evaluator_id = evaluator.id if evaluator else None
    versions = version_options(session)
    eager = [v.version_id for v in versions[:EAGER_VERSIONS]]
    loaded = versions_stages(session, eager, evaluator_id) if versions else {}
    return render(
        "insights/partial_rewards.html",
        versions=versions,
        loaded=loaded,
        evaluator=evaluator,
        evaluators=evaluator_options(session),
    )


@bp.get("/partial-rewards/versions/<uuid:version_id>")
def version_partial_rewards(version_id: uuid.UUID):
    """One version's stage_* keys with pass share and mean, optionally of one evaluator's trials (a fragment for
    htmx, a page otherwise)."""
    session = request_session()
    evaluator = chosen_evaluator(session)
    option = next((v for v in version_options(session) if v.version_id == version_id), None)
    if option is None:
        abort(404, description=f"No environment version {version_id} in this organization.")
    stages = version_stages(session, version_id, evaluator.id if evaluator else None)
    if wants_fragment():
        return render(
            "insights/partial_rewards.html", "version_stages", version=option, stages=stages, evaluator=evaluator
        )
    return render(
        "insights/partial_rewards.html",
        versions=[option],
        loaded={version_id: stages},
        evaluator=evaluator,
        evaluators=evaluator_options(session),
    )
