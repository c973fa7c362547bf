"""Worker presence: each worker process announces its sandbox mode, so owners can be warned of an unsandboxed one.

Not customer data (no organization_id, no RLS): one row per running worker
process with its name and AGENTFORGE_SANDBOX mode, refreshed while it runs and
deleted when it stops; a row not refreshed for a minute is a worker that died.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create worker_presence and let the runtime role keep its own rows."""
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(
        """
        CREATE TABLE worker_presence (
            name text PRIMARY KEY,
            sandbox_mode text NOT NULL CONSTRAINT ck_worker_presence_sandbox_mode CHECK (sandbox_mode IN ('bwrap', 'none')),
            started_at timestamptz NOT NULL DEFAULT now(),
            last_seen_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON worker_presence TO "{runtime}"')


def downgrade() -> None:
    """Drop worker_presence."""
    op.execute("DROP TABLE worker_presence")
