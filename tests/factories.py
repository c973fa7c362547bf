"""Test data: one row in every organization-scoped table, written as the runtime role under RLS."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, text

from db.session import Database
from domain.datasets import requested_tasks
from domain.outcome import TrialOutcome
from domain.trajectory import Step
from domain.vocabulary import TrialStatus
from models import (
    Artifact,
    Environment,
    EnvironmentVersion,
    EnvironmentVersionStats,
    EvaluationRun,
    EvaluationTrial,
    EvaluatorConfig,
    FailureCategoryCount,
    Rollout,
    StageMetricRollup,
)
from models.base import new_id
from writes.checklist import leave_mark
from writes.dataset_runs import start_dataset_run
from writes.datasets import add_dataset_version, create_dataset
from writes.invitations import invite
from writes.review_queue import claim, start_queue
from writes.tokens import create_token
from writes.triage import Reviewer, add_note, change_labels, create_label, set_review


@dataclass
class OrgRows:
    """Ids of the rows `seed_org_rows` wrote for one organization."""

    org_id: uuid.UUID
    environment_id: uuid.UUID
    version_id: uuid.UUID
    config_id: uuid.UUID
    run_id: uuid.UUID
    trial_id: uuid.UUID
    artifact_id: uuid.UUID
    rollout_id: uuid.UUID


def seed_org_rows(database: Database, org_id: uuid.UUID, name: str = "admin-console") -> OrgRows:
    """Write an environment, version, evaluator config, run, trial, artifact, rollout, rollups, a dataset version
    of two tasks and a dataset run of it (two queued runs) for `org_id`; and with a member, a row of each triage
    table and a checklist mark."""
    spec = {"kind": "builtin", "environment": name, "params": {}}
    body = json.dumps({"schemaVersion": 1, "log": "opened", "trajectory": json.dumps({"steps": []})}).encode()
    ids = OrgRows(org_id, *(new_id() for _ in range(7)))
    with database.session(org_id) as session, session.begin():
        session.add(Environment(organization_id=org_id, id=ids.environment_id, name=name, description="shop admin"))
        session.add(
            EvaluatorConfig(organization_id=org_id, id=ids.config_id, name="scripted", agent={}, attempt_count=4)
        )
        session.flush()
        session.add(
            EnvironmentVersion(
                organization_id=org_id,
                id=ids.version_id,
                environment_id=ids.environment_id,
                version=1,
                spec=spec,
                spec_sha256=hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest(),
            )
        )
        session.add(
            Artifact(
                organization_id=org_id,
                id=ids.artifact_id,
                filename="trial-1-trajectory.json",
                content_type="application/json",
                size=len(body),
                sha256=hashlib.sha256(body).hexdigest(),
                body=body,
            )
        )
        session.flush()
        session.add(
            EvaluationRun(
                organization_id=org_id,
                id=ids.run_id,
                environment_version_id=ids.version_id,
                evaluator_config_id=ids.config_id,
                attempt_count=4,
            )
        )
        session.flush()
        session.add(
            EvaluationTrial(
                organization_id=org_id,
                id=ids.trial_id,
                evaluation_run_id=ids.run_id,
                environment_version_id=ids.version_id,
                trial_number=1,
                seed=0,
                status="failed",
                reward=0.5,
                failure_category="wrong_quantity",
                metrics={"stage_inventory": 1, "stage_checkout": 0},
                trajectory_artifact_id=ids.artifact_id,
            )
        )
        session.flush()
        session.add(
            Rollout(
                organization_id=org_id,
                id=ids.rollout_id,
                environment_version_id=ids.version_id,
                evaluation_run_id=ids.run_id,
                evaluation_trial_id=ids.trial_id,
                seed=0,
                reward=0.5,
            )
        )
        session.add(
            FailureCategoryCount(
                organization_id=org_id,
                environment_version_id=ids.version_id,
                failure_category="wrong_quantity",
                trials=1,
            )
        )
        session.add(
            EnvironmentVersionStats(
                organization_id=org_id,
                environment_version_id=ids.version_id,
                runs=1,
                trials=1,
                rollouts=1,
                scored=1,
                successes=0,
                zero_rewards=0,
                reward_sum=0.5,
                min_reward=0.5,
                max_reward=0.5,
            )
        )
        session.add(
            StageMetricRollup(
                organization_id=org_id,
                environment_version_id=ids.version_id,
                stage_key="stage_inventory",
                trials=1,
                passed=1,
                value_sum=1.0,
            )
        )
        dataset = create_dataset(session, org_id, "seeded")
        dataset_version, _ = add_dataset_version(
            session, dataset, requested_tasks({"environmentVersionId": str(ids.version_id), "count": 2})
        )
        start_dataset_run(session, dataset_version.id, ids.config_id)  # a dataset run, its runs and rollup rows
    with database.admin_session(org_id) as session, session.begin():
        user_id = session.execute(  # the owner role reads every organization's memberships: this one's
            text("SELECT user_id FROM memberships WHERE organization_id = :org LIMIT 1"), {"org": org_id}
        ).scalar()
        if user_id is not None:
            create_token(session, org_id, user_id, "seeded")
        invite(session, org_id, f"invitee-{org_id}@seed.test", "viewer", user_id)
    if user_id is None:  # triage rows name their author: an organization with a member gets them
        return ids
    with database.session(org_id) as session, session.begin():  # triage: a row in each of its tables
        reviewer = Reviewer(org_id, user_id, "owner")
        create_label(session, reviewer, "seeded", "gray", "a row of labels")
        change_labels(session, reviewer, ids.trial_id, names=["seeded"])
        set_review(session, reviewer, ids.trial_id, state="excluded", reason="seeded", human_category="seeded")
        add_note(session, reviewer, ids.trial_id, "a seeded note")
        leave_mark(session, org_id, user_id, "shown")  # the first-run checklist's progress
        start_queue(session, reviewer, {"sort": "failed"}, "", [ids.trial_id], False)  # a review queue and its claim
        claim(session, reviewer, ids.trial_id)
    return ids


@dataclass
class Catalog:
    """An environment version and an evaluator configuration to run on it."""

    org_id: uuid.UUID
    environment_id: uuid.UUID
    version_id: uuid.UUID
    config_id: uuid.UUID


def make_catalog(
    database: Database,
    org_id: uuid.UUID,
    agent: dict,
    attempt_count: int = 4,
    *,
    environment: str = "admin-console",
    params: dict | None = None,
    max_steps: int = 12,
    timeout_s: float = 10.0,
    config_name: str = "evaluator",
) -> Catalog:
    """Create (or reuse) the environment, add a version, and add an evaluator configuration."""
    from sqlalchemy import select

    from writes.environments import create_environment, create_environment_version, create_evaluator_config

    with database.session(org_id) as session, session.begin():
        env = session.scalar(select(Environment).where(Environment.name == environment))
        env = env or create_environment(session, org_id, environment, f"{environment} for tests")
        version = create_environment_version(
            session, env, {"kind": "builtin", "environment": environment, "params": params or {}}
        )
        config = create_evaluator_config(
            session, org_id, config_name, agent, attempt_count, max_steps=max_steps, timeout_s=timeout_s
        )
        return Catalog(org_id, env.id, version.id, config.id)


def command_agent(script: str, *args: str) -> dict:
    """An agent config running one of tests/agents/*.py with this interpreter."""
    import sys
    from pathlib import Path

    return {"kind": "command", "argv": [sys.executable, str(Path(__file__).parent / "agents" / script), *args]}


def record_rewards(database: Database, catalog: Catalog, rewards: list, outcome_for) -> tuple[uuid.UUID, list]:
    """Queue a run of the catalog and record one trial per reward, each from `outcome_for(reward)` (a NULL
    reward still gets a rollout, as imported data may hold); return the run id and the rollout ids."""
    from writes.runs import add_rollout, enqueue_run, record_trial

    with database.session(catalog.org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (catalog.org_id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (catalog.org_id, catalog.config_id))
        run = enqueue_run(session, version, config, len(rewards))
    ids = []
    for number, reward in enumerate(rewards, start=1):
        with database.session(catalog.org_id) as session, session.begin():
            run = session.get_one(EvaluationRun, (catalog.org_id, run.id))
            trial = record_trial(session, run, number, number, outcome_for(reward))
            if reward is None:
                add_rollout(
                    session,
                    Rollout(
                        organization_id=catalog.org_id,
                        id=new_id(),
                        environment_version_id=catalog.version_id,
                        evaluation_run_id=run.id,
                        evaluation_trial_id=trial.id,
                        seed=number,
                        reward=None,
                    ),
                )
            ids.append(
                session.execute(
                    text("SELECT id FROM rollouts WHERE evaluation_trial_id = :t"), {"t": trial.id}
                ).scalar()
            )
    return run.id, ids


def typed_steps(steps: Sequence[Step | dict[str, Any]]) -> list[Step]:
    """Steps for a TrialOutcome: those written as stored (dicts) read with Step.from_stored, built ones as they are."""
    return [step if isinstance(step, Step) else Step.from_stored(step) for step in steps]


# What the built-in environments score and how they name a failure: the run factory writes trials in their shape.
BUILTIN_STAGES = {
    "admin-console": (
        ("stage_inventory", "stage_order", "stage_checkout"),
        ("wrong_quantity", "wrong_item", "gave_up"),
    ),
    "support-desk": (("stage_triage", "stage_routing", "stage_reply"), ("wrong_team", "missing_reference", "gave_up")),
}


def finished_outcome(environment: str, number: int, seed: int) -> TrialOutcome:
    """A finished trial as the built-in environment would record it: every third trial succeeds, others fail."""
    stage_keys, categories = BUILTIN_STAGES[environment]
    passed = len(stage_keys) if number % 3 == 0 else (number - 1) % len(stage_keys)  # stages passed, in order
    stages = {key: 1.0 if i < passed else 0.0 for i, key in enumerate(stage_keys)}
    reward = round(sum(stages.values()) / len(stages), 6)
    steps = [
        {"step": 1, "tool": "list", "command": "list", "observation": f"{environment}: 4 items"},
        {"step": 2, "tool": "inspect", "command": f'inspect {{"seed": {seed}}}', "observation": "details"},
    ]
    log = f"opened {environment} (world {seed}): 4 items\nagent finished"
    started = datetime.now(UTC)
    status: TrialStatus
    if reward == 1:
        category, status = None, "succeeded"
    else:
        category, status = categories[number % len(categories)], "failed"
    return TrialOutcome(
        status=status,
        reward=reward,
        failure_category=category,
        stages=stages,
        steps=typed_steps(steps),
        log=log,
        started_at=started,
        task=f"solve {environment}",
    )


def finish_run(database: Database, catalog: Catalog, outcome_for=None) -> uuid.UUID:
    """Queue a run of the catalog and write its finished trials and pass@k through the domain writes, as the
    worker does, without running the worker; `outcome_for(number, seed)` defaults to `finished_outcome`."""
    from writes.runs import complete_run, enqueue_run, record_trial, trial_seed

    with database.session(catalog.org_id) as session, session.begin():  # one transaction: the suite writes many
        version = session.get_one(EnvironmentVersion, (catalog.org_id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (catalog.org_id, catalog.config_id))
        run = enqueue_run(session, version, config)
        environment = version.spec.get("environment", "admin-console")
        if outcome_for is None:
            outcome_for = lambda number, seed: finished_outcome(environment, number, seed)  # noqa: E731
        for number in range(1, run.attempt_count + 1):
            seed = trial_seed(run, number)
            record_trial(session, run, number, seed, outcome_for(number, seed))
        complete_run(session, run)
    return run.id


def dataset_run_of(
    database: Database, catalog: Catalog, tasks: int, finished: int = 0, errored: int = 0, name: str = "shop"
) -> uuid.UUID:
    """A dataset run of the catalog's evaluator on a new dataset `name` of `tasks` worlds of its version (seeds
    1..tasks), without the worker: the first `finished` tasks' runs are written as finished_outcome trials and
    completed, the `errored` tasks after them as trials that ended environment_error, the others stay queued."""
    from writes.dataset_runs import start_dataset_run
    from writes.runs import complete_run, record_trial, trial_seed

    with database.session(catalog.org_id) as session, session.begin():
        dataset = create_dataset(session, catalog.org_id, name)
        version, _ = add_dataset_version(
            session, dataset, requested_tasks({"environmentVersionId": str(catalog.version_id), "count": tasks})
        )
        dataset_run, _ = start_dataset_run(session, version.id, catalog.config_id)
        runs = session.scalars(
            select(EvaluationRun)
            .where(EvaluationRun.dataset_run_id == dataset_run.id)
            .order_by(EvaluationRun.dataset_position)
        ).all()
        for index, run in enumerate(runs[: finished + errored]):
            for number in range(1, run.attempt_count + 1):
                seed = trial_seed(run, number)
                outcome = finished_outcome("admin-console", number, seed)
                if index >= finished:
                    outcome = replace(outcome, status="error", reward=None, failure_category="environment_error")
                record_trial(session, run, number, seed, outcome)
            complete_run(session, run)
        return dataset_run.id


def finish_runs(database: Database, catalog: Catalog, runs: int = 1) -> list[uuid.UUID]:
    """Write `runs` finished runs of the catalog (see finish_run); return their ids in order."""
    return [finish_run(database, catalog) for _ in range(runs)]


def writable_copy(source: Path, destination: Path) -> Path:
    """A copy of a fixture directory that tests may change (files 0644, directories 0755), never the fixture."""
    shutil.copytree(source, destination)
    for directory, _, names in os.walk(destination):
        os.chmod(directory, 0o755)
        for name in names:
            os.chmod(Path(directory) / name, 0o644)
    return destination
