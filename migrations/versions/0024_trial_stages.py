"""Trial stages: each trial's stage_* results as rows an index can serve in the explorer's failed-first order.

A stage filter (stagePassed, stageFailed) used to read each trial's metrics
jsonb: a page in failed-first order walked the failed trials until it found 50
that passed the stage, so a stage that no failed trial passes walked every one
of them. trial_stages holds a row per trial and stage_* key whose value is a
number of at most 1: passed (the value is 1) or failed (below 1), with the
trial's failed-first rank (queries.filters.FAILED_RANK). Its primary key
(organization_id, stage_key, passed, failed_rank, evaluation_trial_id) is both
the ordered list of the trials with a given stage result in a rank, newest id
last, and the one-probe check of a trial's result.

A trigger writes the rows in the statement that inserts the trials (the worker's
record_trial, the importers, the benchmark's generator alike), and rewrites a
trial's rows when its reward or metrics change. The triggers' functions run as
the owner, so the runtime role may only read the table (a stage result is the
trial's, never a row the app could forge); row-level security applies to them
as to every writer, under the writer's organization.

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
FAILED_RANK = "(CASE WHEN {t}.reward < 1::double precision THEN 2 WHEN {t}.reward IS NULL THEN 1 ELSE 0 END)"


def stage_rows(trials: str) -> str:
    """SELECT of the trial_stages rows of `trials` (evaluation_trials rows with organization_id, id, reward and
    metrics): a row per stage_* key whose value is a number of at most 1."""
    return f"""
        SELECT t.organization_id, m.key, (m.value)::numeric = 1, {FAILED_RANK.format(t="t")}, t.id
        FROM {trials} CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(t.metrics) = 'object'
                                                         THEN t.metrics ELSE '{{}}'::jsonb END) m
        WHERE m.key LIKE 'stage\\_%' AND CASE WHEN jsonb_typeof(m.value) = 'number' THEN (m.value)::numeric END <= 1
    """


ROW = "(SELECT {r}.organization_id, {r}.id, {r}.reward, {r}.metrics) t(organization_id, id, reward, metrics)"


COLUMNS = "organization_id, stage_key, passed, failed_rank, evaluation_trial_id"
FUNCTIONS = f"""
CREATE FUNCTION trial_stages_of_inserted_trials() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO trial_stages ({COLUMNS}) {stage_rows("inserted_trials t")};
    RETURN NULL;
END $$;

CREATE FUNCTION trial_stages_of_updated_trial() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM trial_stages WHERE ({COLUMNS}) IN ({stage_rows(ROW.format(r="OLD"))});
    INSERT INTO trial_stages ({COLUMNS}) {stage_rows(ROW.format(r="NEW"))};
    RETURN NULL;
END $$;
"""
TRIGGERS = """
CREATE TRIGGER trial_stages_on_insert AFTER INSERT ON evaluation_trials
    REFERENCING NEW TABLE AS inserted_trials FOR EACH STATEMENT EXECUTE FUNCTION trial_stages_of_inserted_trials();
CREATE TRIGGER trial_stages_on_update AFTER UPDATE OF reward, metrics ON evaluation_trials FOR EACH ROW
    WHEN (OLD.reward IS DISTINCT FROM NEW.reward OR OLD.metrics IS DISTINCT FROM NEW.metrics)
    EXECUTE FUNCTION trial_stages_of_updated_trial();
"""


def upgrade() -> None:
    """Create trial_stages under RLS with its triggers, and fill it from the trials recorded so far."""
    op.create_table(
        "trial_stages",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("stage_key", sa.String(length=100), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("failed_rank", sa.SmallInteger(), nullable=False),
        sa.Column("evaluation_trial_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluation_trial_id"],
            ["evaluation_trials.organization_id", "evaluation_trials.id"],
            name=op.f("fk_trial_stages_evaluation_trials"),
        ),
        sa.PrimaryKeyConstraint(*COLUMNS.split(", "), name=op.f("pk_trial_stages")),
    )
    op.execute("ALTER TABLE trial_stages ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE trial_stages FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON trial_stages "
        f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
    )
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(f'GRANT SELECT ON trial_stages TO "{runtime}"')  # written by the triggers only
    # Which (stage, result, rank) combinations exist: without it PostgreSQL multiplies the three columns' shares and
    # expects a stage no failed trial passes to match thousands of failed trials, and walks them all to find none.
    op.execute("CREATE STATISTICS trial_stages_results (mcv) ON stage_key, passed, failed_rank FROM trial_stages")
    op.execute(FUNCTIONS)
    op.execute(TRIGGERS)
    # Backfill, one organization at a time (forced RLS applies to the owner too).
    op.execute(
        f"""
        DO $$
        DECLARE org uuid;
        BEGIN
            FOR org IN SELECT id FROM organizations LOOP
                PERFORM set_config('app.current_org', org::text, true);
                INSERT INTO trial_stages ({COLUMNS}) {stage_rows("evaluation_trials t")};
            END LOOP;
        END $$
        """
    )
    op.execute("ANALYZE trial_stages")


def downgrade() -> None:
    """Drop the triggers, their functions and the table."""
    op.execute("DROP TRIGGER trial_stages_on_update ON evaluation_trials")
    op.execute("DROP TRIGGER trial_stages_on_insert ON evaluation_trials")
    op.execute("DROP FUNCTION trial_stages_of_updated_trial()")
    op.execute("DROP FUNCTION trial_stages_of_inserted_trials()")
    op.execute("DROP STATISTICS trial_stages_results")
    op.drop_table("trial_stages")
