"""A small route registry: each /api/v1 view declares its body, replies and errors; the OpenAPI document follows."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_args, get_origin

from flask import Flask
from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from blueprints.api import schemas
from blueprints.auth import require_role
from domain.limits import DEFAULT_MAX_TRIAL_TIMEOUT_S

F = TypeVar("F", bound=Callable[..., Any])
REF = "#/components/schemas/{model}"
NDJSON = "application/x-ndjson"
ERROR_REASONS = {
    400: "Bad input (or no CSRF header on a session request); `detail` names the field and the valid values",
    401: "No session and no valid bearer token",
    403: "The role does not allow it; nothing was written",
    404: "No such id in this organization",
    409: "The name is taken",
    413: "Request body over 1 MiB",
    422: "Well-formed, but a rule of the write refuses it; `error` names the field, nothing was written",
    429: "The user already has AGENTFORGE_MAX_EXPENSIVE_REQUESTS searches, comparisons, exports or task uploads in "
    "flight; retry after Retry-After seconds",
    503: "PostgreSQL unreachable; retry after Retry-After seconds",
}
HEADERS = {
    "Content-Disposition": {
        "description": "attachment; filename=… (the export's or the artifact's file name)",
        "schema": {"type": "string"},
    },
    "X-Privacy-Class": {"description": "Every export is PRIVATE", "schema": {"const": "PRIVATE"}},
    "Cache-Control": {"description": "Never stored by caches", "schema": {"const": "no-store"}},
    "X-Next-Cursor": {
        "description": "Pass as after= to get only rollouts committed since this export (absent when none)",
        "schema": {"type": "string", "format": "uuid"},
    },
    "X-Rows-Without-Agent-Turn": {
        "description": "format=trl of a rollout kind: the rollouts left out because their trajectory holds no turn "
        'of the agent\'s own (their row would be the task and the closing "Done.")',
        "schema": {"type": "integer", "minimum": 0},
    },
    "Location": {"description": "The run's URL", "schema": {"type": "string"}},
    "Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}},
}


@dataclass(frozen=True)
class Reply:
    """One answer of an operation: what it means, its body (a model, list[model] or a raw schema) and headers."""

    description: str
    body: Any = None
    content_type: str = "application/json"
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operation:
    """What one route accepts and answers."""

    operation_id: str
    replies: dict[int, Reply]
    body: Any = None  # a request model, or a Reply for a non-JSON body
    query: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    error_reasons: dict[int, str] = field(default_factory=dict)
    role: str | None = None  # the least role that may call it

    @property
    def answers_errors(self) -> list[int]:
        """Every error status it can answer: those declared or given a reason, 400 and 413 for a body, 403 for a
        role."""
        implied = (*((400, 413) if self.body is not None else ()), *((403,) if self.role is not None else ()))
        return sorted({*self.errors, *self.error_reasons, *implied})


def operation(operation_id: str, replies: dict[int, Reply], **details: Any) -> Callable[[F], F]:
    """Declare a view's contract (see Operation); the document is built from these declarations and the routes.

    With `role`, the view answers 403 before it runs for a caller whose role in the organization is below it, and
    the document says so: the role is checked where it is declared.
    """

    def declare(view: F) -> F:
        op = Operation(operation_id, replies, **details)
        declared = view
        if op.role is not None:
            role = op.role

            @functools.wraps(view)
            def declared(*args: Any, **kwargs: Any) -> Any:
                require_role(role)
                return view(*args, **kwargs)

        declared.openapi_operation = op  # type: ignore[attr-defined]
        return declared

    return declare


def write(operation_id: str, replies: dict[int, Reply], **details: Any) -> Callable[[F], F]:
    """Declare an operation that writes: callers below the member role (viewers) get 403 before it runs."""
    return operation(operation_id, replies, role="member", **details)


def created(body: Any) -> dict[int, Reply]:
    """The replies of an operation that creates one thing: 201 with it."""
    return {201: Reply("Created", body)}


def _models(operations: list[Operation]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    found: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {(schemas.ImportLine, "validation"): None}
    for op in operations:
        if isinstance(op.body, type):
            found[(op.body, "validation")] = None
        for reply in op.replies.values():
            model = get_args(reply.body)[0] if get_origin(reply.body) is list else reply.body
            if isinstance(model, type) and issubclass(model, BaseModel):
                found[(model, "serialization")] = None
        found[(schemas.Error, "serialization")] = None
    return list(found)


def _hoist(node: Any, definitions: dict[str, Any]) -> Any:
    """Move nested $defs (e.g. of an embedded model_json_schema()) into components, pointing their refs there."""
    if isinstance(node, dict):
        for name, schema in node.pop("$defs", {}).items():
            definitions[name] = _hoist(schema, definitions)
        return {key: _hoist(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [_hoist(item, definitions) for item in node]
    if isinstance(node, str) and node.startswith("#/$defs/"):
        return REF.format(model=node.removeprefix("#/$defs/"))
    return node


def _schema_of(body: Any) -> dict[str, Any]:
    if get_origin(body) is list:
        return {"type": "array", "items": _schema_of(get_args(body)[0])}
    if isinstance(body, type) and issubclass(body, BaseModel):
        return {"$ref": REF.format(model=body.__name__)}
    return body


def _content(reply: Reply) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": reply.description}
    if reply.headers:
        answer["headers"] = {name: HEADERS[name] for name in reply.headers}
    if reply.body is not None:
        answer["content"] = {reply.content_type: {"schema": _schema_of(reply.body)}}
    return answer


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF)
    parameters = []
    for name, prop in schema["properties"].items():
        options = [option for option in prop.pop("anyOf", []) if option != {"type": "null"}]
        prop = {**(options[0] if options else {}), **prop}
        prop.pop("title", None)
        if prop.get("default", "") is None:
            del prop["default"]
        description = prop.pop("description", None)
        parameter = {"name": name, "in": "query", "required": name in schema.get("required", ()), "schema": prop}
        parameters.append({**parameter, "description": description} if description else parameter)
    return parameters


def _path(rule: str) -> tuple[str, list[dict[str, Any]]]:
    parameters = []

    def rename(match: re.Match[str]) -> str:
        converter, name = match.group(1), to_camel(match.group(2))
        schema = {"type": "string", "format": "uuid"} if converter == "uuid" else {"type": "string"}
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
        return "{" + name + "}"

    return re.sub(r"<(?:(\w+):)?(\w+)>", rename, rule), parameters


def build_document(app: Flask, prefix: str = "/api/v1") -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route under `prefix`, from the views' declarations and the app's routes."""
    paths: dict[str, dict[str, Any]] = {}
    declared: list[Operation] = []
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if not rule.rule.startswith(prefix + "/"):
            continue
        view = app.view_functions[rule.endpoint]
        op: Operation | None = getattr(view, "openapi_operation", None)
        if op is None:
            raise LookupError(f"{rule.rule} ({rule.endpoint}) declares no @operation: document it")
        declared.append(op)
        path, parameters = _path(rule.rule.removeprefix(prefix))
        public = getattr(view, "is_public", False)
        errors = sorted({*op.answers_errors, *(() if public else (401, 503))})
        responses = {str(status): _content(reply) for status, reply in sorted(op.replies.items())}
        for status in errors:
            reason = op.error_reasons.get(status, ERROR_REASONS[status])
            headers = ("Retry-After",) if status in (429, 503) else ()
            responses[str(status)] = _content(Reply(reason, schemas.Error, headers=headers))
        doc = (view.__doc__ or "").strip()
        entry: dict[str, Any] = {"operationId": op.operation_id, "summary": doc.splitlines()[0] if doc else ""}
        if op.query is not None:
            parameters = [*parameters, *_query_parameters(op.query)]
        if parameters:
            entry["parameters"] = parameters
        if isinstance(op.body, Reply):
            entry["requestBody"] = {
                "required": True,
                "description": op.body.description,
                "content": {op.body.content_type: {"schema": _schema_of(op.body.body)}},
            }
        elif op.body is not None:
            entry["requestBody"] = {"required": True, "content": {"application/json": {"schema": _schema_of(op.body)}}}
        entry["responses"] = responses
        if public:
            entry["security"] = []
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            paths.setdefault(path, {})[method.lower()] = entry
    _, top = models_json_schema(_models(declared), ref_template=REF)
    definitions: dict[str, Any] = {}
    for name, schema in top.get("$defs", {}).items():
        definitions[name] = _hoist(schema, definitions)
    ceiling = app.config.get("AGENTFORGE_MAX_TRIAL_TIMEOUT_S", DEFAULT_MAX_TRIAL_TIMEOUT_S)
    definitions["EvaluatorConfigCreate"]["properties"]["timeoutS"]["maximum"] = ceiling
    inlined: set[str] = set()
    for entry in (entry for methods in paths.values() for entry in methods.values()):
        body = entry.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:  # request bodies inline, so a reader sees the fields where the operation is
            name = body["schema"]["$ref"].removeprefix(REF.format(model=""))
            body["schema"] = copy.deepcopy(definitions[name])
            inlined.add(name)
    for name in inlined:  # a body model nothing else refers to leaves the components (TrialLabels, also a reply, stays)
        others = {key: value for key, value in definitions.items() if key != name}
        if f'"{REF.format(model=name)}"' not in json.dumps([paths, others]):
            del definitions[name]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "AgentForge API",
            "version": "1",
            "description": "Private RL evaluation: environments, evaluator configurations, runs, trials and PRIVATE "
            "rollout exports (NDJSON). Authenticate with a bearer token (afk_…) or a session cookie; session requests "
            "that change state carry the X-CSRFToken header.",
        },
        "servers": [{"url": prefix}],
        "components": {
            "schemas": dict(sorted(definitions.items())),
            "securitySchemes": {
                "token": {"type": "http", "scheme": "bearer", "description": "A personal API token (afk_…)"},
                "session": {"type": "apiKey", "in": "cookie", "name": "session"},
            },
        },
        "security": [{"token": []}, {"session": []}],
        "paths": paths,
    }


def standalone_document() -> dict[str, Any]:
    """The document without a configured app or database (for tools and schema tests)."""
    from blueprints.api import bp

    app = Flask("agentforge-openapi")
    app.register_blueprint(bp)
    return build_document(app)
