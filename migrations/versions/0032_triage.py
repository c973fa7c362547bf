"""Triage: labels, trial labels, review states with a human failure category, notes, and the audit trail.

Every new table holds organization_id under forced row-level security with the
tenant policy, composite keys (organization_id, …) and foreign keys within the
organization. trial_labels and trial_reviews carry the trial's failed-first
rank (trial_failed_rank, migration 0031) in their keys, as trial_stages does,
so the explorer's label and reviewState filters walk a label's trials, or the
excluded ones, in failed-first order from an index; a trigger rewrites the rank
when a trial's reward changes. The runtime role may insert and delete trial
labels, upsert reviews, write and edit notes, and only insert audit rows (the
trail is append-only to the app).

Revision ID: 0032
Revises: 0031
"""

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
COLORS = ("gray", "red", "orange", "yellow", "green", "teal", "blue", "purple", "pink")
STATES = ("unreviewed", "reviewed", "excluded")
TABLES = ("labels", "trial_labels", "trial_reviews", "trial_notes", "trial_audit")
GRANTS = {
    "labels": "SELECT, INSERT, UPDATE, DELETE",
    "trial_labels": "SELECT, INSERT, DELETE",
    "trial_reviews": "SELECT, INSERT, UPDATE",
    "trial_notes": "SELECT, INSERT, UPDATE, DELETE",
    "trial_audit": "SELECT, INSERT",
}
RANK_FUNCTION = """
CREATE FUNCTION triage_rank_of_updated_trial() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE trial_labels SET failed_rank = trial_failed_rank(NEW.reward)
        WHERE organization_id = NEW.organization_id AND evaluation_trial_id = NEW.id;
    UPDATE trial_reviews SET failed_rank = trial_failed_rank(NEW.reward)
        WHERE organization_id = NEW.organization_id AND evaluation_trial_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER triage_rank_on_update AFTER UPDATE OF reward ON evaluation_trials FOR EACH ROW
    WHEN (OLD.reward IS DISTINCT FROM NEW.reward) EXECUTE FUNCTION triage_rank_of_updated_trial();
"""


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _trial_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["organization_id", "evaluation_trial_id"],
        ["evaluation_trials.organization_id", "evaluation_trials.id"],
        name=f"fk_{table}_evaluation_trials",
        ondelete="CASCADE",
    )


def _user_fk(table: str, column: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], ["users.id"], name=f"fk_{table}_users_{column}")


def upgrade() -> None:
    """Create the five tables under RLS, their grants and the rank trigger."""
    now = sa.text("now()")
    op.create_table(
        "labels",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("color", sa.String(16), nullable=False, server_default="gray"),
        sa.Column("description", sa.String(500), nullable=False, server_default=""),
        sa.Column("created_by_user_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], name="fk_labels_organizations"),
        _user_fk("labels", "created_by_user_id"),
        sa.CheckConstraint(_in("color", COLORS), name="ck_labels_color"),
        sa.CheckConstraint("btrim(name) <> '' AND name !~ '[[:cntrl:],]'", name="ck_labels_name"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_labels"),
    )
    op.execute("CREATE UNIQUE INDEX uq_labels_org_name ON labels (organization_id, lower(name))")
    op.create_table(
        "trial_labels",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("label_id", sa.Uuid(), nullable=False),
        sa.Column("failed_rank", sa.SmallInteger(), nullable=False),
        sa.Column("evaluation_trial_id", sa.Uuid(), nullable=False),
        sa.Column("created_by_user_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        _trial_fk("trial_labels"),
        sa.ForeignKeyConstraint(
            ["organization_id", "label_id"],
            ["labels.organization_id", "labels.id"],
            name="fk_trial_labels_labels",
            ondelete="CASCADE",
        ),
        _user_fk("trial_labels", "created_by_user_id"),
        sa.PrimaryKeyConstraint(
            "organization_id", "label_id", "failed_rank", "evaluation_trial_id", name="pk_trial_labels"
        ),
    )
    op.create_index(
        "ix_trial_labels_trial", "trial_labels", ["organization_id", "evaluation_trial_id", "label_id"], unique=True
    )
    op.create_table(
        "trial_reviews",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("evaluation_trial_id", sa.Uuid(), nullable=False),
        sa.Column("review_state", sa.String(16), nullable=False, server_default="unreviewed"),
        sa.Column("reason", sa.String(1000), nullable=False, server_default=""),
        sa.Column("human_category", sa.String(64), nullable=True),
        sa.Column("failed_rank", sa.SmallInteger(), nullable=False),
        sa.Column("updated_by_user_id", sa.Uuid(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        _trial_fk("trial_reviews"),
        _user_fk("trial_reviews", "updated_by_user_id"),
        sa.CheckConstraint(_in("review_state", STATES), name="ck_trial_reviews_state"),
        sa.CheckConstraint("review_state <> 'excluded' OR btrim(reason) <> ''", name="ck_trial_reviews_reason"),
        sa.PrimaryKeyConstraint("organization_id", "evaluation_trial_id", name="pk_trial_reviews"),
    )
    op.create_index(
        "ix_trial_reviews_state",
        "trial_reviews",
        ["organization_id", "review_state", "failed_rank", "evaluation_trial_id"],
    )
    op.create_index(
        "ix_trial_reviews_human_category",
        "trial_reviews",
        ["organization_id", "human_category", "evaluation_trial_id"],
        postgresql_where=sa.text("human_category IS NOT NULL"),
    )
    op.create_table(
        "trial_notes",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("evaluation_trial_id", sa.Uuid(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("author_user_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        _trial_fk("trial_notes"),
        _user_fk("trial_notes", "author_user_id"),
        sa.CheckConstraint("char_length(body) BETWEEN 1 AND 10000", name="ck_trial_notes_body"),
        sa.CheckConstraint("step IS NULL OR step >= 1", name="ck_trial_notes_step"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_trial_notes"),
    )
    op.create_index("ix_trial_notes_trial", "trial_notes", ["organization_id", "evaluation_trial_id", "id"])
    op.create_table(
        "trial_audit",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("evaluation_trial_id", sa.Uuid(), nullable=False),
        sa.Column("actor_user_id", sa.Uuid(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("before", sa.dialects.postgresql.JSONB(), nullable=True),
        sa.Column("after", sa.dialects.postgresql.JSONB(), nullable=True),
        _trial_fk("trial_audit"),
        _user_fk("trial_audit", "actor_user_id"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_trial_audit"),
    )
    op.create_index("ix_trial_audit_trial", "trial_audit", ["organization_id", "evaluation_trial_id", "id"])
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
        )
        op.execute(f'GRANT {GRANTS[table]} ON {table} TO "{runtime}"')
    op.execute(RANK_FUNCTION)


def downgrade() -> None:
    """Drop the trigger, its function and the five tables."""
    op.execute("DROP TRIGGER IF EXISTS triage_rank_on_update ON evaluation_trials")
    op.execute("DROP FUNCTION IF EXISTS triage_rank_of_updated_trial()")
    for table in reversed(TABLES):
        op.drop_table(table)
