"""Trials by task: a hash index on md5(task), the task key compare groups by and the `task` filter reads.

Compare's per-task table opens each task's trials (`/trials?...&task=<md5>`).
A version holds tens of thousands of trials; without an index the explorer
computed md5 over each of them (2.8 s for a 50,000-trial version). A hash
index answers the equality in one probe and is small (a 4-byte hash per
trial); the organization is read on the trial rows it finds, as row-level
security does for every read. ANALYZE gathers the expression's statistics at
once, so the planner knows a task key is selective before autovacuum comes by.

Revision ID: 0029
Revises: 0028
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the index."""
    op.create_index("ix_evaluation_trials_task_key", "evaluation_trials", [sa.text("md5(task)")], postgresql_using="hash")
    # The planner learns how selective a task key is from the expression's statistics, which ANALYZE gathers.
    op.execute("ANALYZE evaluation_trials")


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_evaluation_trials_task_key", table_name="evaluation_trials")
