"""Preference pairs by index: rollouts (organization_id, environment_version_id, reward, seq).

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Replace the (org, version, reward) index with one that also orders ties by export position."""
    op.create_index(
        "ix_rollouts_org_version_reward_seq", "rollouts", ["organization_id", "environment_version_id", "reward", "seq"]
    )
    op.drop_index("ix_rollouts_org_version_reward", table_name="rollouts")


def downgrade() -> None:
    """Restore the previous index."""
    op.create_index("ix_rollouts_org_version_reward", "rollouts", ["organization_id", "environment_version_id", "reward"])
    op.drop_index("ix_rollouts_org_version_reward_seq", table_name="rollouts")
