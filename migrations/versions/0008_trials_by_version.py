"""Trials of one environment version in id order: (organization_id, environment_version_id, id).

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Index the per-version trial list."""
    op.create_index(
        "ix_evaluation_trials_org_version_id", "evaluation_trials", ["organization_id", "environment_version_id", "id"]
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_evaluation_trials_org_version_id", table_name="evaluation_trials")
