"""Login throttle: failed logins counted per account and per client address in a sliding window.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create login_throttle (no organization: it is consulted before anyone is logged in)."""
    op.create_table(
        "login_throttle",
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("window_started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_login_throttle")),
    )
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON login_throttle TO "{runtime}"')


def downgrade() -> None:
    """Drop the throttle."""
    op.drop_table("login_throttle")
