"""PRIVATE rollout export: GET /api/v1/rollouts (NDJSON by kind), one rollout, and stored artifacts."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from itertools import islice

import orjson
from flask import Response, g, jsonify, request
from sqlalchemy import text
from sqlalchemy.orm import Session

from blueprints.api import ApiError, bp
from blueprints.api.contract import NDJSON, Reply, operation
from blueprints.api.schemas import Rollout, RolloutExportQuery, TrajectoryArtifact, validated
from queries.export_formats import EXPORT_FORMATS, ExportFormat, pair_line
from queries.exports import (
    PAIR_BATCH,
    Query,
    copy_lines,
    cursor_seq_of,
    export_filename,
    next_cursor,
    preference_pairs_sql,
    preference_sides,
    rollout_detail,
    rollout_lines_sql,
    rollout_rows_sql,
    rollouts_without_agent_turn_sql,
    select_rollouts,
    stream_rows,
)
from queries.trials import TrajectoryChanged, artifact_body
from web.database import get_database, request_session
from web.limits import expensive
from web.security import PRIVATE

EXPORT_LINES = {
    "type": "string",
    "description": "NDJSON: one JSON object per line, a rollout (atif-shaped, an ATIF document or a TRL "
    "conversation, by format) or, for kind=preference, a preference pair",
}


@bp.get("/rollouts")
@operation(
    "exportRollouts",
    {
        200: Reply(
            "The rollouts, newest first (oldest first after a cursor)",
            EXPORT_LINES,
            NDJSON,
            ("Content-Disposition", "X-Privacy-Class", "Cache-Control", "X-Next-Cursor", "X-Rows-Without-Agent-Turn"),
        )
    },
    query=RolloutExportQuery,
    errors=(400, 404, 429),
    error_reasons={404: "No rollout `after` names in this organization"},
)
@expensive()
def export_rollouts():
    """Stream the organization's rollouts of one kind as NDJSON (PRIVATE), in one snapshot with flat memory."""
    query = validated(RolloutExportQuery, request.args.to_dict())
    kind, export_format, after = query.kind, query.format, query.after
    writer = EXPORT_FORMATS.get(export_format)
    if writer is None:  # unregistered since the query was read: refused, never written in another format
        raise ApiError(400, "invalid format", f"format must be one of {', '.join(EXPORT_FORMATS)}")
    filters = query.filters()
    session = get_database().session(g.org_id)
    try:
        # One REPEATABLE READ transaction: the cursor header and the streamed lines see the same snapshot.
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        filters = filters.for_session(session)
        headers = {**PRIVATE, "Content-Disposition": f"attachment; filename={export_filename(kind, export_format)}"}
        after_seq = None
        if after is not None:
            after_seq = cursor_seq_of(session, after)
            if after_seq is None:
                raise ApiError(404, "not found", f"no rollout {after} to continue after")
        if kind == "preference":  # with after=: pairs among the rollouts exported since that cursor
            scored = select_rollouts(g.org_id, "scored", filters, after_seq, include_excluded=query.include_excluded)
            cursor = next_cursor(session, "scored", scored, True)
            if cursor or after:
                headers["X-Next-Cursor"] = str(cursor.rollout_id if cursor else after)
            pairs = preference_pairs_sql(
                g.org_id,
                filters,
                after_seq,
                cursor.seq if cursor else None,
                within_task=writer.agent_turns_only,
                include_excluded=query.include_excluded,
            )
            lines = _preference_lines(session, pairs, writer)
        else:
            selection = select_rollouts(g.org_id, kind, filters, after_seq, include_excluded=query.include_excluded)
            newest_first = after is None
            cursor = next_cursor(session, kind, selection, newest_first)
            if cursor or after:
                headers["X-Next-Cursor"] = str(cursor.rollout_id if cursor else after)
            if writer.agent_turns_only:  # the rows left out: known before the first line is sent
                left_out = rollouts_without_agent_turn_sql(kind, selection, newest_first)
                headers["X-Rows-Without-Agent-Turn"] = str(session.execute(text(left_out), selection.params).scalar())
            lines = _rollout_lines(session, kind, selection, newest_first, writer)
    except BaseException:
        session.close()
        raise
    return Response(_closing(lines, session), mimetype="application/x-ndjson", headers=headers)


def _rollout_lines(session: Session, kind: str, selection, newest_first: bool, writer: ExportFormat) -> Iterator[bytes]:
    """The rollout lines in `writer`'s format: PostgreSQL's atif-shaped lines, or its writer's of each row."""
    if writer.rollout is None:
        yield from copy_lines(session, rollout_lines_sql(kind, selection, newest_first), selection.params)
        return
    rows = rollout_rows_sql(kind, selection, newest_first, agent_turns_only=writer.agent_turns_only)
    for row in stream_rows(session, rows, selection.params):
        yield orjson.dumps(writer.rollout(row)) + b"\n"


def _preference_lines(session: Session, query: Query, writer: ExportFormat) -> Iterator[bytes]:
    """The pair lines, streamed (queries.exports.preference_sides when a line holds the rollouts themselves)."""
    if writer.pair is None:
        pairs = stream_rows(session, query.sql, query.params)
        while batch := list(islice(pairs, PAIR_BATCH)):
            yield b"".join(orjson.dumps(pair_line(p)) + b"\n" for p in batch)
        return
    for pair, preferred, rejected in preference_sides(session, query):
        line = writer.pair(pair, preferred, rejected)
        if line is not None:  # a pair the format cannot hold (TRL: prompts that differ, a side without a turn)
            yield orjson.dumps(line) + b"\n"


def _closing(lines: Iterable[bytes], session: Session) -> Iterator[bytes]:
    """Yield the lines, then end the transaction; a client that disconnects mid-stream frees it too."""
    try:
        yield from lines
    finally:
        session.close()


@bp.get("/rollouts/<uuid:rollout_id>")
@operation("getRollout", {200: Reply("The rollout", Rollout, headers=("X-Privacy-Class",))}, errors=(404,))
def get_rollout(rollout_id: uuid.UUID):
    """One rollout with its seed, reward, ids and the stage_* values the worker wrote."""
    detail = rollout_detail(request_session(), rollout_id)
    if detail is None:
        raise ApiError(404, "not found", f"no rollout {rollout_id}")
    answer = Rollout.of(detail)
    response = jsonify(answer.to_json())
    response.headers.update(PRIVATE)
    return response


@bp.get("/artifacts/<uuid:artifact_id>")
@operation(
    "getArtifact",
    {
        200: Reply(
            "The file (trial-{n}-trajectory.json: rendered from its trial, or stored as it came)",
            TrajectoryArtifact,
            headers=("Content-Disposition", "X-Privacy-Class", "Cache-Control"),
        )
    },
    errors=(404,),
    error_reasons={409: "A trajectory file rendered from its trial no longer has its recorded sha256"},
)
def get_artifact(artifact_id: uuid.UUID):
    """Download an artifact (trial-{n}-trajectory.json) under its own filename: stored bytes, or a trajectory file
    rendered from its trial and checked against its recorded sha256."""
    try:
        found = artifact_body(request_session(), artifact_id)
    except TrajectoryChanged as changed:
        raise ApiError(409, "conflict", f"artifact {artifact_id} changed after it was recorded: {changed}") from None
    if found is None:
        raise ApiError(404, "not found", f"no artifact {artifact_id}")
    body, content_type, filename = found
    return Response(
        body, mimetype=content_type, headers={**PRIVATE, "Content-Disposition": f"attachment; filename={filename}"}
    )
