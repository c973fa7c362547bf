"""Ingest API: POST /api/v1/evaluation-runs/import with NDJSON, one trial of another harness per line."""

from __future__ import annotations

from flask import g, jsonify, request
from sqlalchemy.exc import IntegrityError

from blueprints.api import ApiError, bp, too_deep
from blueprints.api.contract import NDJSON, Reply, write
from blueprints.api.schemas import ImportResult
from domain.json_depth import TooDeep
from importers.ingest import IngestError, ingest, parse_trial
from web.database import request_session
from web.params import NotJsonNumber, NotText, strict_json

MAX_LINES = 5000
IMPORT_LINES = {  # bytes to a generated client (format: binary), read as UTF-8 NDJSON here
    "type": "string",
    "format": "binary",
    "description": f"NDJSON: one trial per line, each an IngestTrial (components/schemas/IngestTrial); at most "
    f"{MAX_LINES} lines",
}
IMPORTED = Reply("Imported", ImportResult)


@bp.post("/evaluation-runs/import")
@write(
    "importEvaluationRuns",
    {200: Reply("Nothing new: every externalId was known", ImportResult), 201: IMPORTED},
    body=Reply("Trials of another harness", IMPORT_LINES, NDJSON),
    error_reasons={
        400: "A line that does not validate (`line` and `field` name it); nothing was written",
        409: "Some of these externalIds were imported concurrently; post again",
    },
)
def import_runs():
    """Validate every line, then write runs, trials, rollouts, artifacts and rollups; any bad line writes nothing."""
    text_body = request.get_data(as_text=True)
    lines = [(number, line) for number, line in enumerate(text_body.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ApiError(400, "empty body", "send one JSON object per line (NDJSON), one trial each")
    if len(lines) > MAX_LINES:
        raise ApiError(400, "too many lines", f"at most {MAX_LINES} trials per request")
    parsed = []
    for number, line in lines:
        try:
            raw = strict_json(line)
        except TooDeep as error:
            field = error.field or "line"
            raise ApiError(
                400, "invalid line", f"line {number}, {too_deep(error, 'the line')}", line=number, field=field
            ) from None
        except ValueError as error:
            said = f" ({error})" if isinstance(error, NotJsonNumber | NotText) else ""
            detail = f"line {number} is not JSON{said}"
            raise ApiError(400, "invalid line", detail, line=number, field="line") from error
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
    answer = ImportResult(
        imported=result.imported, skipped=result.skipped, runs=result.run_ids, differing=result.differing
    )
    return jsonify(answer.to_json()), 201 if result.imported else 200
