"""Review queues and review claims.

A review queue is one reviewer's walk through the trials an explorer filter matched when it was started: the
explorer's parameters (`filters`, the order included; `summary`, the explorer's words for them), the matching trial
ids in the explorer's order (at most 500, `more` when the filter matched more), and the reviewer's decisions in it,
newest last, each with the trial's triage before and after (what `u` restores). A review claim is a trial a reviewer
opened in a queue: every other reviewer's queue skips it until `claimed_until` (ten minutes on), and a decision on
it from another reviewer's queue is refused meanwhile.

Both tables hold organization_id under forced row-level security with the tenant policy, keys that lead with it,
and a claim's trial is a trial of the same organization (it goes with the trial). The runtime role reads and
writes both (a queue's decisions are updated, claims are taken over once they lapse, and deleted).

Revision ID: 0042
Revises: 0041
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
TABLES = ("review_queues", "review_claims")
GRANTS = {"review_queues": "SELECT, INSERT, UPDATE, DELETE", "review_claims": "SELECT, INSERT, UPDATE, DELETE"}


def upgrade() -> None:
    """Create the two tables under RLS with their grants."""
    now = sa.text("now()")
    op.create_table(
        "review_queues",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("filters", JSONB(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("trial_ids", ARRAY(sa.Uuid()), nullable=False),
        sa.Column("more", sa.Boolean(), nullable=False, server_default="false"),
        sa.Column("decisions", JSONB(), nullable=False, server_default="[]"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], name="fk_review_queues_organizations"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_review_queues_users", ondelete="CASCADE"),
        sa.CheckConstraint("cardinality(trial_ids) BETWEEN 1 AND 500", name="ck_review_queues_trials"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_review_queues"),
    )
    op.create_table(
        "review_claims",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("evaluation_trial_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluation_trial_id"],
            ["evaluation_trials.organization_id", "evaluation_trials.id"],
            name="fk_review_claims_evaluation_trials",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_review_claims_users", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("organization_id", "evaluation_trial_id", name="pk_review_claims"),
    )
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
        )
        op.execute(f'GRANT {GRANTS[table]} ON {table} TO "{runtime}"')


def downgrade() -> None:
    """Drop the two tables (their policies and grants go with them)."""
    op.drop_table("review_claims")
    op.drop_table("review_queues")
