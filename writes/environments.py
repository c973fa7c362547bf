"""The catalog's writes: environments, immutable versions and evaluator configurations, with their env values sealed.

The worker reads them back with the values in plaintext through queries/environments.py (runnable_spec,
runnable_agent).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import (
    func,
    select,
)
from sqlalchemy.orm import Session

from db.session import secrets_key_of
from domain.agents import validate_agent
from domain.errors import AgentConfigError, SpecError
from domain.harbor_task import TaskTree, task_spec
from domain.secret_env import hidden_env_names, resubmitted_mask, row_name, seal_env
from domain.specs import UPLOADED, spec_sha256, uploaded, validate_spec
from models.base import new_id
from models.environments import Environment, EnvironmentVersion, EvaluatorConfig
from models.evaluations import Artifact

TASK_CONTENT_TYPE = "application/x-tar"  # a Harbor task's files, as domain.harbor_task's canonical tar


def create_environment(
    session: Session, org_id: uuid.UUID, name: str, description: str = "", *, submission_key: uuid.UUID | None = None
) -> Environment:
    """Add an environment to the organization (`submission_key`: the page form's, see writes.once)."""
    environment = Environment(
        organization_id=org_id, id=new_id(), name=name, description=description, submission_key=submission_key
    )
    session.add(environment)
    session.flush()
    return environment


def create_environment_version(
    session: Session, environment: Environment, spec: Any, *, submission_key: uuid.UUID | None = None
) -> EnvironmentVersion:
    """Pin a new immutable version of `environment` (numbered after the newest); SpecError when `spec` is invalid.

    A harbor-task spec is refused here: its files come with it, through add_harbor_task."""
    normalised = validate_spec(spec)
    if uploaded(normalised):
        raise SpecError(UPLOADED)
    return _add_version(session, environment, normalised, submission_key)


def _add_version(
    session: Session, environment: Environment, normalised: dict[str, Any], submission_key: uuid.UUID | None
) -> EnvironmentVersion:
    if hidden_env_names(normalised):
        raise SpecError(resubmitted_mask("spec", hidden_env_names(normalised)))
    latest = session.scalar(
        select(func.max(EnvironmentVersion.version)).where(
            EnvironmentVersion.organization_id == environment.organization_id,
            EnvironmentVersion.environment_id == environment.id,
        )
    )
    key, version_id = secrets_key_of(session), new_id()
    shown, sealed = seal_env(normalised, key, row_name("environment_versions", environment.organization_id, version_id))
    version = EnvironmentVersion(
        organization_id=environment.organization_id,
        id=version_id,
        environment_id=environment.id,
        version=(latest or 0) + 1,
        spec=shown,
        spec_sha256=spec_sha256(normalised, key),
        secret_env=sealed,
        submission_key=submission_key,
    )
    session.add(version)
    session.flush()
    return version


def add_harbor_task(
    session: Session, environment: Environment, tree: TaskTree, name: str
) -> tuple[EnvironmentVersion, bool]:
    """The version a Harbor task becomes, and whether it is new: the same files (one canonical tar, one sha256) are
    the version this environment already has; other files are a new version, their tar stored as an artifact."""
    canonical = tree.canonical_tar()
    spec = validate_spec(task_spec(tree, name))
    session.execute(  # two uploads of one task at once: the second waits, then finds the first's version
        select(Environment.id)
        .where(Environment.organization_id == environment.organization_id, Environment.id == environment.id)
        .with_for_update()
    )
    same = session.scalar(
        select(EnvironmentVersion)
        .where(
            EnvironmentVersion.organization_id == environment.organization_id,
            EnvironmentVersion.environment_id == environment.id,
            EnvironmentVersion.spec["treeSha256"].astext == spec["treeSha256"],
        )
        .order_by(EnvironmentVersion.version)
        .limit(1)
    )
    if same is not None:
        return same, False
    stored = session.scalar(
        select(Artifact.id).where(
            Artifact.organization_id == environment.organization_id,
            Artifact.sha256 == spec["treeSha256"],
            Artifact.content_type == TASK_CONTENT_TYPE,
        )
    )
    if stored is None:
        session.add(
            Artifact(
                organization_id=environment.organization_id,
                id=new_id(),
                filename=f"{name[:200]}.tar",
                content_type=TASK_CONTENT_TYPE,
                size=len(canonical),
                sha256=spec["treeSha256"],
                body=canonical,
            )
        )
    return _add_version(session, environment, spec, None), True


def create_evaluator_config(
    session: Session,
    org_id: uuid.UUID,
    name: str,
    agent: Any,
    attempt_count: int,
    *,
    max_steps: int = 30,
    timeout_s: float = 60.0,
    checkpoint: str | None = None,
    step: int | None = None,
    submission_key: uuid.UUID | None = None,
) -> EvaluatorConfig:
    """Add an evaluator configuration: the agent (validated, env values sealed), attemptCount and budgets, and the
    training checkpoint it evaluates with its step (an empty checkpoint is none)."""
    normalised = validate_agent(agent)
    if hidden_env_names(normalised):
        raise AgentConfigError(resubmitted_mask("agent", hidden_env_names(normalised)))
    config_id = new_id()
    shown, sealed = seal_env(normalised, secrets_key_of(session), row_name("evaluator_configs", org_id, config_id))
    config = EvaluatorConfig(
        organization_id=org_id,
        id=config_id,
        name=name,
        agent=shown,
        secret_env=sealed,
        attempt_count=attempt_count,
        max_steps=max_steps,
        timeout_s=timeout_s,
        checkpoint=checkpoint or None,
        step=step,
        submission_key=submission_key,
    )
    session.add(config)
    session.flush()
    return config
