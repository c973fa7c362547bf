"""The OpenAPI 3.1 document of /api/v1, generated from the routes and their models (a schemathesis run checks it)."""

from __future__ import annotations

from flask import current_app, jsonify

from blueprints.api import bp
from blueprints.api.contract import Reply, build_document, operation
from blueprints.auth import public

DOCUMENT = {"type": "object", "description": "An OpenAPI 3.1 document"}


@bp.get("/openapi.json")
@public
@operation("openapi", {200: Reply("This document", DOCUMENT)})
def openapi():
    """This API's OpenAPI document (timeoutS's maximum is the operator's AGENTFORGE_MAX_TRIAL_TIMEOUT_S)."""
    return jsonify(build_document(current_app))  # a few milliseconds; built per request so settings are current
