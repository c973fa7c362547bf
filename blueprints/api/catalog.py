"""Catalog API: environments, their immutable versions (spec validated), and evaluator configurations."""

from __future__ import annotations

import uuid

from flask import current_app, g, jsonify, request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from blueprints.api import ApiError, bp, json_object
from blueprints.api.contract import Reply, created, operation, write
from blueprints.api.schemas import Environment, EnvironmentVersion, EvaluatorConfig, validated
from domain.harbor_task import MAX_TASK_UPLOAD_BYTES, TaskRefused, read_task_archive
from models import Environment as EnvironmentRow
from models import EvaluatorConfig as EvaluatorConfigRow
from queries.environments import list_environments as environment_summaries
from queries.environments import list_evaluators
from web.catalog_bodies import EnvironmentCreate, EnvironmentVersionCreate, EvaluatorConfigCreate
from web.database import request_session
from web.limits import expensive
from writes.environments import (
    add_harbor_task,
    create_environment,
    create_environment_version,
    create_evaluator_config,
)

NAME_TAKEN = {409: "An environment or evaluator configuration of that name exists"}


@bp.get("/environments")
@operation("listEnvironments", {200: Reply("The organization's environments", list[Environment])})
def list_environments():
    """The organization's environments with their latest version number."""
    items, _ = environment_summaries(request_session(), page=1)
    return jsonify([Environment.of(e).to_json() for e in items])


@bp.post("/environments")
@write("createEnvironment", created(Environment), body=EnvironmentCreate, error_reasons=NAME_TAKEN)
def create_environment_api():
    """Create an environment: {"name", "description"?} → 201; a taken name answers 409."""
    body = validated(EnvironmentCreate, json_object())
    session = request_session()
    if session.scalar(select(EnvironmentRow.id).where(EnvironmentRow.name == body.name)):
        raise ApiError(409, "name taken", f"an environment named {body.name!r} already exists")
    env = create_environment(session, g.org_id, body.name, body.description)
    session.commit()
    answer = Environment.of(env, latest_version=None)
    return jsonify(answer.to_json()), 201


@bp.post("/environments/<uuid:environment_id>/versions")
@write("createEnvironmentVersion", created(EnvironmentVersion), body=EnvironmentVersionCreate, errors=(404,))
def create_version(environment_id: uuid.UUID):
    """Pin a new immutable version: {"spec": {...}} → 201; a spec that does not validate answers 400 saying why."""
    raw = json_object()
    session = request_session()
    env = session.scalar(select(EnvironmentRow).where(EnvironmentRow.id == environment_id))
    if env is None:
        raise ApiError(404, "not found", f"no environment {environment_id}")
    body = validated(EnvironmentVersionCreate, raw)
    version = create_environment_version(session, env, body.spec)
    answer = EnvironmentVersion.of(version)
    reply = jsonify(answer.to_json())  # written out before the commit: a reply that cannot be made writes nothing
    session.commit()
    return reply, 201


TASK_UPLOAD = {  # bytes to a generated client (format: binary)
    "type": "string",
    "format": "binary",
    "description": "The Harbor task's folder (instruction.md, task.toml, environment/, tests/, solution/) as a tar.gz "
    f"or tar, at most {MAX_TASK_UPLOAD_BYTES // (1024 * 1024)} MB",
}


@bp.post("/environments/<uuid:environment_id>/versions/harbor-task")
@write(
    "uploadHarborTask",
    {
        200: Reply("These files are already a version of this environment", EnvironmentVersion),
        **created(EnvironmentVersion),
    },
    body=Reply("A Harbor task folder", TASK_UPLOAD, "application/gzip"),
    errors=(404, 429),
    error_reasons={
        400: "A task that cannot be kept (`field` names the entry: a path, .., a link, a missing file, "
        "task.toml, environment/Dockerfile; `body` for the archive itself, such as one over 16 MB uncompressed); "
        "nothing was stored"
    },
)
@expensive()
def upload_harbor_task(environment_id: uuid.UUID):
    """A Harbor task folder, uploaded as a tar.gz, becomes a version (its files stored; the same files, the same
    version); `?name=` names it (else the folder in the archive, else the environment)."""
    session = request_session()
    env = session.scalar(select(EnvironmentRow).where(EnvironmentRow.id == environment_id))
    if env is None:
        raise ApiError(404, "not found", f"no environment {environment_id}")
    data = request.get_data(cache=False)
    if not data:
        raise ApiError(400, "empty body", "send the task's folder as a tar.gz (tar -czf - -C parent task-folder)")
    try:
        tree = read_task_archive(data)
    except TaskRefused as refused:
        raise ApiError(400, "invalid task", str(refused), field=refused.entry or "body") from None
    name = request.args.get("name") or tree.folder or env.name
    version, new = add_harbor_task(session, env, tree, name[:200])
    reply = jsonify(EnvironmentVersion.of(version).to_json())
    session.commit()
    return reply, 201 if new else 200


@bp.post("/evaluator-configs")
@write("createEvaluatorConfig", created(EvaluatorConfig), body=EvaluatorConfigCreate, error_reasons=NAME_TAKEN)
def create_config():
    """Create an evaluator configuration: {"name", "agent", "attemptCount", "maxSteps"?, "timeoutS"?, "checkpoint"?,
    "step"?} → 201."""
    ceiling = current_app.config["AGENTFORGE_MAX_TRIAL_TIMEOUT_S"]
    body = validated(EvaluatorConfigCreate, json_object(), max_trial_timeout_s=ceiling)
    session = request_session()
    try:
        config = create_evaluator_config(
            session,
            g.org_id,
            body.name,
            body.agent,
            body.attempt_count,
            max_steps=body.max_steps,
            timeout_s=body.timeout_s,
            checkpoint=body.checkpoint,
            step=body.step,
        )
        answer = EvaluatorConfig.of(config)
        reply = jsonify(answer.to_json())  # before the commit, as for a version
        session.commit()
    except IntegrityError as error:
        raise ApiError(409, "name taken", f"an evaluator configuration named {body.name!r} already exists") from error
    return reply, 201


@bp.get("/evaluator-configs")
@operation("listEvaluatorConfigs", {200: Reply("The organization's evaluator configurations", list[EvaluatorConfig])})
def list_configs():
    """The organization's evaluator configurations by name (agents' secrets masked), with checkpoint and step."""
    return jsonify([EvaluatorConfig.of(row.config).to_json() for row in list_evaluators(request_session())])


@bp.get("/evaluator-configs/<uuid:config_id>")
@operation("getEvaluatorConfig", {200: Reply("The evaluator configuration", EvaluatorConfig)}, errors=(404,))
def get_config(config_id: uuid.UUID):
    """One evaluator configuration (its agent's secrets masked), with checkpoint and step."""
    config = request_session().scalar(select(EvaluatorConfigRow).where(EvaluatorConfigRow.id == config_id))
    if config is None:
        raise ApiError(404, "not found", f"no evaluator configuration {config_id}")
    return jsonify(EvaluatorConfig.of(config).to_json())
