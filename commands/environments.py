"""The catalog: environments, immutable versions and evaluator configurations, with their sealed secret env values."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import (
    func,
    select,
)
from sqlalchemy.orm import Session

from domain.agents import validate_agent
from domain.errors import AgentConfigError, SpecError
from domain.secret_env import HIDDEN, SecretsKey, digest_env, open_env, row_name, seal_env
from domain.specs import validate_spec
from models.base import new_id
from models.environments import Environment, EnvironmentVersion, EvaluatorConfig


def secrets_key_of(session: Session) -> SecretsKey | None:
    """The secrets key the session's Database was opened with (db.Database passes it in the session's info)."""
    return session.info.get("secrets_key")


def spec_sha256(spec: dict[str, Any], key: SecretsKey | None = None) -> str:
    """Return the sha256 of a spec's canonical JSON (sorted keys, no spaces): equal specs, equal hashes.

    Env values enter as their keyed digests (HMAC-SHA256 under the secrets key), so two versions that differ only
    in a secret still differ in hash, and the hash lets nobody without the key test a guess of the secret.
    """
    canonical = json.dumps(digest_env(spec, key), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def runnable_spec(session: Session, version: EnvironmentVersion) -> dict[str, Any]:
    """The version's spec with its env values in plaintext, for the worker (SecretsKeyError if they do not open)."""
    row = row_name("environment_versions", version.organization_id, version.id)
    return open_env(version.spec, version.secret_env, secrets_key_of(session), row)


def runnable_agent(session: Session, config: EvaluatorConfig) -> dict[str, Any]:
    """The configuration's agent with its env values in plaintext, for the worker to run."""
    row = row_name("evaluator_configs", config.organization_id, config.id)
    return open_env(config.agent, config.secret_env, secrets_key_of(session), row)


def hidden_env_names(config: dict[str, Any]) -> list[str]:
    """Env names whose value is the "***" the dashboard shows instead of a secret (copied back by mistake)."""
    env = config.get("env")
    return sorted(name for name, value in env.items() if value == HIDDEN) if isinstance(env, dict) else []


def resubmitted_mask(where: str, names: list[str]) -> str:
    """Why a config whose env holds "***" is refused."""
    return (
        f"{where}.env {', '.join(names)}: {HIDDEN!r} stands for a secret that is never shown back; "
        "give the value itself (a changed secret is a new version or configuration)"
    )


def create_environment(session: Session, org_id: uuid.UUID, name: str, description: str = "") -> Environment:
    """Add an environment to the organization."""
    environment = Environment(organization_id=org_id, id=new_id(), name=name, description=description)
    session.add(environment)
    session.flush()
    return environment


def create_environment_version(session: Session, environment: Environment, spec: Any) -> EnvironmentVersion:
    """Pin a new immutable version of `environment` (numbered after the newest); SpecError when `spec` is invalid."""
    normalised = validate_spec(spec)
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
    )
    session.add(version)
    session.flush()
    return version


def create_evaluator_config(
    session: Session,
    org_id: uuid.UUID,
    name: str,
    agent: Any,
    attempt_count: int,
    *,
    max_steps: int = 30,
    timeout_s: float = 60.0,
) -> EvaluatorConfig:
    """Add an evaluator configuration: the agent (validated, env values sealed), attemptCount and budgets."""
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
    )
    session.add(config)
    session.flush()
    return config
