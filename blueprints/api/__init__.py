"""JSON API under /api/v1 (session cookie auth; 401 JSON when anonymous; 400 names the valid values)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from werkzeug.exceptions import HTTPException

from domain.json_depth import TooDeep
from web.params import NotJsonNumber, NotText, strict_json

bp = Blueprint("api", __name__, url_prefix="/api/v1")


class ApiError(HTTPException):
    """An API error with a machine-readable `error` and a human `detail`."""

    def __init__(self, status: int, error: str, detail: str, **extra: Any) -> None:
        super().__init__(description=detail)
        self.code, self.error, self.extra = status, error, extra


@bp.errorhandler(ApiError)
def _api_error(error: ApiError):
    return jsonify(error=error.error, detail=error.description, **error.extra), error.code


def json_object() -> dict[str, Any]:
    """Return the request's JSON object body, or answer 400 saying what is wrong with it."""
    try:
        body = strict_json(request.get_data().decode("utf-8"))
    except TooDeep as error:
        raise ApiError(400, "invalid JSON body", too_deep(error, "the body"), field=error.field or "body") from None
    except ValueError as error:  # UnicodeDecodeError is a ValueError
        said = f" ({error})" if isinstance(error, NotJsonNumber | NotText) else ""
        raise ApiError(400, "invalid JSON body", f"the body must be a JSON object{said}") from error
    if not isinstance(body, dict):
        raise ApiError(400, "invalid JSON body", "the body must be a JSON object")
    return body


def too_deep(error: TooDeep, whole: str) -> str:
    """The refusal of JSON nested deeper than MAX_JSON_DEPTH, naming the field it is under (or `whole`)."""
    return f"{error.field or whole}: {error}"


from blueprints.api import (  # noqa: E402, F401  (register their routes on bp)
    account,
    catalog,
    compare,
    dataset_runs,
    datasets,
    harbor_datasets,
    ingest,
    leaderboard,
    openapi,
    rollouts,
    runs,
    triage,
    trials,
)
