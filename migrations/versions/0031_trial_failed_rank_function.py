"""The trials explorer's failed-first rank is one SQL function, trial_failed_rank(reward).

The rank (2 = scored below 1, 1 = unscored, 0 = reward 1) was written out as
a CASE in four places: the two explorer indexes of migration 0019, the
trial_stages triggers of migration 0024 and the explorer's queries. It is now
the function, a `RETURN CASE …` body that is LANGUAGE sql, IMMUTABLE and not
STRICT, so the planner inlines it: a query's trial_failed_rank(t.reward) and
the indexes' trial_failed_rank(reward) both become the same CASE expression,
and the explorer's failed-first pages stay index range scans.

The two indexes are built again on the function under a new name, then the
old ones are dropped and the new ones take their names: the table is locked
against writes (not reads) while they build, and against reads only for the
drop at the end. The triggers' functions are replaced to call it; the rows of
trial_stages keep their ranks, which are the same numbers.

Revision ID: 0031
Revises: 0030
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE FUNCTION trial_failed_rank(reward double precision) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN reward < 1 THEN 2 WHEN reward IS NULL THEN 1 ELSE 0 END
"""
SIGNATURE = "trial_failed_rank(double precision)"
CASE = "(CASE WHEN {t}reward < 1::double precision THEN 2 WHEN {t}reward IS NULL THEN 1 ELSE 0 END)"
CALL = "trial_failed_rank({t}reward)"
INDEXES = {
    "ix_evaluation_trials_org_failed_rank_id": "organization_id, {rank}, id",
    "ix_evaluation_trials_org_status_rank_id": "organization_id, status, {rank}, id",
}
COLUMNS = "organization_id, stage_key, passed, failed_rank, evaluation_trial_id"
ROW = "(SELECT {r}.organization_id, {r}.id, {r}.reward, {r}.metrics) t(organization_id, id, reward, metrics)"


def stage_rows(trials: str, rank: str) -> str:
    """Migration 0024's SELECT of the trial_stages rows of `trials`, with the rank written as `rank`."""
    return f"""
        SELECT t.organization_id, m.key, (m.value)::numeric = 1, {rank.format(t="t.")}, t.id
        FROM {trials} CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(t.metrics) = 'object'
                                                         THEN t.metrics ELSE '{{}}'::jsonb END) m
        WHERE m.key LIKE 'stage\\_%' AND CASE WHEN jsonb_typeof(m.value) = 'number' THEN (m.value)::numeric END <= 1
    """


def trigger_functions(rank: str) -> str:
    """Migration 0024's trigger functions, with the rank written as `rank`."""
    return f"""
CREATE OR REPLACE FUNCTION trial_stages_of_inserted_trials() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO trial_stages ({COLUMNS}) {stage_rows("inserted_trials t", rank)};
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION trial_stages_of_updated_trial() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM trial_stages WHERE ({COLUMNS}) IN ({stage_rows(ROW.format(r="OLD"), rank)});
    INSERT INTO trial_stages ({COLUMNS}) {stage_rows(ROW.format(r="NEW"), rank)};
    RETURN NULL;
END $$;
"""


def rebuild_indexes(rank: str) -> None:
    """Build the explorer's rank indexes on `rank` beside the old ones, then drop those and take their names."""
    for name, columns in INDEXES.items():
        op.execute(f"CREATE INDEX {name}_new ON evaluation_trials ({columns.format(rank=rank.format(t=''))})")
    for name in INDEXES:
        op.execute(f"DROP INDEX {name}")
        op.execute(f"ALTER INDEX {name}_new RENAME TO {name}")


def upgrade() -> None:
    """Create the function (the runtime role's queries call it), and use it in the indexes and the triggers."""
    op.execute(FUNCTION)
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    # Like trial_agent_steps (0019), a pure function any role may call; said for the runtime role all the same.
    op.execute(f'GRANT EXECUTE ON FUNCTION {SIGNATURE} TO "{runtime}"')
    rebuild_indexes(CALL)
    op.execute(trigger_functions(CALL))


def downgrade() -> None:
    """Write the CASE out again in the triggers and the indexes, and drop the function."""
    op.execute(trigger_functions(CASE))
    rebuild_indexes(CASE)
    op.execute(f"DROP FUNCTION {SIGNATURE}")
