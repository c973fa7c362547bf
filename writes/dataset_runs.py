"""Dataset runs' writes: start one (an evaluation run per task of the dataset version, each with the task's world
seed, queued in the tasks' order and numbered by each version's own run counter) and retry the tasks that ended in
infrastructure errors (a new run of the same task in a fresh workspace, its counts started again).

A dataset run's figures are its dataset_run_tasks rows, which writes.runs.RECORD_TRIAL adds to as trials are
recorded; the worker claims each task's run like any other (round-robin between organizations, any thread or
machine).
"""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from domain.agents import ran_elsewhere as agent_ran_elsewhere
from domain.datasets import SEED_SPACE
from domain.errors import NotFoundInOrg, NotRunnableHere, RunNotResettable
from models.base import new_id
from models.datasets import DatasetRun, DatasetVersion
from models.environments import EvaluatorConfig
from writes.once import once
from writes.runs import notify_workers, version_stats_upsert

# Every task's evaluation run and its rollup row in one statement: the runs get the task's world seed (0 for a
# Harbor task, which draws no world), a fresh episode seed each, and ids in task order (so the queue, oldest first,
# runs the tasks in order); each version's stats count its new runs.
QUEUE_TASKS = text(
    f"""
    WITH task AS (
        SELECT d.position, d.environment_version_id, d.world_seed, u.id, u.base_seed
        FROM dataset_tasks d
        JOIN unnest(CAST(:ids AS uuid[]), CAST(:base_seeds AS int[])) WITH ORDINALITY AS u(id, base_seed, position)
          ON u.position = d.position
        WHERE d.organization_id = :org AND d.dataset_version_id = :version_id
    ), run AS (
        INSERT INTO evaluation_runs (organization_id, id, environment_version_id, evaluator_config_id, attempt_count,
            reset_mode, status, world_seed, base_seed, attempts, dataset_run_id, dataset_position)
        SELECT :org, id, environment_version_id, :config_id, :attempts, 'initial', 'queued', coalesce(world_seed, 0),
            base_seed, 0, :dataset_run_id, position
        FROM task ORDER BY position
        RETURNING environment_version_id
    ), rollup AS (
        INSERT INTO dataset_run_tasks (organization_id, dataset_run_id, position, environment_version_id, world_seed,
            evaluation_run_id)
        SELECT :org, :dataset_run_id, position, environment_version_id, world_seed, id FROM task
    ), stats AS (
        {version_stats_upsert("SELECT :org, environment_version_id, 1, 0, 0, NULL::float8 FROM run")}
    )
    SELECT count(*) FROM task
    """
)


def start_dataset_run(
    session: Session,
    dataset_version_id: uuid.UUID,
    config_id: uuid.UUID,
    attempt_count: int | None = None,
    *,
    submission_key: uuid.UUID | None = None,
) -> tuple[DatasetRun, bool]:
    """Queue `config` on every task of the dataset version (both looked up under RLS: another organization's ids
    are NotFoundInOrg, 404), attemptCount trials each (the configuration's unless given, already checked by
    domain.scoring.ATTEMPT_COUNT); an imported evaluator is refused (422). (the dataset run, True if new): a second
    submission with the same key answers the first one's."""
    version = session.scalar(select(DatasetVersion).where(DatasetVersion.id == dataset_version_id))
    if version is None:
        raise NotFoundInOrg(f"no dataset version {dataset_version_id}")
    config = session.scalar(select(EvaluatorConfig).where(EvaluatorConfig.id == config_id))
    if config is None:
        raise NotFoundInOrg(f"no evaluator configuration {config_id}")
    if agent_ran_elsewhere(config.agent):
        raise NotRunnableHere(
            f"{config.name} is imported: its agent ran in another harness, so no worker here can run it.",
            field="evaluatorConfigId",
        )
    return once(
        session, DatasetRun, submission_key, lambda: _queue(session, version, config, attempt_count, submission_key)
    )


def _queue(
    session: Session,
    version: DatasetVersion,
    config: EvaluatorConfig,
    attempt_count: int | None,
    submission_key: uuid.UUID | None,
) -> DatasetRun:
    dataset_run = DatasetRun(
        organization_id=version.organization_id,
        id=new_id(),
        dataset_version_id=version.id,
        evaluator_config_id=config.id,
        attempt_count=config.attempt_count if attempt_count is None else attempt_count,
        task_count=version.task_count,
        submission_key=submission_key,  # a second POST of the same form finds this dataset run (writes.once)
    )
    session.add(dataset_run)
    session.flush()
    count = version.task_count
    queued = session.execute(
        QUEUE_TASKS,
        {
            "org": version.organization_id,
            "version_id": version.id,
            "config_id": config.id,
            "attempts": dataset_run.attempt_count,
            "dataset_run_id": dataset_run.id,
            "ids": [new_id() for _ in range(count)],
            "base_seeds": [secrets.randbelow(SEED_SPACE) for _ in range(count)],
        },
    ).scalar_one()
    assert queued == count, f"queued {queued} of the version's {count} tasks"
    notify_workers(session)
    return dataset_run


# The tasks of a dataset run whose current run has finished and ended in errors (the run failed, or a trial ended in
# an infrastructure error): each gets a new run of the same task (same world seed, a fresh workspace: a reset of
# kind new_workspace of the old run), and its rollup row points at it with its counts started again.
RETRY_TASKS = text(
    f"""
    WITH errored AS (
        SELECT t.position, t.environment_version_id, r.id AS old_run_id, r.world_seed, r.attempt_count,
               r.evaluator_config_id
        FROM dataset_run_tasks t
        JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
        WHERE t.organization_id = :org AND t.dataset_run_id = :dataset_run_id
          AND r.status IN ('completed', 'failed', 'cancelled') AND (t.errors > 0 OR r.status <> 'completed')
        ORDER BY t.position
        FOR UPDATE OF t
    ), numbered AS (
        SELECT e.*, row_number() OVER (ORDER BY e.position) AS n FROM errored e
    ), fresh AS (
        SELECT n.*, u.id, u.base_seed
        FROM numbered n
        JOIN unnest(CAST(:ids AS uuid[]), CAST(:base_seeds AS int[])) WITH ORDINALITY AS u(id, base_seed, n)
          ON u.n = n.n
    ), run AS (
        INSERT INTO evaluation_runs (organization_id, id, environment_version_id, evaluator_config_id, attempt_count,
            reset_mode, reset_of_run_id, status, world_seed, base_seed, attempts, dataset_run_id, dataset_position)
        SELECT :org, id, environment_version_id, evaluator_config_id, attempt_count, 'new_workspace', old_run_id,
            'queued', world_seed, base_seed, 0, :dataset_run_id, position
        FROM fresh ORDER BY position
        RETURNING environment_version_id
    ), rollup AS (
        UPDATE dataset_run_tasks t SET evaluation_run_id = f.id, retries = t.retries + 1, revision = t.revision + 1,
            trials = 0, successes = 0,
            scored = 0, reward_sum = 0, reward_square_sum = 0, errors = 0, tokens = 0, categories = '{{}}',
            stages = '{{}}'
        FROM fresh f
        WHERE t.organization_id = :org AND t.dataset_run_id = :dataset_run_id AND t.position = f.position
    ), stats AS (
        {version_stats_upsert("SELECT :org, environment_version_id, 1, 0, 0, NULL::float8 FROM run")}
    )
    SELECT count(*) FROM fresh
    """
)


def retry_errored_tasks(session: Session, dataset_run: DatasetRun) -> int:
    """Queue again every finished task of `dataset_run` that ended in errors (never one the verifier scored as a
    failure); how many. None to retry is RunNotResettable (409): nothing is written."""
    ids = [new_id() for _ in range(dataset_run.task_count)]
    seeds = [secrets.randbelow(SEED_SPACE) for _ in range(dataset_run.task_count)]
    retried = session.execute(
        RETRY_TASKS,
        {"org": dataset_run.organization_id, "dataset_run_id": dataset_run.id, "ids": ids, "base_seeds": seeds},
    ).scalar_one()
    if not retried:
        raise RunNotResettable(
            "No finished task of this dataset run ended in errors (an environment or agent infrastructure error): "
            "nothing to retry. Scored failures are the agent's results and are never retried."
        )
    notify_workers(session)
    return int(retried)
