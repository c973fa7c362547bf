"""JSON API under /api/v1 (session cookie auth; 401 JSON when anonymous; 400 names the valid values)."""

from __future__ import annotations

import uuid
from typing import Any

from flask import Blueprint, g, jsonify, request
from flask_login import current_user
from werkzeug.exceptions import BadRequest, HTTPException

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
        body = request.get_json(force=True, silent=False)
    except (BadRequest, RecursionError) as error:  # RecursionError: absurdly deep nesting
        raise ApiError(400, "invalid JSON body", "the body must be a JSON object") from error
    if not isinstance(body, dict):
        raise ApiError(400, "invalid JSON body", "the body must be a JSON object")
    return body


def parse_uuid(name: str, value: Any) -> uuid.UUID:
    """Return `value` as a UUID, or answer 400 naming the field."""
    try:
        return uuid.UUID(str(value))
    except ValueError as error:
        raise ApiError(400, f"invalid {name}", f"{name} must be a UUID, not {value!r}") from error


def uuid_field(body: dict[str, Any], name: str) -> uuid.UUID:
    """Return `body[name]` as a UUID, or answer 400 naming the missing or malformed field."""
    if name not in body:
        raise ApiError(400, f"missing {name}", f"{name} is required")
    return parse_uuid(name, body[name])


@bp.get("/me")
def me():
    """Who is logged in, the organization requests are scoped to, and every membership."""
    user = current_user.user
    return jsonify(
        id=str(user.id),
        email=user.email,
        name=user.name,
        organizationId=str(g.org_id),
        role=g.membership.role,
        memberships=[
            {"organizationId": str(m.organization_id), "organizationName": m.organization_name, "role": m.role}
            for m in user.memberships
        ],
    )


from blueprints.api import catalog, ingest, openapi, rollouts, runs  # noqa: E402, F401  (register their routes on bp)
