"""Evaluator rollups: failure categories and stage figures per environment version and evaluator configuration.

The capability gap and partial rewards read per-version rollups
(failure_category_counts, stage_metric_rollups, environment_version_stats).
Narrowed to one evaluator they had nothing to read but the evaluator's trials
(34 ms at 7,000 trials, growing with them). These two tables hold the same
figures per (version, evaluator), so the narrowed pages cost O(categories) too:

* evaluator_category_counts: trials per failure_category, with '' for the
  trials that have none (succeeded, or not scored), so the version's trials of
  that evaluator (the rate's denominator) are the sum of its rows;
* evaluator_stage_rollups: per stage_* key whose value is a number, the trials
  that reported it, how many passed (value 1) and the value sum, as
  stage_metric_rollups counts them.

A trigger writes them in the statement that inserts the trials (the worker's
record_trial, the importers and the benchmark's generator alike), grouped and
in key order, so concurrent writers lock rows in one order. Its function runs
as the owner and the runtime role may only read them; row-level security
applies as to every writer, under the writer's organization. Trials are never
updated or deleted after they are recorded (like the other rollups, these are
kept on insert only).

Revision ID: 0027
Revises: 0026
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
KEY = ("organization_id", "environment_version_id", "evaluator_config_id")


def category_rows(trials: str) -> str:
    """SELECT of evaluator_category_counts rows (grouped, in key order) for the evaluation_trials rows `trials`."""
    return f"""
        SELECT t.organization_id, t.environment_version_id, r.evaluator_config_id,
               coalesce(t.failure_category, ''), count(*)
        FROM {trials}
        JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    """


def stage_rows(trials: str) -> str:
    """SELECT of evaluator_stage_rollups rows (grouped, in key order) for the evaluation_trials rows `trials`."""
    return f"""
        SELECT t.organization_id, t.environment_version_id, r.evaluator_config_id, m.key, count(*),
               count(*) FILTER (WHERE (m.value)::float8 = 1), sum((m.value)::float8)
        FROM {trials}
        JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
        CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(t.metrics) = 'object'
                                           THEN t.metrics ELSE '{{}}'::jsonb END) m
        WHERE m.key LIKE 'stage\\_%' AND jsonb_typeof(m.value) = 'number'
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    """


CATEGORY_COLUMNS = "organization_id, environment_version_id, evaluator_config_id, failure_category, trials"
STAGE_COLUMNS = "organization_id, environment_version_id, evaluator_config_id, stage_key, trials, passed, value_sum"
FUNCTION = f"""
CREATE FUNCTION evaluator_rollups_of_inserted_trials() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO evaluator_category_counts AS c ({CATEGORY_COLUMNS}) {category_rows("inserted_trials t")}
    ON CONFLICT (organization_id, environment_version_id, evaluator_config_id, failure_category)
    DO UPDATE SET trials = c.trials + EXCLUDED.trials;
    INSERT INTO evaluator_stage_rollups AS s ({STAGE_COLUMNS}) {stage_rows("inserted_trials t")}
    ON CONFLICT (organization_id, environment_version_id, evaluator_config_id, stage_key)
    DO UPDATE SET trials = s.trials + EXCLUDED.trials, passed = s.passed + EXCLUDED.passed,
                  value_sum = s.value_sum + EXCLUDED.value_sum;
    RETURN NULL;
END $$;
"""
TRIGGER = """
CREATE TRIGGER evaluator_rollups_on_insert AFTER INSERT ON evaluation_trials
    REFERENCING NEW TABLE AS inserted_trials FOR EACH STATEMENT EXECUTE FUNCTION evaluator_rollups_of_inserted_trials();
"""


def key_columns() -> list[sa.Column]:
    return [sa.Column(name, sa.Uuid(), nullable=False) for name in KEY]


def foreign_keys(table: str) -> list[sa.ForeignKeyConstraint]:
    return [
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name=op.f(f"fk_{table}_environment_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluator_config_id"],
            ["evaluator_configs.organization_id", "evaluator_configs.id"],
            name=op.f(f"fk_{table}_evaluator_configs"),
        ),
    ]


def upgrade() -> None:
    """Create both tables under RLS with the trigger, and fill them from the trials recorded so far."""
    op.create_table(
        "evaluator_category_counts",
        *key_columns(),
        sa.Column("failure_category", sa.String(length=64), nullable=False),
        sa.Column("trials", sa.BigInteger(), nullable=False),
        *foreign_keys("evaluator_category_counts"),
        sa.PrimaryKeyConstraint(*KEY, "failure_category", name=op.f("pk_evaluator_category_counts")),
    )
    op.create_table(
        "evaluator_stage_rollups",
        *key_columns(),
        sa.Column("stage_key", sa.String(length=100), nullable=False),
        sa.Column("trials", sa.BigInteger(), nullable=False),
        sa.Column("passed", sa.BigInteger(), nullable=False),
        sa.Column("value_sum", sa.Double(), nullable=False),
        *foreign_keys("evaluator_stage_rollups"),
        sa.PrimaryKeyConstraint(*KEY, "stage_key", name=op.f("pk_evaluator_stage_rollups")),
    )
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    for table in ("evaluator_category_counts", "evaluator_stage_rollups"):
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
        )
        op.execute(f'GRANT SELECT ON {table} TO "{runtime}"')  # written by the trigger only
    op.execute(FUNCTION)
    op.execute(TRIGGER)
    # Backfill, one organization at a time (forced RLS applies to the owner too).
    op.execute(
        f"""
        DO $$
        DECLARE org uuid;
        BEGIN
            FOR org IN SELECT id FROM organizations LOOP
                PERFORM set_config('app.current_org', org::text, true);
                INSERT INTO evaluator_category_counts ({CATEGORY_COLUMNS}) {category_rows("evaluation_trials t")};
                INSERT INTO evaluator_stage_rollups ({STAGE_COLUMNS}) {stage_rows("evaluation_trials t")};
            END LOOP;
        END $$
        """
    )


def downgrade() -> None:
    """Drop the trigger, its function and the tables."""
    op.execute("DROP TRIGGER evaluator_rollups_on_insert ON evaluation_trials")
    op.execute("DROP FUNCTION evaluator_rollups_of_inserted_trials()")
    op.drop_table("evaluator_stage_rollups")
    op.drop_table("evaluator_category_counts")
