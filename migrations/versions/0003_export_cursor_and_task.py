"""Export cursor and task text: rollouts.seq in commit order per organization, evaluation_trials.task.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the export sequence to rollouts and the task prompt to trials."""
    op.execute("CREATE SEQUENCE rollouts_seq AS bigint")
    op.add_column(
        "rollouts",
        sa.Column("seq", sa.BigInteger(), nullable=False, server_default=sa.text("nextval('rollouts_seq')")),
    )
    op.execute("ALTER SEQUENCE rollouts_seq OWNED BY rollouts.seq")
    op.create_index("ix_rollouts_org_seq", "rollouts", ["organization_id", "seq"], unique=True)
    op.add_column("evaluation_trials", sa.Column("task", sa.Text(), nullable=False, server_default=""))
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(f'GRANT USAGE ON SEQUENCE rollouts_seq TO "{runtime}"')


def downgrade() -> None:
    """Drop the task column and the export sequence."""
    op.drop_column("evaluation_trials", "task")
    op.drop_index("ix_rollouts_org_seq", table_name="rollouts")
    op.drop_column("rollouts", "seq")
