"""Trials API: GET /api/v1/trials, the organization's trials by the explorer's filters, cursor-paged."""

from __future__ import annotations

from flask import jsonify, request

from blueprints.api import ApiError, bp
from blueprints.api.contract import Reply, operation
from blueprints.api.schemas import TrialListQuery, TrialPage, TrialSnippet, TrialSummary, validated
from queries.search import snippets
from queries.trials import UnknownCursor, list_trials
from web.database import request_session
from web.limits import expensive, searching


@bp.get("/trials")
@operation(
    "listTrials",
    {200: Reply("A page of trials, failed first (or in `sort` order); `next` continues it", TrialPage)},
    query=TrialListQuery,
    errors=(400, 404, 429),
    error_reasons={
        404: "No trial `after` names in this organization",
        429: "With `q`: the user already has AGENTFORGE_MAX_EXPENSIVE_REQUESTS searches, comparisons, exports or "
        "task uploads in flight; retry after Retry-After seconds",
    },
)
@expensive(searching)
def list_trials_api():
    """The organization's trials matching the filters, a page at a time (pass `next` back as `after`)."""
    query = validated(TrialListQuery, request.args.to_dict())
    session = request_session()
    try:
        trials, cursor = list_trials(session, query.filters(), query.after, query.sort)
    except UnknownCursor:
        raise ApiError(404, "not found", f"no trial {query.after} to continue after") from None
    found = snippets(session, [t.id for t in trials], query.q) if query.q else {}
    page = TrialPage(
        trials=[
            TrialSummary.of(
                t,
                evaluation_run_id=t.run_id,
                labels=[label["name"] for label in t.labels],
                snippets=[
                    TrialSnippet.of(snippet, matches=[run for run, hit in snippet.segments if hit])
                    for snippet in found.get(t.id, [])
                ]
                if query.q
                else None,
            )
            for t in trials
        ],
        next=cursor,
    )
    return jsonify(page.to_json())
