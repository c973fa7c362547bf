"""The OpenAPI 3.1 document of /api/v1, generated from the routes and their models (a schemathesis run checks it)."""

from __future__ import annotations

from typing import Any

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
    return jsonify(api_document())


def api_document() -> dict[str, Any]:
    """The document of the running app, built once per app (routes and settings do not change while it serves)."""
    document = current_app.extensions.get("agentforge_openapi")
    if document is None:
        document = current_app.extensions["agentforge_openapi"] = build_document(current_app)
    return document
