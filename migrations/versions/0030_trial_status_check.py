"""A trial's status is one of the vocabulary's (succeeded, failed, error), as a CHECK like the run's status.

Every status column now has its CHECK (runs since 0001, trials here), each
built from domain/vocabulary.py by the models. The constraint is added NOT
VALID and then validated, so the table is not locked against reads while the
existing rows are checked.

Revision ID: 0030
Revises: 0029
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

NAME = "ck_evaluation_trials_status_known"


def upgrade() -> None:
    """Add and validate the constraint."""
    op.execute(
        f"ALTER TABLE evaluation_trials ADD CONSTRAINT {NAME} "
        "CHECK (status IN ('succeeded', 'failed', 'error')) NOT VALID"
    )
    op.execute(f"ALTER TABLE evaluation_trials VALIDATE CONSTRAINT {NAME}")


def downgrade() -> None:
    """Drop it."""
    op.execute(f"ALTER TABLE evaluation_trials DROP CONSTRAINT {NAME}")
