"""Trials carry their environment version, so failure drill-downs are index range scans at any history size.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add evaluation_trials.environment_version_id (backfilled per org) and the drill-down indexes."""
    op.add_column("evaluation_trials", sa.Column("environment_version_id", sa.Uuid(), nullable=True))
    op.execute(
        """
        DO $$
        DECLARE org uuid;
        BEGIN
            FOR org IN SELECT id FROM organizations LOOP
                PERFORM set_config('app.current_org', org::text, true);
                UPDATE evaluation_trials t SET environment_version_id = er.environment_version_id
                FROM evaluation_runs er
                WHERE er.organization_id = t.organization_id AND er.id = t.evaluation_run_id;
            END LOOP;
        END $$
        """
    )
    op.alter_column("evaluation_trials", "environment_version_id", nullable=False)
    op.create_foreign_key(
        "fk_evaluation_trials_environment_versions",
        "evaluation_trials",
        "environment_versions",
        ["organization_id", "environment_version_id"],
        ["organization_id", "id"],
    )
    op.create_index(
        "ix_evaluation_trials_org_category_id", "evaluation_trials", ["organization_id", "failure_category", "id"]
    )
    op.create_index(
        "ix_evaluation_trials_org_version_category_id",
        "evaluation_trials",
        ["organization_id", "environment_version_id", "failure_category", "id"],
    )


def downgrade() -> None:
    """Drop the drill-down indexes and the column."""
    op.drop_index("ix_evaluation_trials_org_version_category_id", table_name="evaluation_trials")
    op.drop_index("ix_evaluation_trials_org_category_id", table_name="evaluation_trials")
    op.drop_constraint("fk_evaluation_trials_environment_versions", "evaluation_trials")
    op.drop_column("evaluation_trials", "environment_version_id")
