"""Runs' writes: enqueue (once per form submission), reset, report progress, record a trial with its rollups, complete
with pass@k, and a run of imported results; the worker's claim and lease writes are in writes/claims.py."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from domain.agents import ran_elsewhere as agent_ran_elsewhere
from domain.datasets import SEED_SPACE, TASK_TEXT_CHARS, infrastructure_error
from domain.errors import NotFoundInOrg, NotRunnableHere, RunError, RunNotResettable
from domain.outcome import TrialOutcome
from domain.scoring import pass_at_k_table
from domain.specs import ran_elsewhere as spec_ran_elsewhere
from domain.trajectory import search_text, storable
from domain.vocabulary import RESETS
from models.base import new_id
from models.environments import EnvironmentVersion, EvaluatorConfig
from models.evaluations import EvaluationRun, EvaluationTrial, Rollout
from writes.once import once

RUNS_CHANNEL = "agentforge_runs"


def notify_workers(session: Session) -> None:
    """Wake idle workers (delivered when the transaction commits)."""
    session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": RUNS_CHANNEL})


def enqueue_run(
    session: Session,
    version: EnvironmentVersion,
    config: EvaluatorConfig,
    attempt_count: int | None = None,
    *,
    reset_of: EvaluationRun | None = None,
    reset_mode: str = "initial",
    submission_key: uuid.UUID | None = None,
) -> EvaluationRun:
    """Queue a run of `config` on `version` (attemptCount defaults to the config's) and wake the workers.

    `submission_key` is the key of the form that asked for it: a second run with the same key fails the
    organization's unique index (see `queue_once`)."""
    attempts = config.attempt_count if attempt_count is None else attempt_count
    if reset_mode == "new_workspace" and reset_of is not None:
        world_seed = reset_of.world_seed  # same world, fresh workspace
    else:
        world_seed = secrets.randbelow(SEED_SPACE)
    run = EvaluationRun(
        organization_id=version.organization_id,
        id=new_id(),
        environment_version_id=version.id,
        evaluator_config_id=config.id,
        attempt_count=attempts,
        reset_mode=reset_mode,
        reset_of_run_id=reset_of.id if reset_of else None,
        status="queued",
        world_seed=world_seed,
        base_seed=secrets.randbelow(SEED_SPACE),
        attempts=0,
        submission_key=submission_key,
    )
    session.add(run)
    session.flush()
    bump_version_stats(session, run.organization_id, run.environment_version_id, runs=1)
    notify_workers(session)
    return run


def add_imported_run(
    session: Session, org_id: uuid.UUID, version: EnvironmentVersion, config: EvaluatorConfig, attempt_count: int
) -> EvaluationRun:
    """Add a run of results imported from another harness (running until its trials are recorded and it completes):
    no worker claims it, so no seed is drawn and nobody is woken."""
    run = EvaluationRun(
        organization_id=org_id,
        id=new_id(),
        environment_version_id=version.id,
        evaluator_config_id=config.id,
        attempt_count=attempt_count,
        reset_mode="initial",
        status="running",
        attempts=1,
        world_seed=0,
        base_seed=0,
    )
    session.add(run)
    session.flush()
    bump_version_stats(session, org_id, version.id, runs=1)
    return run


def reset_run(
    session: Session, run: EvaluationRun, mode: str, *, submission_key: uuid.UUID | None = None
) -> EvaluationRun:
    """Enqueue a new run against the same environment_versions row: new_workspace keeps the world, new_world not.

    A run of imported results is refused (RunNotResettable): no worker here can run its agent or environment."""
    if mode not in RESETS:
        raise RunError(f"mode must be one of {', '.join(RESETS)}, not {mode!r}", error="invalid mode")
    version = session.get_one(EnvironmentVersion, (run.organization_id, run.environment_version_id))
    config = session.get_one(EvaluatorConfig, (run.organization_id, run.evaluator_config_id))
    if agent_ran_elsewhere(config.agent) or spec_ran_elsewhere(version.spec):
        raise RunNotResettable(
            "This run holds imported results: its agent ran in another harness, so no worker here can run it again."
        )
    return enqueue_run(
        session, version, config, run.attempt_count, reset_of=run, reset_mode=mode, submission_key=submission_key
    )


def check_runnable_here(version: EnvironmentVersion, config: EvaluatorConfig) -> None:
    """Refuse (NotRunnableHere, 422) a new run of a version or an evaluator that holds imported results: its
    environment or agent ran in another harness, so no worker here can run it (the page and the API alike)."""
    if spec_ran_elsewhere(version.spec):
        raise NotRunnableHere(
            f"v{version.version} holds imported results: its environment runs in another harness, not in this worker.",
            field="environmentVersionId",
        )
    if agent_ran_elsewhere(config.agent):
        raise NotRunnableHere(
            f"{config.name} is imported: its agent ran in another harness, so no worker here can run it.",
            field="evaluatorConfigId",
        )


def check_resettable(run: EvaluationRun) -> None:
    """Refuse (RunNotResettable) a reset of a run that is not finished: the worker is still on it or has not begun."""
    if run.status in ("queued", "running"):
        raise RunNotResettable(f"This run is still {run.status}: reset it once it has finished (completed or failed).")


def queue_once(
    session: Session, submission_key: uuid.UUID | None, queue: Callable[[], EvaluationRun]
) -> tuple[EvaluationRun, bool]:
    """Queue a run with `queue()` unless a submission with the same key already did: (the run, True if new)."""
    return once(session, EvaluationRun, submission_key, queue)


def report_progress(
    session: Session, run: EvaluationRun, owner: str, trial_number: int, step: int | None, *, begins: bool = False
) -> None:
    """Record where `owner` (the worker holding the run's lease) is: trial `trial_number`, the agent's `step` in it
    (None: setting up), and with `begins` that the trial starts now. Nothing happens once the lease is another's."""
    values: dict[str, Any] = {"current_trial": trial_number, "current_step": step}
    if begins:
        values["current_trial_started_at"] = func.now()
    session.execute(
        update(EvaluationRun)
        .where(
            EvaluationRun.organization_id == run.organization_id,
            EvaluationRun.id == run.id,
            EvaluationRun.lease_owner == owner,
        )
        .values(**values)
    )


def trial_seed(run: EvaluationRun, trial_number: int) -> int:
    """The episode seed of trial `trial_number`: independent per trial, reproducible per run."""
    return (run.base_seed + trial_number - 1) % SEED_SPACE


@dataclass(frozen=True)
class RecordedTrial:
    """Ids of what record_trial wrote."""

    id: uuid.UUID
    artifact_id: uuid.UUID
    rollout_id: uuid.UUID | None


def version_stats_upsert(changes: str) -> str:
    """The one statement that adds to environment_version_stats, for a worker's trial, a run and a bulk load alike.

    `changes` is any query whose rows are (organization_id, environment_version_id, runs, trials, rollouts,
    reward): a run, a trial or a rollout each, or counts of them; `reward` is a rollout's reward (NULL when it is
    unscored or the row is no rollout). They are added up per version, and each version's row is inserted or
    added to under its row lock (ON CONFLICT DO UPDATE), so concurrent writers never lose a count.
    """
    return f"""
        INSERT INTO environment_version_stats AS s (organization_id, environment_version_id, runs, trials, rollouts,
            scored, successes, zero_rewards, reward_sum, min_reward, max_reward)
        SELECT organization_id, environment_version_id, sum(runs), sum(trials), sum(rollouts), count(reward),
            count(*) FILTER (WHERE reward = 1), count(*) FILTER (WHERE reward = 0), coalesce(sum(reward), 0),
            min(reward), max(reward)
        FROM ({changes}) AS c(organization_id, environment_version_id, runs, trials, rollouts, reward)
        GROUP BY organization_id, environment_version_id
        ON CONFLICT (organization_id, environment_version_id) DO UPDATE SET
            runs = s.runs + EXCLUDED.runs, trials = s.trials + EXCLUDED.trials,
            rollouts = s.rollouts + EXCLUDED.rollouts, scored = s.scored + EXCLUDED.scored,
            successes = s.successes + EXCLUDED.successes, zero_rewards = s.zero_rewards + EXCLUDED.zero_rewards,
            reward_sum = s.reward_sum + EXCLUDED.reward_sum, min_reward = least(s.min_reward, EXCLUDED.min_reward),
            max_reward = greatest(s.max_reward, EXCLUDED.max_reward)
    """


# One change of a version's stats from bound parameters: a recorded trial, a queued run, an added rollout.
STATS_CHANGE = """VALUES (CAST(:org AS uuid), CAST(:version_id AS uuid), CAST(:runs AS int), CAST(:trials AS int),
    CAST(:rollouts AS int), CAST(:reward AS float8))"""

# One round trip for everything a trial writes: artifact, trial (with its full-text search vector), rollout (when
# scored), the three rollups and, for a run of a dataset run, its task's row (dataset_run_tasks, migration 0041).
# Data-modifying CTEs all run, and the foreign keys between them are checked at the end of the statement.
# The trial's full-text search vector (migration 0018), as RECORD_TRIAL writes it (bench.recording swaps it out):
# to_tsvector of the text search_text built in Python (the same text trial_search_vector reads from the steps, without
# walking them in SQL), or trial_search_vector itself when only SQL can render a step's text.
SEARCH_VECTOR_SQL = (
    "CASE WHEN CAST(:search_text AS text) IS NULL THEN trial_search_vector(:task, :log, CAST(:steps AS jsonb)) "
    "ELSE to_tsvector('simple', :search_text) END"
)
RECORD_TRIAL = text(
    f"""
    WITH artifact AS (
        INSERT INTO artifacts (organization_id, id, filename, content_type, size, sha256)
        SELECT :org, :artifact_id, :filename, 'application/json', octet_length(d.body), encode(sha256(d.body), 'hex')
        FROM (SELECT trial_trajectory_document(:log, CAST(:steps AS jsonb)) AS body) d
    ), atif AS (
        INSERT INTO artifacts (organization_id, id, filename, content_type, size, sha256, body)
        SELECT :org, :atif_id, :atif_filename, 'application/json', octet_length(CAST(:atif_body AS bytea)),
            :atif_sha256, CAST(:atif_body AS bytea)
        WHERE CAST(:atif_id AS uuid) IS NOT NULL
    ), trial AS (
        INSERT INTO evaluation_trials (organization_id, id, evaluation_run_id, environment_version_id, trial_number,
            seed, status, reward, failure_category, metrics, trajectory_artifact_id, log_excerpt, task, started_at,
            finished_at, external_id, atif_artifact_id, steps, tools, search_vector)
        VALUES (:org, :trial_id, :run_id, :version_id, :trial_number, :seed, :status, :reward, :category,
            CAST(:metrics AS jsonb), :artifact_id, :log, :task, :started_at, :finished_at, :external_id, :atif_id,
            CAST(:steps AS jsonb), CAST(:tools AS jsonb), {SEARCH_VECTOR_SQL})
    ), rollout AS (
        INSERT INTO rollouts (organization_id, id, environment_version_id, evaluation_run_id, evaluation_trial_id,
            seed, reward)
        SELECT :org, :rollout_id, :version_id, :run_id, :trial_id, :seed, :reward WHERE :scored
    ), stats AS (
        {version_stats_upsert(STATS_CHANGE)}
    ), category AS (
        INSERT INTO failure_category_counts AS c (organization_id, environment_version_id, failure_category, trials)
        SELECT :org, :version_id, :category, 1 WHERE CAST(:category AS text) IS NOT NULL
        ON CONFLICT (organization_id, environment_version_id, failure_category) DO UPDATE SET trials = c.trials + 1
    ), stages AS (
        INSERT INTO stage_metric_rollups AS r (organization_id, environment_version_id, stage_key, trials, passed,
            value_sum)
        SELECT :org, :version_id, k, 1, (v = 1)::int, v
        FROM unnest(CAST(:stage_keys AS text[]), CAST(:stage_values AS float8[])) AS u(k, v)
        ON CONFLICT (organization_id, environment_version_id, stage_key) DO UPDATE SET
            trials = r.trials + 1, passed = r.passed + EXCLUDED.passed, value_sum = r.value_sum + EXCLUDED.value_sum
    ), dataset_task AS (
        UPDATE dataset_run_tasks SET revision = revision + 1, trials = trials + 1,
            successes = successes + coalesce((CAST(:reward AS float8) = 1)::int, 0),
            scored = scored + int4(:scored), reward_sum = reward_sum + coalesce(CAST(:reward AS float8), 0),
            reward_square_sum = reward_square_sum + coalesce(CAST(:reward AS float8) ^ 2, 0),
            errors = errors + int4(:infrastructure_error), tokens = tokens + :tokens,
            task = coalesce(task, left(:task, :task_chars)),
            categories = CASE WHEN CAST(:category AS text) IS NULL THEN categories ELSE categories
                || jsonb_build_object(:category, coalesce((categories ->> CAST(:category AS text))::int, 0) + 1) END,
            stages = stages || coalesce((
                SELECT jsonb_object_agg(u.k, jsonb_build_array(coalesce((stages -> u.k ->> 0)::int, 0) + 1,
                    coalesce((stages -> u.k ->> 1)::int, 0) + (u.v = 1)::int,
                    coalesce((stages -> u.k ->> 2)::float8, 0) + u.v))
                FROM unnest(CAST(:stage_keys AS text[]), CAST(:stage_values AS float8[])) AS u(k, v)), '{{}}')
        WHERE organization_id = :org AND evaluation_run_id = :run_id
    )
    SELECT 1
    """
)


def atif_bytes(atif_document: dict[str, Any] | None) -> bytes | None:
    """An imported ATIF document as its artifact keeps it: as imported, but as JSON (a Harbor file may hold NaN,
    which Python writes); its sha256 is the artifact's."""
    atif = storable(atif_document)
    return json.dumps(atif, ensure_ascii=False).encode() if atif is not None else None


def record_trial(
    session: Session,
    run: EvaluationRun,
    trial_number: int,
    seed: int,
    outcome: TrialOutcome,
    *,
    external_id: str | None = None,
    atif_document: dict[str, Any] | None = None,
) -> RecordedTrial:
    """Write the trial, its trial-{n}-trajectory.json artifact, its rollout (when scored) and the rollups.

    The organization's export-order lock is taken first (see add_rollout), then
    everything is written by one statement.
    """
    org = run.organization_id
    task, log, steps = storable(outcome.task), storable(outcome.log), storable(outcome.stored_steps())
    trial_id = new_id()  # the trajectory file's id too: it is rendered from this trial (migration 0037)
    recorded = RecordedTrial(trial_id, trial_id, new_id() if outcome.reward is not None else None)
    stages = sorted((key, float(value)) for key, value in outcome.stages.items())
    atif_body = atif_bytes(atif_document)
    params = {
        "org": org,
        "artifact_id": recorded.artifact_id,
        "filename": f"trial-{trial_number}-trajectory.json",
        "trial_id": recorded.id,
        "run_id": run.id,
        "version_id": run.environment_version_id,
        "trial_number": trial_number,
        "seed": seed,
        "status": outcome.status,
        "reward": outcome.reward,
        "category": storable(outcome.failure_category),
        "metrics": json.dumps(storable(outcome.metrics()), ensure_ascii=False),
        "log": log,
        "task": task,
        "steps": json.dumps(steps, ensure_ascii=False),
        "search_text": search_text(task, log, steps),
        "tools": json.dumps(storable(outcome.tools), ensure_ascii=False),
        "started_at": outcome.started_at,
        "finished_at": outcome.finished_at,
        "rollout_id": recorded.rollout_id,
        "scored": outcome.reward is not None,
        "runs": 0,
        "trials": 1,
        "rollouts": int(outcome.reward is not None),
        "external_id": external_id,
        "atif_id": new_id() if atif_body is not None else None,
        "atif_filename": f"trial-{trial_number}-atif.json",
        "atif_body": atif_body,
        "atif_sha256": hashlib.sha256(atif_body).hexdigest() if atif_body is not None else None,
        "stage_keys": [key for key, _ in stages],
        "stage_values": [value for _, value in stages],
        "infrastructure_error": infrastructure_error(outcome.status, outcome.failure_category),
        "tokens": outcome.tokens(),
        "task_chars": TASK_TEXT_CHARS,
    }
    # Everything is serialised (steps, search text) before the lock, so the organization's other writers wait
    # only for the statement itself.
    take_export_order_lock(session, org)
    session.execute(RECORD_TRIAL, params)
    return recorded


def take_export_order_lock(session: Session, org: uuid.UUID) -> None:
    """Hold the organization's export-order lock until commit, so rollouts get seq numbers in commit order."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:org, 7))"), {"org": str(org)})


def add_rollout(session: Session, rollout: Rollout) -> None:
    """Insert a rollout as the transaction's last write, so its export seq follows commit order.

    The organization's advisory lock is held until commit: a rollout committed
    later always gets a larger seq, so `after=<rolloutId>` pulls miss nothing.
    """
    take_export_order_lock(session, rollout.organization_id)
    session.add(rollout)
    session.flush()
    bump_version_stats(
        session, rollout.organization_id, rollout.environment_version_id, rollouts=1, reward=rollout.reward
    )


BUMP_VERSION_STATS = text(version_stats_upsert(STATS_CHANGE))


def bump_version_stats(
    session: Session,
    org: uuid.UUID,
    version_id: uuid.UUID,
    *,
    runs: int = 0,
    trials: int = 0,
    rollouts: int = 0,
    reward: float | None = None,
) -> None:
    """Add runs, trials and rollouts (with the rollout's `reward`) to the version's stats row."""
    session.execute(
        BUMP_VERSION_STATS,
        {"org": org, "version_id": version_id, "runs": runs, "trials": trials, "rollouts": rollouts, "reward": reward},
    )


def complete_run(session: Session, run: EvaluationRun) -> None:
    """Mark `run` completed with pass@k and per-stage pass@k computed from its recorded trials."""
    trials = session.execute(
        select(EvaluationTrial.reward, EvaluationTrial.metrics).where(
            EvaluationTrial.organization_id == run.organization_id, EvaluationTrial.evaluation_run_id == run.id
        )
    ).all()
    n = run.attempt_count
    successes = sum(1 for reward, _ in trials if reward == 1)
    scored = [reward for reward, _ in trials if reward is not None]
    stage_keys = sorted({key for _, metrics in trials for key in metrics if key.startswith("stage_")})
    stage_table = {
        key: pass_at_k_table(n, sum(1 for _, metrics in trials if metrics.get(key) == 1)) for key in stage_keys
    }
    session.execute(
        update(EvaluationRun)
        .where(EvaluationRun.organization_id == run.organization_id, EvaluationRun.id == run.id)
        .values(
            status="completed",
            pass_at_k=pass_at_k_table(n, successes),
            mean_reward=round(sum(scored) / len(scored), 6) if scored else None,
            stage_pass_at_k=stage_table,
            finished_at=func.now(),
            lease_owner=None,
            lease_expires_at=None,
        )
    )


def start_run(
    session: Session,
    version_id: uuid.UUID,
    config_id: uuid.UUID,
    attempt_count: int | None = None,
    *,
    submission_key: uuid.UUID | None = None,
) -> EvaluationRun:
    """Queue a run on the version with the evaluator configuration, both looked up under RLS; refused (422,
    NotRunnableHere) when either holds imported results. `attempt_count` has passed domain.scoring.ATTEMPT_COUNT
    at the request's boundary (the API body, the start-run form)."""
    version = session.scalar(select(EnvironmentVersion).where(EnvironmentVersion.id == version_id))
    if version is None:
        raise NotFoundInOrg(f"no environment version {version_id}")
    config = session.scalar(select(EvaluatorConfig).where(EvaluatorConfig.id == config_id))
    if config is None:
        raise NotFoundInOrg(f"no evaluator configuration {config_id}")
    check_runnable_here(version, config)
    return enqueue_run(session, version, config, attempt_count, submission_key=submission_key)
