"""Runs remember the form submission that queued them, and where their worker is.

`evaluation_runs.submission_key` is the key each rendering of the start-run
and reset forms carries (a hidden field): unique per organization, so a second
POST of the same form (a double click, a resubmitted page) finds the run the
first one queued instead of queueing another. NULL for runs queued without a
form (the API, the CLI, imports). The table keeps its row-level security.

`current_trial`, `current_step` and `current_trial_started_at` are written by
the worker while a run is running (which trial it is in, the agent's step in
it, when the trial began), so the run page can say what is happening.

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the columns and the unique partial index on (organization, submission key)."""
    op.add_column("evaluation_runs", sa.Column("submission_key", sa.Uuid(), nullable=True))
    op.add_column("evaluation_runs", sa.Column("current_trial", sa.Integer(), nullable=True))
    op.add_column("evaluation_runs", sa.Column("current_step", sa.Integer(), nullable=True))
    op.add_column("evaluation_runs", sa.Column("current_trial_started_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ux_evaluation_runs_org_submission_key",
        "evaluation_runs",
        ["organization_id", "submission_key"],
        unique=True,
        postgresql_where=sa.text("submission_key IS NOT NULL"),
    )


def downgrade() -> None:
    """Drop the index and the columns."""
    op.drop_index("ux_evaluation_runs_org_submission_key", table_name="evaluation_runs")
    for column in ("current_trial_started_at", "current_step", "current_trial", "submission_key"):
        op.drop_column("evaluation_runs", column)
