"""API tokens (hashed, per user and organization) and ingest: trials' externalId and original ATIF artifact.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"


def upgrade() -> None:
    """api_tokens under RLS with a SECURITY DEFINER lookup; external_id and atif_artifact_id on trials."""
    op.create_table(
        "api_tokens",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("token_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], name=op.f("fk_api_tokens_organizations")),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_api_tokens_users")),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_api_tokens")),
    )
    op.create_index("ix_api_tokens_org_user", "api_tokens", ["organization_id", "user_id"])
    op.create_index("ix_api_tokens_sha256", "api_tokens", ["token_sha256"], unique=True)
    op.execute("ALTER TABLE api_tokens ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE api_tokens FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON api_tokens USING (organization_id = {CURRENT_ORG}) "
        f"WITH CHECK (organization_id = {CURRENT_ORG})"
    )
    # Bearer authentication happens before any organization is known: only this function looks tokens up.
    op.execute("CREATE POLICY owner_token_lookup ON api_tokens FOR ALL TO CURRENT_USER USING (true)")
    op.execute(
        """
        CREATE FUNCTION auth_token(p_sha256 bytea)
        RETURNS TABLE (user_id uuid, organization_id uuid, token_id uuid)
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            UPDATE api_tokens t SET last_used_at = now()
            WHERE t.token_sha256 = p_sha256 AND t.revoked_at IS NULL
              AND (t.expires_at IS NULL OR t.expires_at > now())
              AND EXISTS (SELECT 1 FROM memberships m
                          WHERE m.organization_id = t.organization_id AND m.user_id = t.user_id)
            RETURNING t.user_id, t.organization_id, t.id
        $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION auth_token(bytea) FROM PUBLIC")
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(f'GRANT EXECUTE ON FUNCTION auth_token(bytea) TO "{runtime}"')
    op.execute(f'GRANT SELECT, INSERT, UPDATE ON api_tokens TO "{runtime}"')

    op.add_column("evaluation_trials", sa.Column("external_id", sa.String(length=200), nullable=True))
    op.add_column("evaluation_trials", sa.Column("atif_artifact_id", sa.Uuid(), nullable=True))
    op.create_index(
        "uq_evaluation_trials_external_id", "evaluation_trials", ["organization_id", "external_id"], unique=True,
        postgresql_where=sa.text("external_id IS NOT NULL"),
    )
    op.create_foreign_key(
        "fk_evaluation_trials_atif_artifacts", "evaluation_trials", "artifacts",
        ["organization_id", "atif_artifact_id"], ["organization_id", "id"],
    )


def downgrade() -> None:
    """Drop tokens and the ingest columns."""
    op.drop_constraint("fk_evaluation_trials_atif_artifacts", "evaluation_trials")
    op.drop_index("uq_evaluation_trials_external_id", table_name="evaluation_trials")
    op.drop_column("evaluation_trials", "atif_artifact_id")
    op.drop_column("evaluation_trials", "external_id")
    op.execute("DROP FUNCTION auth_token(bytea)")
    op.drop_table("api_tokens")
