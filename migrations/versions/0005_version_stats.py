"""Per-version stats rollup (runs, trials, rollouts by reward class, reward sum/min/max) and runs' mean reward.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"


def upgrade() -> None:
    """Create environment_version_stats under RLS, add evaluation_runs.mean_reward, backfill both per org."""
    op.add_column("evaluation_runs", sa.Column("mean_reward", sa.Double(), nullable=True))
    op.create_table(
        "environment_version_stats",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("environment_version_id", sa.Uuid(), nullable=False),
        sa.Column("runs", sa.BigInteger(), nullable=False),
        sa.Column("trials", sa.BigInteger(), nullable=False),
        sa.Column("rollouts", sa.BigInteger(), nullable=False),
        sa.Column("scored", sa.BigInteger(), nullable=False),
        sa.Column("successes", sa.BigInteger(), nullable=False),
        sa.Column("zero_rewards", sa.BigInteger(), nullable=False),
        sa.Column("reward_sum", sa.Double(), nullable=False),
        sa.Column("min_reward", sa.Double(), nullable=True),
        sa.Column("max_reward", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name=op.f("fk_environment_version_stats_environment_versions"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "environment_version_id", name=op.f("pk_environment_version_stats")),
    )
    op.execute("ALTER TABLE environment_version_stats ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE environment_version_stats FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON environment_version_stats "
        f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
    )
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON environment_version_stats TO "{runtime}"')
    # Backfill, one organization at a time (forced RLS applies to the owner too).
    op.execute(
        f"""
        DO $$
        DECLARE org uuid;
        BEGIN
            FOR org IN SELECT id FROM organizations LOOP
                PERFORM set_config('app.current_org', org::text, true);
                UPDATE evaluation_runs er SET mean_reward = s.mean
                FROM (SELECT evaluation_run_id, avg(reward) AS mean FROM evaluation_trials
                      WHERE reward IS NOT NULL GROUP BY 1) s
                WHERE er.id = s.evaluation_run_id AND er.status = 'completed';
                INSERT INTO environment_version_stats
                SELECT org, v.id,
                       (SELECT count(*) FROM evaluation_runs er WHERE er.environment_version_id = v.id),
                       (SELECT count(*) FROM evaluation_trials t JOIN evaluation_runs er
                          ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
                        WHERE er.environment_version_id = v.id),
                       r.rollouts, r.scored, r.successes, r.zeros, r.reward_sum, r.min_reward, r.max_reward
                FROM environment_versions v
                CROSS JOIN LATERAL (
                    SELECT count(*) AS rollouts, count(reward) AS scored,
                           count(*) FILTER (WHERE reward = 1) AS successes,
                           count(*) FILTER (WHERE reward = 0) AS zeros,
                           coalesce(sum(reward), 0) AS reward_sum, min(reward) AS min_reward,
                           max(reward) AS max_reward
                    FROM rollouts WHERE environment_version_id = v.id
                ) r;
            END LOOP;
        END $$
        """
    )


def downgrade() -> None:
    """Drop the stats rollup and the mean reward column."""
    op.drop_table("environment_version_stats")
    op.drop_column("evaluation_runs", "mean_reward")
