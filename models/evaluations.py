"""Evaluation runs (the job queue), their trials, the rollouts scored from them, and stored artifacts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    FetchedValue,
    Index,
    Integer,
    LargeBinary,
    Sequence,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column, relationship

from domain.outcome import FAILURE_CATEGORY_CHARS, STAGE_KEY_CHARS
from domain.vocabulary import (
    MAX_ATTEMPTS,
    MIN_ATTEMPTS,
    RESET_MODES,
    RUN_STATUSES,
    TRIAL_STATUSES,
    ResetMode,
    RunStatus,
    TrialStatus,
)
from models.base import Base, OrgRoot, OrgScoped, Timestamped, one_of, org_fk
from models.environments import EnvironmentVersion, EvaluatorConfig

REWARD_RANGE = "reward IS NULL OR (reward >= 0 AND reward <= 1)"
# The failed-first rank, the SQL function of migration 0031 (queries.filters.FAILED_RANK).
FAILED_RANK = "trial_failed_rank(reward)"


# A trajectory file may have no stored body: it is rendered from its trial (migration 0037).
RENDERED_TRAJECTORY = (
    "body IS NOT NULL OR (content_type = 'application/json' AND filename ~ '^trial-[0-9]+-trajectory\\.json$')"
)


class Artifact(OrgRoot, Timestamped, Base):
    """An immutable file, such as trial-{n}-trajectory.json (a trigger forbids edits). A trajectory file recorded
    since migration 0037 has no stored body: its id is its trial's, and trial_trajectory_document renders it from
    the trial's log_excerpt and steps (queries.trials.trajectory_body)."""

    __tablename__ = "artifacts"
    __table_args__ = (
        CheckConstraint("size >= 0", name="size_non_negative"),
        CheckConstraint(RENDERED_TRAJECTORY, name="body_or_rendered_trajectory"),
    )

    filename: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str] = mapped_column(String(100))
    size: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)


class EvaluationRun(OrgScoped, Timestamped, Base):
    """One job: attempt_count independent trials of an evaluator on an environment version."""

    __tablename__ = "evaluation_runs"
    __table_args__ = (
        CheckConstraint(f"attempt_count BETWEEN {MIN_ATTEMPTS} AND {MAX_ATTEMPTS}", name="attempt_count_range"),
        CheckConstraint(one_of("status", RUN_STATUSES), name="status_known"),
        CheckConstraint(one_of("reset_mode", RESET_MODES), name="reset_mode_known"),
        CheckConstraint("(reset_mode = 'initial') = (reset_of_run_id IS NULL)", name="reset_names_its_run"),
        CheckConstraint("attempts >= 0", name="attempts_non_negative"),
        CheckConstraint("(dataset_run_id IS NULL) = (dataset_position IS NULL)", name="dataset_task"),
        org_fk("environment_version_id", "environment_versions"),
        org_fk("dataset_run_id", "dataset_runs"),
        org_fk("evaluator_config_id", "evaluator_configs"),
        org_fk("reset_of_run_id", "evaluation_runs"),
        # Runs in run order, (created_at, id), per version (migration 0028 added the id).
        Index(
            "ix_evaluation_runs_org_version_created", "organization_id", "environment_version_id", "created_at", "id"
        ),
        # A version's newest completed run (migration 0028).
        Index(
            "ix_evaluation_runs_completed",
            "organization_id",
            "environment_version_id",
            "created_at",
            "id",
            postgresql_where=text("status = 'completed'"),
        ),
        # The run's `#n` within its version (set by the evaluation_run_number trigger, migration 0020).
        Index(
            "ux_evaluation_runs_org_version_sequence",
            "organization_id",
            "environment_version_id",
            "sequence_number",
            unique=True,
        ),
        # Each evaluator's newest completed runs of a version: the pass@1 trends (migrations 0021, 0028).
        Index(
            "ix_evaluation_runs_completed_by_evaluator",
            "organization_id",
            "environment_version_id",
            "evaluator_config_id",
            "created_at",
            "id",
            postgresql_where=text("status = 'completed'"),
        ),
        # One run per submitted form: a second POST with the same key finds the first one's run (migration 0022).
        Index(
            "ux_evaluation_runs_org_submission_key",
            "organization_id",
            "submission_key",
            unique=True,
            postgresql_where=text("submission_key IS NOT NULL"),
        ),
        # The claim queue: each organization's queued runs, oldest first (migration 0025).
        Index(
            "ix_evaluation_runs_queue",
            "organization_id",
            "created_at",
            "id",
            postgresql_where=text("status = 'queued'"),
        ),
        # A dataset run's runs, task by task (migration 0041).
        Index(
            "ix_evaluation_runs_dataset_run",
            "organization_id",
            "dataset_run_id",
            "dataset_position",
            postgresql_where=text("dataset_run_id IS NOT NULL"),
        ),
        # The fair claim counts each organization's runs in progress (live leases).
        Index(
            "ix_evaluation_runs_in_progress",
            "organization_id",
            "lease_expires_at",
            postgresql_where=text("status = 'running'"),
        ),
    )

    environment_version_id: Mapped[uuid.UUID]
    evaluator_config_id: Mapped[uuid.UUID]
    # 1 for the first run queued on its environment version; numbered by a BEFORE INSERT trigger.
    sequence_number: Mapped[int] = mapped_column(Integer, server_default=FetchedValue())
    attempt_count: Mapped[int] = mapped_column(Integer)
    reset_mode: Mapped[ResetMode] = mapped_column(String(20), default="initial")
    reset_of_run_id: Mapped[uuid.UUID | None]
    world_seed: Mapped[int] = mapped_column(Integer, server_default="0")
    base_seed: Mapped[int] = mapped_column(Integer, server_default="0")
    status: Mapped[RunStatus] = mapped_column(String(20), default="queued")
    pass_at_k: Mapped[dict[str, float] | None] = mapped_column(JSONB)
    mean_reward: Mapped[float | None]
    stage_pass_at_k: Mapped[dict[str, dict[str, float]] | None] = mapped_column(JSONB)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # The key of the form submission that queued the run (None without a form): one run per key.
    submission_key: Mapped[uuid.UUID | None]
    # Where the worker is while the run is running: the trial, the agent's step in it and when the trial began.
    current_trial: Mapped[int | None] = mapped_column(Integer)
    current_step: Mapped[int | None] = mapped_column(Integer)
    current_trial_started_at: Mapped[datetime | None]
    # The dataset run this run is one task of, and that task's position in its dataset version (migration 0041).
    dataset_run_id: Mapped[uuid.UUID | None]
    dataset_position: Mapped[int | None] = mapped_column(Integer)

    # For joins in queries (never lazy-loaded: a page must not issue a query per row).
    environment_version: Mapped[EnvironmentVersion] = relationship(viewonly=True, lazy="raise")
    evaluator_config: Mapped[EvaluatorConfig] = relationship(viewonly=True, lazy="raise")


class EvaluationTrial(OrgScoped, Base):
    """One attempt of a run: its reward, failure category, stage_* metrics and trajectory artifact."""

    __tablename__ = "evaluation_trials"
    __table_args__ = (
        UniqueConstraint(
            "organization_id", "evaluation_run_id", "trial_number", name="uq_evaluation_trials_trial_number_per_run"
        ),
        CheckConstraint("trial_number >= 1", name="trial_number_positive"),
        CheckConstraint(REWARD_RANGE, name="reward_range"),
        CheckConstraint(one_of("status", TRIAL_STATUSES), name="status_known"),  # migration 0030
        CheckConstraint("trial_metrics_are_stages(metrics)", name="metrics_are_stages"),  # migration 0036
        org_fk("evaluation_run_id", "evaluation_runs"),
        org_fk("trajectory_artifact_id", "artifacts"),
        org_fk("environment_version_id", "environment_versions"),
        Index("ix_evaluation_trials_org_category_id", "organization_id", "failure_category", "id"),
        Index("ix_evaluation_trials_org_version_id", "organization_id", "environment_version_id", "id"),
        Index(
            "uq_evaluation_trials_external_id",
            "organization_id",
            "external_id",
            unique=True,
            postgresql_where=text("external_id IS NOT NULL"),
        ),
        org_fk("atif_artifact_id", "artifacts", name="fk_evaluation_trials_atif_artifacts"),
        Index(
            "ix_evaluation_trials_org_version_category_id",
            "organization_id",
            "environment_version_id",
            "failure_category",
            "id",
        ),
        Index("ix_evaluation_trials_search_vector", "search_vector", postgresql_using="gin"),
        # The trials explorer's orders (migration 0019; the rank's function is migration 0031's).
        Index("ix_evaluation_trials_org_failed_rank_id", "organization_id", text(FAILED_RANK), "id"),
        Index("ix_evaluation_trials_org_status_rank_id", "organization_id", "status", text(FAILED_RANK), "id"),
        Index("ix_evaluation_trials_org_reward_id", "organization_id", text("coalesce(reward, -1)"), "id"),
        Index("ix_evaluation_trials_org_agent_steps_id", "organization_id", text("trial_agent_steps(steps)"), "id"),
        Index(
            "ix_evaluation_trials_org_duration_id",
            "organization_id",
            text("coalesce(finished_at - started_at, '00:00:00'::interval)"),
            "id",
        ),
        Index(
            "ix_evaluation_trials_org_finished_id",
            "organization_id",
            text("coalesce(finished_at, '-infinity'::timestamptz)"),
            "id",
        ),
        # Reward and finish-time ranges that match few trials (migration 0023): plain columns, so the range is an
        # index condition under row-level security (float8 and timestamptz comparisons are leakproof; coalesce
        # is not, so the order indexes above cannot serve a range).
        Index("ix_evaluation_trials_org_reward", "organization_id", "reward"),
        # The `task` filter: md5 of the task text, compare's task key (migration 0029).
        Index("ix_evaluation_trials_task_key", text("md5(task)"), postgresql_using="hash"),
        Index("ix_evaluation_trials_org_finished_at", "organization_id", "finished_at"),
    )

    evaluation_run_id: Mapped[uuid.UUID]
    environment_version_id: Mapped[uuid.UUID]
    trial_number: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    status: Mapped[TrialStatus] = mapped_column(String(20))
    reward: Mapped[float | None]
    # The verifier's, or a reviewer's human category over it (migration 0033; the verifier's then stays in
    # trial_reviews.verifier_category): every page, count and export reads this one.
    failure_category: Mapped[str | None] = mapped_column(String(FAILURE_CATEGORY_CHARS))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    trajectory_artifact_id: Mapped[uuid.UUID | None]
    log_excerpt: Mapped[str] = mapped_column(Text, default="")
    task: Mapped[str] = mapped_column(Text, server_default="", default="")
    steps: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)  # the trajectory's steps (domain.trajectory)
    tools: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)  # what the agent was offered
    # Full-text search over task, log and steps: written by writes.runs.RECORD_TRIAL (queries.search reads it).
    search_vector: Mapped[str | None] = mapped_column(TSVECTOR, deferred=True)
    # Ingested trials: the caller's id (re-posting is idempotent) and the original ATIF document, kept verbatim.
    external_id: Mapped[str | None] = mapped_column(String(200))
    atif_artifact_id: Mapped[uuid.UUID | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # A reviewer recorded something on the trial (migration 0033): exports read the triage tables for these only.
    triaged: Mapped[bool] = mapped_column(server_default=false(), default=False)
    # Set by a trigger whenever steps are written (migration 0036), for the export's line: the steps nest deeper than
    # MAX_STORED_JSON_DEPTH; there are none.
    steps_too_deep: Mapped[bool] = mapped_column(server_default=false(), default=False)
    no_steps: Mapped[bool] = mapped_column(server_default=false(), default=False)


class TrialStage(Base):
    """One stage_* result of a trial, passed (value 1) or failed (below 1), with the trial's failed-first rank.

    Written by the trigger of migration 0024 in the statement that inserts the
    trial (and rewritten when its reward or metrics change): never by the app.
    The key is one result per trial and stage (so PostgreSQL plans a stage filter's EXISTS as a join it may run
    from either side, migration 0038); ix_trial_stages_results is the explorer's index of stage filters
    (queries.filters): a stage's trials with one result in one rank, newest last.
    """

    __tablename__ = "trial_stages"
    __table_args__ = (
        org_fk("evaluation_trial_id", "evaluation_trials"),
        Index(
            "ix_trial_stages_results", "organization_id", "stage_key", "passed", "failed_rank", "evaluation_trial_id"
        ),
    )

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    evaluation_trial_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    stage_key: Mapped[str] = mapped_column(String(STAGE_KEY_CHARS), primary_key=True)
    passed: Mapped[bool]
    failed_rank: Mapped[int] = mapped_column(SmallInteger)  # queries.filters.FAILED_RANK


class Rollout(OrgScoped, Timestamped, Base):
    """The exportable record of one scored trial: its reward and seed on an environment version."""

    __tablename__ = "rollouts"
    __table_args__ = (
        UniqueConstraint("organization_id", "evaluation_trial_id"),
        CheckConstraint(REWARD_RANGE, name="reward_range"),
        org_fk("environment_version_id", "environment_versions"),
        org_fk("evaluation_run_id", "evaluation_runs"),
        org_fk("evaluation_trial_id", "evaluation_trials"),
        Index("ix_rollouts_org_version_reward_seq", "organization_id", "environment_version_id", "reward", "seq"),
        Index("ix_rollouts_org_seq", "organization_id", "seq", unique=True),
        Index("ix_rollouts_org_run", "organization_id", "evaluation_run_id"),
    )

    environment_version_id: Mapped[uuid.UUID]
    evaluation_run_id: Mapped[uuid.UUID]
    evaluation_trial_id: Mapped[uuid.UUID]
    seed: Mapped[int] = mapped_column(Integer)
    reward: Mapped[float | None]
    # Export cursor: assigned in commit order within an organization (see writes.runs.record_trial).
    seq: Mapped[int] = mapped_column(
        BigInteger, Sequence("rollouts_seq"), server_default=text("nextval('rollouts_seq')")
    )
