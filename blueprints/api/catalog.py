"""Catalog API: environments, their immutable versions (spec validated), and evaluator configurations."""

from __future__ import annotations

import uuid
from typing import Any

from flask import current_app, g, jsonify
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from blueprints.api import ApiError, bp, json_object
from blueprints.auth import require_role
from commands.environments import create_environment, create_environment_version, create_evaluator_config
from db import request_session
from domain.errors import AgentConfigError, RunError, SpecError
from domain.scoring import check_attempt_count
from models import Environment, EnvironmentVersion, EvaluatorConfig
from queries.environments import list_environments as environment_summaries


def _text_field(body: dict[str, Any], name: str, *, required: bool, limit: int) -> str:
    value = body.get(name, "" if not required else None)
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > limit:
        raise ApiError(400, f"invalid {name}", f"{name} must be text of 1 to {limit} characters")
    return value.strip()


def _int_field(body: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = body.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(400, f"invalid {name}", f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value


def environment_json(env: Environment, latest_version: int | None = None) -> dict[str, Any]:
    return {"id": str(env.id), "name": env.name, "description": env.description, "latestVersion": latest_version}


def version_json(version: EnvironmentVersion) -> dict[str, Any]:
    return {
        "id": str(version.id),
        "environmentId": str(version.environment_id),
        "version": version.version,
        "spec": version.spec,
        "specSha256": version.spec_sha256,
    }


def config_json(config: EvaluatorConfig) -> dict[str, Any]:
    return {
        "id": str(config.id),
        "name": config.name,
        "agent": config.agent,
        "attemptCount": config.attempt_count,
        "maxSteps": config.max_steps,
        "timeoutS": config.timeout_s,
    }


@bp.get("/environments")
def list_environments():
    """The organization's environments with their latest version number."""
    items, _ = environment_summaries(request_session(), page=1)
    return jsonify(
        [
            {"id": str(e.id), "name": e.name, "description": e.description, "latestVersion": e.latest_version}
            for e in items
        ]
    )


@bp.post("/environments")
def create_environment_api():
    """Create an environment: {"name", "description"?} → 201; a taken name answers 409."""
    require_role("member")
    body = json_object()
    name = _text_field(body, "name", required=True, limit=200)
    description = _text_field(body, "description", required=False, limit=2000)
    session = request_session()
    if session.scalar(select(Environment.id).where(Environment.name == name)):
        raise ApiError(409, "name taken", f"an environment named {name!r} already exists")
    env = create_environment(session, g.org_id, name, description)
    session.commit()
    return jsonify(environment_json(env)), 201


@bp.post("/environments/<uuid:environment_id>/versions")
def create_version(environment_id: uuid.UUID):
    """Pin a new immutable version: {"spec": {...}} → 201; a spec that does not validate answers 400 saying why."""
    require_role("member")
    body = json_object()
    session = request_session()
    env = session.scalar(select(Environment).where(Environment.id == environment_id))
    if env is None:
        raise ApiError(404, "not found", f"no environment {environment_id}")
    if "spec" not in body:
        raise ApiError(400, "missing spec", "spec is required")
    try:
        version = create_environment_version(session, env, body["spec"])
    except SpecError as error:
        raise ApiError(400, "invalid spec", str(error)) from error
    session.commit()
    return jsonify(version_json(version)), 201


@bp.post("/evaluator-configs")
def create_config():
    """Create an evaluator configuration: {"name", "agent", "attemptCount", "maxSteps"?, "timeoutS"?} → 201."""
    require_role("member")
    body = json_object()
    name = _text_field(body, "name", required=True, limit=200)
    try:
        attempts = check_attempt_count(body.get("attemptCount"))
    except RunError as error:
        raise ApiError(400, "invalid attemptCount", str(error)) from error
    max_steps = _int_field(body, "maxSteps", 30, 1, 500)
    timeout, ceiling = body.get("timeoutS", 60), current_app.config["AGENTFORGE_MAX_TRIAL_TIMEOUT_S"]
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= ceiling:
        raise ApiError(
            400, "invalid timeoutS", f"timeoutS must be a number of seconds from 0 to {ceiling:g}, not {timeout!r}"
        )
    session = request_session()
    try:
        config = create_evaluator_config(
            session, g.org_id, name, body.get("agent"), attempts, max_steps=max_steps, timeout_s=float(timeout)
        )
        session.commit()
    except AgentConfigError as error:
        raise ApiError(400, "invalid agent", str(error)) from error
    except IntegrityError as error:
        raise ApiError(409, "name taken", f"an evaluator configuration named {name!r} already exists") from error
    return jsonify(config_json(config)), 201
