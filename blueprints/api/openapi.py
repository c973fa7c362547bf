"""The OpenAPI 3.1 document of /api/v1, served at /api/v1/openapi.json (a schemathesis run checks it)."""

from __future__ import annotations

import copy
from typing import Any

from flask import current_app, jsonify

from blueprints.api import bp
from blueprints.auth import public
from queries.exports import EXPORT_FORMATS, EXPORT_KINDS

UUID = {"type": "string", "format": "uuid"}
NO_NUL = "^[^\\u0000]*$"  # PostgreSQL text cannot hold NUL characters
NULLABLE_NUMBER = {"type": ["number", "null"]}
SECRET_ENV = (
    'As saved. `env` values are secrets: sealed at rest, shown to nobody (every value reads "***", names only) and '
    "masked as *** in recorded output; a changed secret is a new version or configuration, never an edit."
)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    reasons = {
        400: "Bad input; `detail` names the valid values",
        401: "No session",
        403: "The role does not allow it",
        404: "No such id in this organization",
        409: "The name is taken (or a concurrent import)",
        413: "Request body over 1 MiB",
        503: "PostgreSQL unreachable",
    }
    return {str(code): _json(_ref("Error"), reasons[code]) for code in codes}


def _path_id(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": UUID}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "detail"],
        "properties": {
            "error": {"type": "string"},
            "detail": {"type": "string"},
            "valid": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Me": {
        "type": "object",
        "required": ["id", "email", "organizationId", "role", "memberships"],
        "properties": {
            "id": UUID,
            "email": {"type": "string"},
            "name": {"type": "string"},
            "organizationId": UUID,
            "role": {"enum": ["owner", "member", "viewer"]},
            "memberships": {"type": "array", "items": {"type": "object", "required": ["organizationId", "role"]}},
        },
    },
    "Environment": {
        "type": "object",
        "required": ["id", "name", "description", "latestVersion"],
        "properties": {
            "id": UUID,
            "name": {"type": "string"},
            "description": {"type": "string"},
            "latestVersion": {"type": ["integer", "null"]},
        },
    },
    "EnvironmentVersion": {
        "type": "object",
        "required": ["id", "environmentId", "version", "spec", "specSha256"],
        "properties": {
            "id": UUID,
            "environmentId": UUID,
            "version": {"type": "integer", "minimum": 1},
            "spec": {
                "type": "object",
                "description": SECRET_ENV,
                "examples": [
                    {
                        "kind": "mcp",
                        "command": ["python", "-m", "my_server"],
                        "env": {"OPENAI_API_KEY": "***"},
                        "verifier": {"tool": "score"},
                        "params": {},
                    }
                ],
            },
            "specSha256": {
                "type": "string",
                "pattern": "^[0-9a-f]{64}$",
                "description": "sha256 of the canonical spec JSON, each env value replaced by its HMAC-SHA256 "
                "under the server's secrets key",
            },
        },
    },
    "EvaluatorConfig": {
        "type": "object",
        "required": ["id", "name", "agent", "attemptCount", "maxSteps", "timeoutS"],
        "properties": {
            "id": UUID,
            "name": {"type": "string"},
            "agent": {
                "type": "object",
                "description": SECRET_ENV,
                "examples": [{"kind": "command", "argv": ["python3", "my_agent.py"], "env": {"OPENAI_API_KEY": "***"}}],
            },
            "attemptCount": {"type": "integer", "minimum": 1, "maximum": 8},
            "maxSteps": {"type": "integer"},
            "timeoutS": {"type": "number"},
        },
    },
    "Trial": {
        "type": "object",
        "required": ["id", "trialNumber", "status", "reward", "failureCategory", "stages"],
        "properties": {
            "id": UUID,
            "trialNumber": {"type": "integer", "minimum": 1},
            "status": {"type": "string"},
            "reward": NULLABLE_NUMBER,
            "failureCategory": {"type": ["string", "null"]},
            "stages": {"type": "object", "additionalProperties": {"type": "number"}},
        },
    },
    "EvaluationRun": {
        "type": "object",
        "required": ["id", "status", "attemptCount", "resetMode", "environmentVersionId", "passAtK", "trials"],
        "properties": {
            "id": UUID,
            "status": {"enum": ["queued", "running", "completed", "failed", "cancelled"]},
            "attemptCount": {"type": "integer", "minimum": 1, "maximum": 8},
            "resetMode": {"enum": ["initial", "new_workspace", "new_world"]},
            "resetOfRunId": {"type": ["string", "null"]},
            "environmentVersionId": UUID,
            "evaluatorConfigId": UUID,
            "passAtK": {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
            "stagePassAtK": {"type": ["object", "null"]},
            "error": {"type": ["string", "null"]},
            "createdAt": {"type": "string"},
            "trials": {"type": "array", "items": _ref("Trial")},
        },
    },
    "ImportResult": {
        "type": "object",
        "required": ["imported", "skipped", "runs"],
        "properties": {
            "imported": {"type": "integer"},
            "skipped": {"type": "integer"},
            "runs": {"type": "array", "items": UUID},
        },
    },
    "Rollout": {
        "type": "object",
        "required": ["id", "seed", "reward", "environmentVersionId", "evaluationRunId", "stages"],
        "properties": {
            "id": UUID,
            "seed": {"type": "integer"},
            "reward": NULLABLE_NUMBER,
            "environmentVersionId": UUID,
            "evaluationRunId": UUID,
            "stages": {"type": "object", "additionalProperties": {"type": "number"}},
            "trialNumber": {"type": "integer"},
            "failureCategory": {"type": ["string", "null"]},
            "trajectoryArtifactId": {"type": ["string", "null"]},
        },
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "AgentForge API",
        "version": "1",
        "description": "Private RL evaluation: runs, trials and PRIVATE rollout exports. Session cookie auth; "
        "state-changing requests carry the X-CSRFToken header.",
    },
    "servers": [{"url": "/api/v1"}],
    "components": {
        "schemas": SCHEMAS,
        "securitySchemes": {
            "session": {"type": "apiKey", "in": "cookie", "name": "session"},
            "token": {"type": "http", "scheme": "bearer", "description": "A personal API token (afk_…)"},
        },
    },
    "security": [{"session": []}, {"token": []}],
    "paths": {
        "/me": {
            "get": {
                "operationId": "me",
                "responses": {"200": _json(_ref("Me"), "The session's user"), **_errors(401, 503)},
            }
        },
        "/environments": {
            "get": {
                "operationId": "listEnvironments",
                "responses": {
                    "200": _json({"type": "array", "items": _ref("Environment")}, "Environments"),
                    **_errors(401),
                },
            },
            "post": {
                "operationId": "createEnvironment",
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1, "maxLength": 200},
                            "description": {"type": "string", "maxLength": 2000},
                        },
                    }
                ),
                "responses": {"201": _json(_ref("Environment"), "Created"), **_errors(400, 401, 403, 409, 413)},
            },
        },
        "/environments/{environmentId}/versions": {
            "post": {
                "operationId": "createEnvironmentVersion",
                "parameters": [_path_id("environmentId")],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["environment"],
                                "properties": {
                                    "kind": {"enum": ["builtin"]},
                                    "environment": {"enum": ["admin-console", "support-desk"]},
                                    "params": {"type": "object"},
                                },
                            }
                        },
                    }
                ),
                "responses": {"201": _json(_ref("EnvironmentVersion"), "Created"), **_errors(400, 401, 403, 404, 413)},
            }
        },
        "/evaluator-configs": {
            "post": {
                "operationId": "createEvaluatorConfig",
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["name", "agent", "attemptCount"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1, "maxLength": 200},
                            "agent": {
                                "type": "object",
                                "required": ["kind"],
                                "properties": {"kind": {"enum": ["scripted", "command"]}},
                            },
                            "attemptCount": {"type": "integer", "minimum": 1, "maximum": 8},
                            "maxSteps": {"type": "integer", "minimum": 1, "maximum": 500},
                            "timeoutS": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
                        },
                    }
                ),
                "responses": {"201": _json(_ref("EvaluatorConfig"), "Created"), **_errors(400, 401, 403, 409, 413)},
            }
        },
        "/evaluation-runs": {
            "post": {
                "operationId": "createEvaluationRun",
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["environmentVersionId", "evaluatorConfigId"],
                        "properties": {
                            "environmentVersionId": UUID,
                            "evaluatorConfigId": UUID,
                            "attemptCount": {"type": "integer", "minimum": 1, "maximum": 8},
                        },
                    }
                ),
                "responses": {"202": _json(_ref("EvaluationRun"), "Queued"), **_errors(400, 401, 403, 404, 413)},
            }
        },
        "/evaluation-runs/import": {
            "post": {
                "operationId": "importEvaluationRuns",
                "requestBody": {"required": True, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                "responses": {
                    "200": _json(_ref("ImportResult"), "Nothing new: every externalId was known"),
                    "201": _json(_ref("ImportResult"), "Imported"),
                    **_errors(400, 401, 403, 409, 413),
                },
            }
        },
        "/evaluation-runs/{runId}": {
            "get": {
                "operationId": "getEvaluationRun",
                "parameters": [_path_id("runId")],
                "responses": {"200": _json(_ref("EvaluationRun"), "The run"), **_errors(401, 404)},
            }
        },
        "/evaluation-runs/{runId}/reset": {
            "post": {
                "operationId": "resetEvaluationRun",
                "parameters": [_path_id("runId")],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["mode"],
                        "properties": {"mode": {"enum": ["new_workspace", "new_world"]}},
                    }
                ),
                "responses": {"202": _json(_ref("EvaluationRun"), "Queued"), **_errors(400, 401, 403, 404, 413)},
            }
        },
        "/rollouts": {
            "get": {
                "operationId": "exportRollouts",
                "parameters": [
                    {"name": "kind", "in": "query", "schema": {"enum": list(EXPORT_KINDS)}},
                    {"name": "format", "in": "query", "schema": {"enum": list(EXPORT_FORMATS)}},
                    {"name": "environmentId", "in": "query", "schema": UUID},
                    {"name": "environmentVersionId", "in": "query", "schema": UUID},
                    {"name": "evaluationRunId", "in": "query", "schema": UUID},
                    {"name": "after", "in": "query", "schema": UUID},
                ],
                "responses": {
                    "200": {
                        "description": "NDJSON, one rollout (or preference pair) per line",
                        "headers": {"X-Privacy-Class": {"schema": {"const": "PRIVATE"}}},
                        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                    },
                    **_errors(400, 401, 404),
                },
            }
        },
        "/rollouts/{rolloutId}": {
            "get": {
                "operationId": "getRollout",
                "parameters": [_path_id("rolloutId")],
                "responses": {"200": _json(_ref("Rollout"), "The rollout"), **_errors(401, 404)},
            }
        },
        "/artifacts/{artifactId}": {
            "get": {
                "operationId": "getArtifact",
                "parameters": [_path_id("artifactId")],
                "responses": {
                    "200": _json({"type": "object"}, "The stored file (trial-{n}-trajectory.json)"),
                    **_errors(401, 404),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "security": [],
                "responses": {"200": _json({"type": "object"}, "This document")},
            }
        },
    },
}


@bp.get("/openapi.json")
@public
def openapi():
    """This API's OpenAPI document (timeoutS's maximum is the operator's AGENTFORGE_MAX_TRIAL_TIMEOUT_S)."""
    document = copy.deepcopy(OPENAPI)
    config_body = document["paths"]["/evaluator-configs"]["post"]["requestBody"]["content"]["application/json"]
    config_body["schema"]["properties"]["timeoutS"]["maximum"] = current_app.config["AGENTFORGE_MAX_TRIAL_TIMEOUT_S"]
    return jsonify(document)
