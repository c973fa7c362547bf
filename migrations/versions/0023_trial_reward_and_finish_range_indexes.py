"""Indexes for reward and finish-time ranges in the trials explorer, so a filter that matches few trials is fast.

A page of /trials walks its order's index and keeps matching rows; when a
filter matches few trials, queries.trials looks the matching rows up instead.
For a reward range (minReward, maxReward, the recovery band) or a finish-time
range that lookup needs an index whose condition PostgreSQL may apply before
row-level security: plain (organization_id, reward) and (organization_id,
finished_at), whose comparisons are leakproof (the coalesce(...) expressions
of migration 0019's order indexes are not, so those serve orders only).

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_evaluation_trials_org_reward": ["organization_id", "reward"],
    "ix_evaluation_trials_org_finished_at": ["organization_id", "finished_at"],
}


def upgrade() -> None:
    """Create both indexes."""
    for name, columns in INDEXES.items():
        op.create_index(name, "evaluation_trials", columns)


def downgrade() -> None:
    """Drop them."""
    for name in INDEXES:
        op.drop_index(name, table_name="evaluation_trials")
