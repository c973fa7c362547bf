"""The worker loop: claim a run, keep its lease alive, run its missing trials, record each, complete the run.

Runs are claimed through the SECURITY DEFINER function claim_next_run (FOR
UPDATE SKIP LOCKED), the only code that looks across organizations; everything
after the claim happens in a session scoped to the run's organization, so RLS
WITH CHECK still guards every write. A killed worker's lease expires and the
next claim resumes the run with only the trial numbers still missing. The loop
writes nothing itself: claims and leases are writes/claims.py's, trials and
progress writes/runs.py's, presence writes/workers.py's.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field

import psycopg
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.session import Database
from db.urls import libpq_url
from domain.errors import AgentConfigError, SpecError
from domain.limits import DEFAULT_MAX_RUNS_PER_ORG, max_trial_timeout_s
from domain.secret_env import SecretsKeyError
from domain.specs import uploaded
from models import EnvironmentVersion, EvaluationRun, EvaluatorConfig
from queries.environments import runnable_agent, runnable_spec, task_files
from queries.runs import recorded_trial_numbers
from worker import harbor_tasks
from worker.harbor_images import build_before_trials
from worker.harbor_tasks import have_tree, in_use, store_tree
from worker.sandbox import SandboxSettings, sweep_left_behind
from worker.trial import run_trial
from writes.claims import claim_run, fail_run, release_run, renew_lease
from writes.runs import RUNS_CHANNEL, complete_run, record_trial, report_progress, trial_seed
from writes.workers import announce_worker, retire_worker

log = logging.getLogger("agentforge.worker")


class LeaseLost(Exception):
    """Another worker took the run over (our lease expired); stop working on it."""


@dataclass(frozen=True)
class WorkerSettings:
    """Lease length, idle polling, claims per run before it fails, and the operator's per-organization limits.

    `max_runs_per_org` caps one organization's runs in progress across all
    workers; `max_trial_timeout_s` is the most time any trial gets, whatever
    its evaluator configuration asks for.
    """

    lease_seconds: int = 30
    poll_seconds: float = 5.0
    max_run_attempts: int = 3
    max_runs_per_org: int = DEFAULT_MAX_RUNS_PER_ORG
    max_trial_timeout_s: float = field(default_factory=max_trial_timeout_s)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings.from_environ)


class Worker:
    """One claim loop; `run(until_idle)` processes runs until stopped (or until none is queued)."""

    def __init__(self, database: Database, settings: WorkerSettings, stop: threading.Event, name: str) -> None:
        self.database, self.settings, self.stop, self.name = database, settings, stop, name
        self.listener: psycopg.Connection | None = None

    def run(self, until_idle: bool = False) -> int:
        """Process runs until `stop` is set, or until no run is claimable when `until_idle`; return runs done."""
        done = 0
        try:
            while not self.stop.is_set():
                claimed = self.claim()
                if claimed is None:
                    if until_idle:
                        break
                    self.wait_for_work()
                    continue
                self.process(*claimed)
                done += 1
        finally:
            if self.listener is not None:
                self.listener.close()
        return done

    def claim(self) -> tuple[uuid.UUID, uuid.UUID] | None:
        """Claim a run of the organization whose turn it is (fewest in progress, then served longest ago)."""
        return claim_next_run(self.database, self.name, self.settings)

    def wait_for_work(self) -> None:
        """Sleep until a run is enqueued (LISTEN/NOTIFY) or the poll interval passes, waking early on stop."""
        if self.listener is None:
            self.listener = psycopg.connect(libpq_url(self.database.urls.runtime), autocommit=True)
            self.listener.execute(f"LISTEN {RUNS_CHANNEL}")
        deadline = time.monotonic() + self.settings.poll_seconds
        while not self.stop.is_set() and (remaining := deadline - time.monotonic()) > 0:
            for _ in self.listener.notifies(timeout=min(remaining, 0.5), stop_after=1):
                return

    def process(self, org_id: uuid.UUID, run_id: uuid.UUID) -> None:
        """Run every missing trial of a claimed run under its organization, then complete it."""
        heartbeat = Heartbeat(self.database, org_id, run_id, self.name, self.settings.lease_seconds)
        heartbeat.start()
        try:
            self._run_trials(org_id, run_id, heartbeat)
        except LeaseLost:
            log.warning("lost the lease on run %s; another worker continues it", run_id)
        except (SpecError, AgentConfigError) as error:
            self._finish_as_failed(org_id, run_id, f"cannot run: {error}")
        except SecretsKeyError as error:  # fails the run with the fix, rather than claiming it again and again
            log.error("run %s cannot open its secrets: %s", run_id, error)
            self._finish_as_failed(org_id, run_id, f"cannot run: {error}")
        except Exception as error:  # a bug or a database fault: hand the run back; claims are bounded
            log.exception("run %s failed in this worker", run_id)
            self._release(org_id, run_id, f"{type(error).__name__}: {error}", counted=True)
        finally:
            heartbeat.stop()

    def _run_trials(self, org_id: uuid.UUID, run_id: uuid.UUID, heartbeat: Heartbeat) -> None:
        with self.database.session(org_id) as session:
            run = session.get_one(EvaluationRun, (org_id, run_id))
            version = session.get_one(EnvironmentVersion, (org_id, run.environment_version_id))
            config = session.get_one(EvaluatorConfig, (org_id, run.evaluator_config_id))
            missing = sorted(set(range(1, run.attempt_count + 1)) - recorded_trial_numbers(session, run))
            spec, agent = runnable_spec(session, version), runnable_agent(session, config)  # env values in plaintext
            session.commit()
        if not uploaded(spec):
            self._run_missing(org_id, run, config, spec, agent, missing, heartbeat)
            return
        owner = org_id.hex  # each organization's builds are its own
        with in_use(self.settings.sandbox, spec["treeSha256"], owner):  # the cache keeps its files until the run ends
            if not have_tree(self.settings.sandbox, spec["treeSha256"], owner):
                with self.database.session(org_id) as session:
                    files = task_files(session, spec["treeSha256"])
                    session.commit()
                if files is not None:  # else each trial ends environment_error, saying the files are not here
                    store_tree(self.settings.sandbox, spec["treeSha256"], files, owner)
            if have_tree(self.settings.sandbox, spec["treeSha256"], owner):  # its image, when it runs in one
                build_before_trials(self.settings.sandbox, spec, owner)
            self._run_missing(org_id, run, config, spec, agent, missing, heartbeat)

    def _run_missing(
        self,
        org_id: uuid.UUID,
        run: EvaluationRun,
        config: EvaluatorConfig,
        spec: dict,
        agent: dict,
        missing: list[int],
        heartbeat: Heartbeat,
    ) -> None:
        """Run and record the trials of `run` numbered `missing`, then complete the run."""
        run_id = run.id
        begun = False  # whether the trial about to run was already reported as beginning
        for index, number in enumerate(missing):
            if self.stop.is_set():
                self._release(org_id, run_id, None, counted=False)
                return
            heartbeat.check()
            seed = trial_seed(run, number)
            progress = TrialProgress(self.database, run, self.name, number, begun=begun)
            outcome = run_trial(  # its secrets masked: none reaches a page, export, artifact or log
                spec,
                agent,
                world_seed=run.world_seed,
                seed=seed,
                max_steps=config.max_steps,
                timeout_s=min(config.timeout_s, self.settings.max_trial_timeout_s),
                ceiling_s=self.settings.max_trial_timeout_s,
                organization=org_id.hex,
                trial_number=number,
                sandbox=self.settings.sandbox,
                on_step=progress.step,
            )
            following = missing[index + 1] if index + 1 < len(missing) else None
            try:
                with self.database.session(org_id) as session, session.begin():
                    self._hold_lease(session, run)
                    record_trial(session, run, number, seed, outcome)
                    if following is not None:  # it begins now: said in this transaction, not one of its own
                        report_progress(session, run, self.name, following, None, begins=True)
                begun = following is not None
            except IntegrityError as error:
                if not _already_recorded(error):  # any other refusal is a fault: the run goes back, never done
                    raise
                log.warning("trial %s of run %s was already recorded; skipping", number, run_id)
                begun = False
        with self.database.session(org_id) as session, session.begin():
            self._hold_lease(session, run)
            complete_run(session, run)

    def _hold_lease(self, session: Session, run: EvaluationRun) -> None:
        """Renew our lease inside the writing transaction; raise LeaseLost if another worker holds the run."""
        if not renew_lease(session, run.organization_id, run.id, self.name, self.settings.lease_seconds):
            raise LeaseLost(str(run.id))

    def _release(self, org_id: uuid.UUID, run_id: uuid.UUID, error: str | None, *, counted: bool) -> None:
        """Hand a run back to the queue (after a stop request, or an error that may not recur)."""
        with self.database.session(org_id) as session, session.begin():
            release_run(session, org_id, run_id, self.name, error, counted=counted)

    def _finish_as_failed(self, org_id: uuid.UUID, run_id: uuid.UUID, error: str) -> None:
        """Mark a run that can never succeed (bad spec or agent) as failed, with the reason."""
        with self.database.session(org_id) as session, session.begin():
            fail_run(session, org_id, run_id, error)


def _already_recorded(error: IntegrityError) -> bool:
    """Whether recording a trial was refused because another worker recorded that trial number first (the run's
    unique trial number), the one refusal a worker may skip."""
    cause = error.orig
    return (
        isinstance(cause, psycopg.errors.UniqueViolation)
        and cause.diag.constraint_name == "uq_evaluation_trials_trial_number_per_run"
    )


class TrialProgress:
    """Tells the run page where the worker is: the trial as it begins, then the agent's step at most once a second
    (a missed write is only logged: progress is a courtesy, the trial goes on). `begun`: the beginning was already
    written (in the transaction that recorded the trial before), so it is not written again."""

    INTERVAL_S = 1.0

    def __init__(
        self, database: Database, run: EvaluationRun, owner: str, trial_number: int, *, begun: bool = False
    ) -> None:
        self.database, self.run, self.owner, self.trial_number = database, run, owner, trial_number
        self.written_at = time.monotonic()
        if not begun:
            self._write(None, begins=True)

    def step(self, number: int) -> None:
        """The agent begins step `number`."""
        if time.monotonic() - self.written_at >= self.INTERVAL_S:
            self.written_at = time.monotonic()
            self._write(number)

    def _write(self, step: int | None, *, begins: bool = False) -> None:
        try:
            with self.database.session(self.run.organization_id) as session, session.begin():
                report_progress(session, self.run, self.owner, self.trial_number, step, begins=begins)
        except Exception:
            log.exception("could not record the progress of run %s", self.run.id)


def claim_next_run(database: Database, worker: str, settings: WorkerSettings) -> tuple[uuid.UUID, uuid.UUID] | None:
    """Claim the next run round-robin across organizations (within the per-org cap); None when nothing is claimable."""
    with database.engine.begin() as conn:
        return claim_run(
            conn,
            worker,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_run_attempts,
            max_runs_per_org=settings.max_runs_per_org,
        )


class Heartbeat:
    """Renews a run's lease every third of its length in a background thread while trials run."""

    def __init__(self, database: Database, org_id: uuid.UUID, run_id: uuid.UUID, owner: str, lease: int) -> None:
        self.database, self.org_id, self.run_id, self.owner, self.lease = database, org_id, run_id, owner, lease
        self.stopped = threading.Event()
        self.lost = False
        self.thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat-{run_id}")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()

    def check(self) -> None:
        """Raise LeaseLost when a beat found the lease gone."""
        if self.lost:
            raise LeaseLost(str(self.run_id))

    def _beat(self) -> None:
        while not self.stopped.wait(self.lease / 3):
            try:
                with self.database.session(self.org_id) as session, session.begin():
                    self.lost = not renew_lease(session, self.org_id, self.run_id, self.owner, self.lease)
            except Exception:  # a missed beat is retried; the lease outlives two of them
                log.exception("heartbeat for run %s failed", self.run_id)
            if self.lost:
                return


def worker_name(index: int) -> str:
    """A name unique to this process and thread, stored as the lease owner."""
    return f"{socket.gethostname()}:{os.getpid()}:{index}"


def run_workers(
    database: Database, settings: WorkerSettings, stop: threading.Event, concurrency: int, until_idle: bool
) -> int:
    """Run `concurrency` claim loops in threads until stopped (or idle); return how many runs they processed."""
    announce_sandbox(settings.sandbox)
    presence = Presence(database, worker_name(0).rsplit(":", 1)[0], settings.sandbox.mode)
    presence.start()
    results = [0] * concurrency
    workers = [Worker(database, settings, stop, worker_name(i)) for i in range(concurrency)]

    def loop(index: int) -> None:
        results[index] = workers[index].run(until_idle)

    threads = [threading.Thread(target=loop, args=(i,), name=f"worker-{i}") for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    presence.stop()
    return sum(results)


def announce_sandbox(sandbox: SandboxSettings) -> None:
    """Say at every worker start how tenant programs will run (a warning when they will not be sandboxed)."""
    if sandbox.mode == "none":
        log.warning(
            "AGENTFORGE_SANDBOX=none: programs named by specs and evaluator configurations run unsandboxed, with "
            "this worker's user, files, environment and network. Use it only for a single-tenant deployment."
        )
    elif problem := sandbox.problem():
        log.error("%s. Until then, trials that start a program end as environment_error.", problem)
    else:
        log.info("tenant programs run sandboxed by bubblewrap (%s)", sandbox.bwrap)
    if sandbox.mode == "bwrap" and (problem := sandbox.problem(network=True)) and not sandbox.problem():
        log.warning(
            "%s. Until then, trials whose spec or configuration asks for the network end as environment_error.", problem
        )
    log.info("sandbox limits: %s", sandbox.describe_limits())
    if swept := sweep_left_behind(sandbox):
        log.info("removed %d sandbox directories (and their disks) left behind by a worker that died", swept)
    if (cleared := harbor_tasks.sweep(sandbox)) > 0:
        log.info("removed %.1f MB a worker that died left in the Harbor task cache", cleared / 1e6)


class Presence:
    """Keeps this worker process's row in worker_presence fresh while it runs (owners see unsandboxed workers)."""

    def __init__(self, database: Database, name: str, sandbox_mode: str, interval: float = 15.0) -> None:
        self.database, self.name, self.mode, self.interval = database, name, sandbox_mode, interval
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name="presence")

    def start(self) -> None:
        """Announce the worker now, then every `interval` seconds."""
        self._announce()
        self.thread.start()

    def stop(self) -> None:
        """Stop announcing and remove the worker's row."""
        self.stopped.set()
        self.thread.join()
        try:
            with self.database.session() as session, session.begin():
                retire_worker(session, self.name)
        except Exception:  # the row expires by itself within a minute
            log.exception("could not retire worker %s", self.name)

    def _announce(self) -> None:
        try:
            with self.database.session() as session, session.begin():
                announce_worker(session, self.name, self.mode)
        except Exception:  # a missed announcement is retried at the next beat
            log.exception("could not announce worker %s", self.name)

    def _beat(self) -> None:
        while not self.stopped.wait(self.interval):
            self._announce()
