"""Insights area: capability gap (failure categories) and partial rewards (stage_* keys)."""

import uuid

from flask import Blueprint, abort

from db import request_session
from queries.insights import capability_gap, version_options, version_stages, versions_stages
from web.htmx import render, wants_fragment
from web.params import optional_uuid

bp = Blueprint("insights", __name__)

# Versions whose stage tables the first response holds (one statement for all of them): the page reads without
# JavaScript; any further version loads as an htmx fragment when revealed, with a link to its own page.
EAGER_VERSIONS = 10


@bp.get("/capability-gap")
def gap():
    """Counts of the real failure_category values, overall and per environment version, with filters."""
    environment_id, version_id = optional_uuid("environmentId"), optional_uuid("environmentVersionId")
    data = capability_gap(request_session(), environment_id, version_id)
    return render(
        "insights/capability_gap.html", "gap_results", gap=data, environment_id=environment_id, version_id=version_id
    )


@bp.get("/partial-rewards")
def partial_rewards():
    """Every environment version with its stage table: the first EAGER_VERSIONS in this response, each further one
    as its own htmx fragment."""
    session = request_session()
    versions = version_options(session)
    loaded = versions_stages(session, [v.version_id for v in versions[:EAGER_VERSIONS]]) if versions else {}
    return render("insights/partial_rewards.html", versions=versions, loaded=loaded)


@bp.get("/partial-rewards/versions/<uuid:version_id>")
def version_partial_rewards(version_id: uuid.UUID):
    """One version's stage_* keys with pass share and mean (a fragment for htmx, a page otherwise)."""
    session = request_session()
    option = next((v for v in version_options(session) if v.version_id == version_id), None)
    if option is None:
        abort(404, description=f"No environment version {version_id} in this organization.")
    stages = version_stages(session, version_id)
    if wants_fragment():
        return render("insights/partial_rewards.html", "version_stages", version=option, stages=stages)
    return render("insights/partial_rewards.html", versions=[option], loaded={version_id: stages})
