"""The first-run checklist's progress per member: checklist_marks, one row per mark a member's visits left.

The checklist on /environments ticks "Open a failed trial" and "Compare two runs" from what a member did, and
remembers that it was shown (while the organization had no run) or hidden. The signed session cookie held these,
so the checklist forgot them at the next login; each is now a row (organization_id, user_id, mark) under forced
row-level security with the tenant policy, its foreign key (organization_id, user_id) to the membership, so the
marks go with a removed member's membership. The runtime role may read and insert them.

Revision ID: 0043
Revises: 0042
"""

import sqlalchemy as sa
from alembic import op

revision = "0043"
down_revision = "0042"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
MARKS = ("shown", "opened-failed-trial", "compared-runs", "hidden")  # domain.vocabulary.CHECKLIST_MARKS


def upgrade() -> None:
    """Create checklist_marks under RLS with its grants."""
    op.create_table(
        "checklist_marks",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("mark", sa.String(40), nullable=False),
        sa.Column("reached_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.CheckConstraint(f"mark IN ({', '.join(repr(m) for m in MARKS)})", name="ck_checklist_marks_mark_known"),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], name="fk_checklist_marks_organizations"),
        sa.ForeignKeyConstraint(
            ["organization_id", "user_id"],
            ["memberships.organization_id", "memberships.user_id"],
            name="fk_checklist_marks_memberships",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("organization_id", "user_id", "mark", name="pk_checklist_marks"),
    )
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute("ALTER TABLE checklist_marks ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE checklist_marks FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON checklist_marks "
        f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
    )
    op.execute(f'GRANT SELECT, INSERT ON checklist_marks TO "{runtime}"')


def downgrade() -> None:
    """Drop checklist_marks."""
    op.drop_table("checklist_marks")
