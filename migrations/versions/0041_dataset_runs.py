"""Dataset runs: one evaluator on every task of a dataset version, one evaluation run per task; checkpoints.

A dataset run names a dataset version, an evaluator configuration and attemptCount; it queues one evaluation run
per task with the task's world seed (evaluation_runs.dataset_run_id and dataset_position say which), so every agent
meets the same tasks. dataset_run_tasks is its rollup, one row per task: the task's current evaluation run (a retry
of a task that ended in errors points it at a new run and starts its counts again) and that run's trials,
successes, scored trials, reward sum and sum of squares (a task-clustered figure's TaskTally), trials that ended in
infrastructure errors, tokens, the start of the task's text, its trials per failure_category (`categories`,
{category: trials}, kept right by a trigger when a reviewer's human category replaces a trial's) and per stage_* key
(`stages`, {key: [trials, passed, value sum]}), and a `revision` every change adds to. writes.runs.RECORD_TRIAL adds to it in the
statement that records a trial, so a dataset run's page, the leaderboard and compare read these rows and never scan
trials.

An evaluator configuration may carry `checkpoint` (text) and `step` (an integer): the dataset page charts pass@1
against the step.

Revision ID: 0041
Revises: 0040
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0041"
down_revision = "0040"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
TABLES = ("dataset_runs", "dataset_run_tasks")
GRANTS = {"dataset_runs": "SELECT, INSERT", "dataset_run_tasks": "SELECT, INSERT, UPDATE"}
# A reviewer's human category replaces a trial's failure_category (migration 0033): the trial's task row, when the
# trial's run is its task's current run, counts one less of the old category and one more of the new, and every
# change adds to the row's revision (what a process keeps its computed figures under, queries.kept). It runs as the
# role that changed the trial, under that organization's row-level security (the runtime role may update the rows).
RECATEGORISED = """
CREATE FUNCTION dataset_run_task_of_recategorised_trial() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE dataset_run_tasks t SET revision = t.revision + 1, categories = (
        SELECT coalesce(jsonb_object_agg(key, value), '{}') FROM (
            SELECT key, sum(value) AS value FROM (
                SELECT c.key, c.value::int AS value FROM jsonb_each_text(t.categories) c
                UNION ALL SELECT OLD.failure_category, -1 WHERE OLD.failure_category IS NOT NULL
                UNION ALL SELECT NEW.failure_category, 1 WHERE NEW.failure_category IS NOT NULL
            ) change GROUP BY key
        ) counted WHERE value > 0)
    WHERE t.organization_id = NEW.organization_id AND t.evaluation_run_id = NEW.evaluation_run_id;
    RETURN NULL;
END $$;
CREATE TRIGGER dataset_run_task_on_recategorise AFTER UPDATE OF failure_category ON evaluation_trials
    FOR EACH ROW WHEN (OLD.failure_category IS DISTINCT FROM NEW.failure_category)
    EXECUTE FUNCTION dataset_run_task_of_recategorised_trial();
"""


def upgrade() -> None:
    """Create the two tables under RLS, link evaluation runs to them, and add checkpoints to evaluator configs."""
    now = sa.text("now()")
    op.create_table(
        "dataset_runs",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("dataset_version_id", sa.Uuid(), nullable=False),
        sa.Column("evaluator_config_id", sa.Uuid(), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("task_count", sa.Integer(), nullable=False),
        sa.Column("submission_key", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], name="fk_dataset_runs_organizations"),
        sa.ForeignKeyConstraint(
            ["organization_id", "dataset_version_id"],
            ["dataset_versions.organization_id", "dataset_versions.id"],
            name="fk_dataset_runs_dataset_versions",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluator_config_id"],
            ["evaluator_configs.organization_id", "evaluator_configs.id"],
            name="fk_dataset_runs_evaluator_configs",
        ),
        sa.CheckConstraint("attempt_count BETWEEN 1 AND 8", name="ck_dataset_runs_attempt_count_range"),
        sa.CheckConstraint("task_count BETWEEN 1 AND 10000", name="ck_dataset_runs_task_count_range"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_dataset_runs"),
    )
    # The leaderboard: each evaluator's newest dataset run of a version.
    op.create_index(
        "ix_dataset_runs_version_evaluator_created",
        "dataset_runs",
        ["organization_id", "dataset_version_id", "evaluator_config_id", "created_at", "id"],
    )
    op.create_index(
        "ux_dataset_runs_org_submission_key",
        "dataset_runs",
        ["organization_id", "submission_key"],
        unique=True,
        postgresql_where=sa.text("submission_key IS NOT NULL"),
    )
    op.add_column("evaluation_runs", sa.Column("dataset_run_id", sa.Uuid(), nullable=True))
    op.add_column("evaluation_runs", sa.Column("dataset_position", sa.Integer(), nullable=True))
    op.create_foreign_key(
        "fk_evaluation_runs_dataset_runs",
        "evaluation_runs",
        "dataset_runs",
        ["organization_id", "dataset_run_id"],
        ["organization_id", "id"],
    )
    op.create_check_constraint(
        "dataset_task",
        "evaluation_runs",
        "(dataset_run_id IS NULL) = (dataset_position IS NULL)",
    )
    op.create_index(
        "ix_evaluation_runs_dataset_run",
        "evaluation_runs",
        ["organization_id", "dataset_run_id", "dataset_position"],
        postgresql_where=sa.text("dataset_run_id IS NOT NULL"),
    )
    op.create_table(
        "dataset_run_tasks",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("dataset_run_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("environment_version_id", sa.Uuid(), nullable=False),
        sa.Column("world_seed", sa.Integer(), nullable=True),
        sa.Column("evaluation_run_id", sa.Uuid(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("trials", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("successes", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("scored", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("reward_sum", sa.Float(), nullable=False, server_default="0"),
        sa.Column("reward_square_sum", sa.Float(), nullable=False, server_default="0"),
        sa.Column("errors", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("task", sa.Text(), nullable=True),
        sa.Column("categories", JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("stages", JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("revision", sa.BigInteger(), nullable=False, server_default="0"),
        sa.ForeignKeyConstraint(
            ["organization_id", "dataset_run_id"],
            ["dataset_runs.organization_id", "dataset_runs.id"],
            name="fk_dataset_run_tasks_dataset_runs",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name="fk_dataset_run_tasks_environment_versions",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluation_run_id"],
            ["evaluation_runs.organization_id", "evaluation_runs.id"],
            name="fk_dataset_run_tasks_evaluation_runs",
        ),
        sa.CheckConstraint("position >= 1", name="ck_dataset_run_tasks_position_positive"),
        sa.CheckConstraint(
            "trials >= 0 AND successes BETWEEN 0 AND trials AND scored BETWEEN 0 AND trials AND errors >= 0 "
            "AND retries >= 0 AND tokens >= 0",
            name="ck_dataset_run_tasks_counts",
        ),
        sa.PrimaryKeyConstraint("organization_id", "dataset_run_id", "position", name="pk_dataset_run_tasks"),
    )
    # The leaderboard and a dataset run's totals read each task's counts by an index-only scan (a finished dataset
    # run's pages are all-visible once vacuumed): half the time of the rows themselves at 20 x 1,000 tasks.
    op.create_index(
        "ix_dataset_run_tasks_tallies",
        "dataset_run_tasks",
        ["organization_id", "dataset_run_id", "position"],
        postgresql_include=[
            "trials", "successes", "scored", "reward_sum", "reward_square_sum", "tokens", "evaluation_run_id"
        ],
    )  # fmt: skip
    # RECORD_TRIAL finds a trial's task row by its run (one row at most; none for a run of no dataset).
    op.create_index(
        "ux_dataset_run_tasks_evaluation_run",
        "dataset_run_tasks",
        ["organization_id", "evaluation_run_id"],
        unique=True,
    )
    op.add_column("evaluator_configs", sa.Column("checkpoint", sa.String(200), nullable=True))
    op.add_column("evaluator_configs", sa.Column("step", sa.BigInteger(), nullable=True))
    op.create_check_constraint("step_non_negative", "evaluator_configs", "step >= 0")
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
        )
        op.execute(f'GRANT {GRANTS[table]} ON {table} TO "{runtime}"')
    op.execute(
        "CREATE TRIGGER dataset_runs_immutable BEFORE UPDATE OR DELETE ON dataset_runs "
        "FOR EACH ROW EXECUTE FUNCTION reject_change_of_immutable_row()"
    )
    op.execute(RECATEGORISED)
    op.execute("REVOKE ALL ON FUNCTION dataset_run_task_of_recategorised_trial() FROM PUBLIC")


def downgrade() -> None:
    """Drop the recategorising trigger, the checkpoint columns, the runs' links and the two tables."""
    op.execute("DROP TRIGGER dataset_run_task_on_recategorise ON evaluation_trials")
    op.execute("DROP FUNCTION dataset_run_task_of_recategorised_trial()")
    op.drop_constraint("ck_evaluator_configs_step_non_negative", "evaluator_configs")
    op.drop_column("evaluator_configs", "step")
    op.drop_column("evaluator_configs", "checkpoint")
    op.drop_table("dataset_run_tasks")
    op.drop_index("ix_evaluation_runs_dataset_run", "evaluation_runs")
    op.drop_constraint("ck_evaluation_runs_dataset_task", "evaluation_runs")
    op.drop_constraint("fk_evaluation_runs_dataset_runs", "evaluation_runs")
    op.drop_column("evaluation_runs", "dataset_position")
    op.drop_column("evaluation_runs", "dataset_run_id")
    op.drop_table("dataset_runs")
