"""Ingest API: POST /api/v1/evaluation-runs/import with NDJSON, one trial of another harness per line."""

from __future__ import annotations

import json

from flask import g, jsonify, request
from sqlalchemy.exc import IntegrityError

from blueprints.api import ApiError, bp
from blueprints.auth import require_role
from db import request_session
from importers.ingest import IngestError, ingest, parse_trial

MAX_LINES = 5000


@bp.post("/evaluation-runs/import")
def import_runs():
    """Validate every line, then write runs, trials, rollouts, artifacts and rollups; any bad line writes nothing."""
    require_role("member")
    text_body = request.get_data(as_text=True)
    lines = [(number, line) for number, line in enumerate(text_body.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ApiError(400, "empty body", "send one JSON object per line (NDJSON), one trial each")
    if len(lines) > MAX_LINES:
        raise ApiError(400, "too many lines", f"at most {MAX_LINES} trials per request")
    parsed = []
    for number, line in lines:
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError) as error:
            raise ApiError(400, "invalid line", f"line {number} is not JSON", line=number, field="line") from error
        try:
            parsed.append(parse_trial(raw, number))
        except IngestError as error:
            raise ApiError(
                400,
                "invalid line",
                f"line {error.line}, {error.field}: {error.detail}",
                line=error.line,
                field=error.field,
            ) from error
    session = request_session()
    try:
        result = ingest(session, g.org_id, parsed)
        session.commit()
    except IngestError as error:
        raise ApiError(
            400, "invalid line", f"line {error.line}, {error.field}: {error.detail}", line=error.line, field=error.field
        ) from error
    except IntegrityError as error:
        raise ApiError(409, "conflict", "some of these externalIds were imported concurrently; post again") from error
    body = {"imported": result.imported, "skipped": result.skipped, "runs": [str(r) for r in result.run_ids]}
    return jsonify(body), 201 if result.imported else 200
