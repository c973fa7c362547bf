"""Worker recording cost: a trial written the worker's way (lease check, rows, rollups) beside bare INSERTs.

Both sides write one trial per transaction through the same org-scoped
sessions, so the difference is exactly what the worker adds: the lease
renewal, the rollups, the export-order lock and the full-text search vector
(the bare INSERTs leave search_vector empty).

The worker's statement is also timed as recording was before search and the
explorer: without the search vector, without the indexes they added (the GIN
index of migration 0018, the explorer's indexes of migrations 0019 and 0023),
which are dropped for that measurement and recreated from their own
definitions after it, and without the trigger that writes a trial's stage
results (migration 0024), disabled meanwhile. The worker's figure includes
cleaning the GIN index's pending list of what it recorded
(gin_clean_pending_list, which VACUUM or an insert that fills the list does
otherwise), so the index's cost is counted whether it is paid at insert or
later. Each path's figure is the median time of its trials
(each trial's own transaction, commit included): on a shared machine a mean
moves with whatever else runs, a median much less. The worker's statement and
the bare INSERTs take turns trial by trial, so both meet the same moments of
the disk; the path as before search and the explorer runs apart (its indexes
are dropped for it), after them.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, insert, select, text, update

import writes.runs
from bench.bulk import owner_connection
from db.session import Database
from models import Artifact, EnvironmentVersion, EvaluationRun, EvaluationTrial, EvaluatorConfig, Rollout
from models.base import new_id
from worker.loop import WorkerSettings, run_workers
from worker.trial import run_trial
from writes.claims import renew_lease
from writes.environments import create_evaluator_config
from writes.runs import enqueue_run, record_trial

TRIALS = int(os.environ.get("BENCH_RECORD_TRIALS", "400"))
SPEC = {"kind": "builtin", "environment": "admin-console", "params": {}}
TRIVIAL_AGENT = {"kind": "scripted", "skill": 1.0}
SEARCH_INDEX = "ix_evaluation_trials_search_vector"  # migration 0018
# What search and the explorer added to every recorded trial (migrations 0018, 0019, 0023 and 0024).
NEW_INDEXES = (
    SEARCH_INDEX,
    "ix_evaluation_trials_org_failed_rank_id",
    "ix_evaluation_trials_org_status_rank_id",
    "ix_evaluation_trials_org_reward_id",
    "ix_evaluation_trials_org_agent_steps_id",
    "ix_evaluation_trials_org_duration_id",
    "ix_evaluation_trials_org_finished_id",
    "ix_evaluation_trials_org_reward",
    "ix_evaluation_trials_org_finished_at",
)
STAGES_TRIGGER = "trial_stages_on_insert"
WARM_UP = 16  # trials recorded before each timed path


@dataclass(frozen=True)
class RecordingResult:
    """Median milliseconds per trial: worker recording (with the GIN pending-list cleanup it causes, also shown apart),
    the same statement as before search and the explorer, bare INSERT; and end-to-end worker trials/s."""

    worker_ms: float
    worker_cleanup_ms: float
    worker_before_search_ms: float
    bare_ms: float
    worker_trials_per_s: float


def _runs(database: Database, org_id: uuid.UUID, version_id: uuid.UUID, config_id: uuid.UUID, count: int) -> list:
    with database.session(org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org_id, version_id))
        config = session.get_one(EvaluatorConfig, (org_id, config_id))
        runs = [enqueue_run(session, version, config, 8) for _ in range(count)]
        session.execute(
            update(EvaluationRun)
            .where(EvaluationRun.id.in_([r.id for r in runs]))
            .values(status="running", lease_owner="bench", lease_expires_at=func.now() + func.make_interval(0, 0, 0, 1))
        )
    return runs


def _clean_pending_list(database: Database) -> float:
    """Milliseconds to move the GIN index's pending list into the index."""
    with owner_connection(database) as conn:
        started = time.perf_counter()
        conn.execute(text("SELECT gin_clean_pending_list(CAST(:index AS regclass))"), {"index": SEARCH_INDEX})
        return (time.perf_counter() - started) * 1000


@contextmanager
def _before_search_and_explorer(database: Database):
    """RECORD_TRIAL without the search vector, and evaluation_trials without the indexes of migrations 0018, 0019
    and 0023 (recreated from their definitions afterwards) and the stage results' trigger (enabled afterwards)."""
    with owner_connection(database) as conn:
        definitions = conn.execute(
            text("""SELECT indexname, indexdef FROM pg_indexes
                    WHERE tablename = 'evaluation_trials' AND indexname = ANY(:names)"""),
            {"names": list(NEW_INDEXES)},
        ).all()
        if len(definitions) != len(NEW_INDEXES):
            raise RuntimeError(f"expected the indexes {NEW_INDEXES}, found {[name for name, _ in definitions]}")
        with_search = writes.runs.RECORD_TRIAL
        if writes.runs.SEARCH_VECTOR_SQL not in str(with_search):
            raise RuntimeError("RECORD_TRIAL no longer writes the search vector as this benchmark expects")
        for name, _ in definitions:
            conn.execute(text(f"DROP INDEX {name}"))
        conn.execute(text(f"ALTER TABLE evaluation_trials DISABLE TRIGGER {STAGES_TRIGGER}"))
        writes.runs.RECORD_TRIAL = text(str(with_search).replace(writes.runs.SEARCH_VECTOR_SQL, "NULL"))
        try:
            yield
        finally:
            writes.runs.RECORD_TRIAL = with_search
            conn.execute(text(f"ALTER TABLE evaluation_trials ENABLE TRIGGER {STAGES_TRIGGER}"))
            conn.execute(text("SET maintenance_work_mem = '256MB'"))
            for _, definition in definitions:
                conn.execute(text(definition))


def measure_recording(database: Database, org_id: uuid.UUID, version_id: uuid.UUID) -> RecordingResult:
    """Record TRIALS trials the worker's way (as today, then as before search and the explorer) and TRIALS with bare
    INSERTs; also run a worker end to end."""
    with database.session(org_id) as session, session.begin():
        config = create_evaluator_config(session, org_id, f"bench-trivial-{uuid.uuid4().hex[:6]}", TRIVIAL_AGENT, 8)
        config_id = config.id
    outcome = run_trial(SPEC, TRIVIAL_AGENT, world_seed=1, seed=1, max_steps=10, timeout_s=5)
    worker_runs = _runs(database, org_id, version_id, config_id, TRIALS // 8)
    before_runs = _runs(database, org_id, version_id, config_id, TRIALS // 8)
    warm_runs = _runs(database, org_id, version_id, config_id, 2 * WARM_UP // 8)
    bare_runs = _runs(database, org_id, version_id, config_id, TRIALS // 8)

    def record(session, run, number: int) -> None:
        assert renew_lease(session, org_id, run.id, "bench", 60)
        record_trial(session, run, number, number, outcome)

    with database.session(org_id) as session:  # the trajectory file's bytes, rendered as record_trial renders them
        body = session.execute(
            text("SELECT trial_trajectory_document(:log, CAST(:steps AS jsonb))"),
            {"log": outcome.log, "steps": json.dumps(outcome.stored_steps())},
        ).scalar_one()

    def bare(session, run, number: int) -> None:
        trial_id = new_id()
        artifact_id = trial_id  # a trajectory file is its trial's (migration 0037): no body stored
        of_this_trial = {"organization_id": org_id, "seed": number, "reward": outcome.reward}
        of_this_run = {"evaluation_run_id": run.id, "environment_version_id": version_id}
        session.execute(
            insert(Artifact).values(
                organization_id=org_id,
                id=artifact_id,
                filename=f"trial-{number}-trajectory.json",
                content_type="application/json",
                size=len(body),
                sha256=hashlib.sha256(body).hexdigest(),
            )
        )
        session.execute(
            insert(EvaluationTrial).values(
                **of_this_trial,
                **of_this_run,
                id=trial_id,
                trial_number=number,
                status=outcome.status,
                failure_category=outcome.failure_category,
                metrics=outcome.stages,
                trajectory_artifact_id=artifact_id,
                log_excerpt=outcome.log,
                task=outcome.task,
                steps=outcome.stored_steps(),
                tools=outcome.tools,
                started_at=datetime.now(UTC),
                finished_at=datetime.now(UTC),
            )
        )
        rollout = {**of_this_trial, **of_this_run, "id": new_id(), "evaluation_trial_id": trial_id}
        session.execute(insert(Rollout).values(**rollout))

    def medians_ms(*paths: tuple[list, Callable]) -> list[float]:
        """The median ms per trial of each path (its runs, its write), the paths taking turns trial by trial: a
        commit's fsync on this machine's disk drifts by a factor of two within minutes, and paths timed one after
        the other would compare two moments of the disk instead of two statements."""
        times: list[list[float]] = [[] for _ in paths]
        for turn in zip(*(runs for runs, _ in paths), strict=True):
            for number in range(1, 9):
                for path, ((_, write), run) in enumerate(zip(paths, turn, strict=True)):
                    started = time.perf_counter()
                    with database.session(org_id) as session, session.begin():
                        write(session, run, number)
                    times[path].append((time.perf_counter() - started) * 1000)
        return [statistics.median(path) for path in times]

    medians_ms((warm_runs[: len(warm_runs) // 2], record))
    _clean_pending_list(database)  # start from an empty pending list, then count what these trials leave in it
    worker_ms, bare_ms = medians_ms((worker_runs, record), (bare_runs, bare))  # bare trials add no search vector
    worker_cleanup_ms = _clean_pending_list(database) / (len(worker_runs) * 8)
    with _before_search_and_explorer(database):
        medians_ms((warm_runs[len(warm_runs) // 2 :], record))
        (worker_before_search_ms,) = medians_ms((before_runs, record))

    with database.session(org_id) as session, session.begin():  # the end-to-end worker: claim, run, record
        session.execute(  # the runs above are done: they no longer count against the organization's running runs
            update(EvaluationRun)
            .where(EvaluationRun.id.in_([r.id for r in worker_runs + before_runs + warm_runs + bare_runs]))
            .values(status="completed", lease_owner=None, lease_expires_at=None)
        )
        version = session.get_one(EnvironmentVersion, (org_id, version_id))
        config = session.get_one(EvaluatorConfig, (org_id, config_id))
        queued = [enqueue_run(session, version, config, 8).id for _ in range(TRIALS // 8)]
    started = time.perf_counter()
    run_workers(database, WorkerSettings(), threading.Event(), concurrency=1, until_idle=True)
    elapsed = time.perf_counter() - started
    with database.session(org_id) as session:
        trials = session.scalar(
            select(func.count()).select_from(EvaluationTrial).where(EvaluationTrial.evaluation_run_id.in_(queued))
        )
    if trials != len(queued) * 8:
        raise RuntimeError(f"the end-to-end worker recorded {trials} of {len(queued) * 8} trials")
    return RecordingResult(
        worker_ms + worker_cleanup_ms, worker_cleanup_ms, worker_before_search_ms, bare_ms, trials / elapsed
    )
