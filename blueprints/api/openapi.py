"""The OpenAPI 3.1 document of /api/v1, generated from the routes and their models (a schemathesis run checks it)."""

from __future__ import annotations

from flask import Flask, Response, current_app, jsonify

from blueprints.api import bp
from blueprints.api.contract import Reply, build_document, operation
from blueprints.auth import public
from domain.limits import DEFAULT_MAX_TRIAL_TIMEOUT_S

DOCUMENT = {"type": "object", "description": "An OpenAPI 3.1 document"}


@bp.get("/openapi.json")
@public
@operation("openapi", {200: Reply("This document", DOCUMENT)})
def openapi():
    """This API's OpenAPI document (timeoutS's maximum is the operator's AGENTFORGE_MAX_TRIAL_TIMEOUT_S)."""
    return Response(document_text(current_app), mimetype="application/json")


def document_text(app: Flask) -> bytes:
    """The document as JSON text, built once per setting it reads: building it takes tens of milliseconds (it walks
    every route and model), so each app keeps the text for the current AGENTFORGE_MAX_TRIAL_TIMEOUT_S."""
    ceiling = app.config.get("AGENTFORGE_MAX_TRIAL_TIMEOUT_S", DEFAULT_MAX_TRIAL_TIMEOUT_S)
    built = app.extensions.get("openapi_document")
    if built is None or built[0] != ceiling:
        built = (ceiling, jsonify(build_document(app)).get_data())
        app.extensions["openapi_document"] = built
    return built[1]
