"""trial_stages: keyed by trial and stage (one result each), its ordered index of results beside the key.

The key of migration 0024 (organization_id, stage_key, passed, failed_rank, evaluation_trial_id) let a trial hold
both results of one stage, so PostgreSQL could not tell that a stage filter's EXISTS matches at most one row per
trial and kept it a semi join, which it runs from the trials' side only: the explorer's page of the trials that
passed the last stage of one environment walked, newest first, every succeeded trial of the other environments
recorded since (156,118 of them, 450 ms to 1.3 s at 1M trials) to probe each for a stage it does not have. Keyed
(organization_id, evaluation_trial_id, stage_key), what a jsonb object's unique keys already guaranteed, the semi
join becomes a join, and PostgreSQL reads the stage's results newest first where that is the shorter walk (0.6 ms
for the same page). The ordered index of results is what the old key was, no longer unique.

Revision ID: 0038
Revises: 0037
"""

from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None

RESULTS = "organization_id, stage_key, passed, failed_rank, evaluation_trial_id"


def upgrade() -> None:
    """Key trial_stages by trial and stage; keep the results' order as an index."""
    op.execute("ALTER TABLE trial_stages DROP CONSTRAINT pk_trial_stages")
    op.execute(
        "ALTER TABLE trial_stages ADD CONSTRAINT pk_trial_stages PRIMARY KEY "
        "(organization_id, evaluation_trial_id, stage_key)"
    )
    op.execute(f"CREATE INDEX ix_trial_stages_results ON trial_stages ({RESULTS})")


def downgrade() -> None:
    """The key of migration 0024 again."""
    op.execute("DROP INDEX ix_trial_stages_results")
    op.execute("ALTER TABLE trial_stages DROP CONSTRAINT pk_trial_stages")
    op.execute(f"ALTER TABLE trial_stages ADD CONSTRAINT pk_trial_stages PRIMARY KEY ({RESULTS})")
