"""Invitations (single-use links stored as a sha256), the organization a user used last, members' sessions ended.

An owner invites an email with a role; the invitee opens the link, and either
sets their own password (a new account) or logs in and accepts. Nobody sets
another person's password. The invitee is not a member yet, so the link is
looked up and accepted only through SECURITY DEFINER functions owned by the
owner role; the runtime role never reads a token hash. memberships.last_used_at
records the organization a user worked in last, so a login lands there.
Removing a member ends their login sessions through auth_end_removed_sessions().

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
CURRENT_USER_ID = "(SELECT NULLIF(current_setting('app.current_user', true), '')::uuid)"
PENDING = "i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now()"

FUNCTIONS = {
    "invitation_by_token(bytea)": f"""
        CREATE FUNCTION invitation_by_token(p_sha256 bytea)
        RETURNS TABLE (organization_id uuid, id uuid, organization_name text, email text, role text,
                       expires_at timestamptz)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT i.organization_id, i.id, o.name, i.email, i.role, i.expires_at
            FROM invitations i JOIN organizations o ON o.id = i.organization_id
            WHERE i.token_sha256 = p_sha256 AND {PENDING}
        $$
    """,
    # Shared by both ways of accepting: consume the invitation once and add the membership (already a member: kept).
    "invitation_join(uuid, uuid, uuid)": """
        CREATE FUNCTION invitation_join(p_org uuid, p_invitation uuid, p_user uuid) RETURNS void
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            v_previous text := current_setting('app.current_org', true);
        BEGIN
            UPDATE invitations SET accepted_at = now(), accepted_by_user_id = p_user
            WHERE organization_id = p_org AND id = p_invitation;
            PERFORM set_config('app.current_org', p_org::text, true);  -- memberships' tenant policy checks it
            INSERT INTO memberships (organization_id, id, user_id, role, last_used_at)
            SELECT i.organization_id, gen_random_uuid(), p_user, i.role, now()
            FROM invitations i WHERE i.organization_id = p_org AND i.id = p_invitation
            ON CONFLICT (organization_id, user_id) DO UPDATE SET last_used_at = now();
            PERFORM set_config('app.current_org', COALESCE(v_previous, ''), true);
        END
        $$
    """,
    "accept_invitation(bytea, bytea)": f"""
        CREATE FUNCTION accept_invitation(p_sha256 bytea, p_session_sha256 bytea) RETURNS uuid
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            v_org uuid;
            v_invitation uuid;
            v_user uuid;
        BEGIN
            SELECT i.organization_id, i.id, u.id INTO v_org, v_invitation, v_user
            FROM invitations i
            JOIN users u ON u.email = i.email
            JOIN auth_sessions s ON s.user_id = u.id AND s.token_sha256 = p_session_sha256 AND s.expires_at > now()
            WHERE i.token_sha256 = p_sha256 AND {PENDING}
            FOR UPDATE OF i;
            IF v_org IS NULL THEN
                RETURN NULL;
            END IF;
            PERFORM invitation_join(v_org, v_invitation, v_user);
            RETURN v_org;
        END
        $$
    """,
    "accept_invitation_with_account(bytea, uuid, text, text)": f"""
        CREATE FUNCTION accept_invitation_with_account(p_sha256 bytea, p_id uuid, p_password_hash text, p_name text)
        RETURNS text
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            v_org uuid;
            v_invitation uuid;
            v_email text;
        BEGIN
            SELECT i.organization_id, i.id, i.email INTO v_org, v_invitation, v_email
            FROM invitations i WHERE i.token_sha256 = p_sha256 AND {PENDING}
            FOR UPDATE OF i;
            IF v_org IS NULL THEN
                RETURN NULL;
            END IF;
            INSERT INTO users (id, email, password_hash, name)
            VALUES (p_id, v_email, p_password_hash, COALESCE(NULLIF(btrim(p_name), ''), v_email))
            ON CONFLICT (email) DO NOTHING;
            IF NOT FOUND THEN
                RETURN '';  -- the email has an account: its owner logs in and accepts
            END IF;
            PERFORM invitation_join(v_org, v_invitation, p_id);
            RETURN v_email;
        END
        $$
    """,
    "auth_end_removed_sessions(uuid)": f"""
        CREATE FUNCTION auth_end_removed_sessions(p_user uuid) RETURNS void
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            DELETE FROM auth_sessions s
            WHERE s.user_id = p_user
              AND NOT EXISTS (SELECT 1 FROM memberships m
                              WHERE m.organization_id = {CURRENT_ORG} AND m.user_id = p_user)
              AND EXISTS (SELECT 1 FROM memberships m
                          WHERE m.organization_id = {CURRENT_ORG} AND m.user_id = {CURRENT_USER_ID}
                            AND m.role = 'owner')
        $$
    """,
}

MEMBERSHIPS_WITH_LAST_USE = """
    CREATE FUNCTION auth_memberships(p_user_id uuid)
    RETURNS TABLE (organization_id uuid, organization_name text, organization_slug text, role text,
                   last_used_at timestamptz)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        SELECT m.organization_id, o.name, o.slug, m.role, m.last_used_at
        FROM memberships m JOIN organizations o ON o.id = m.organization_id
        WHERE m.user_id = p_user_id
        ORDER BY o.name
    $$
"""

MEMBERSHIPS_0001 = """
    CREATE FUNCTION auth_memberships(p_user_id uuid)
    RETURNS TABLE (organization_id uuid, organization_name text, organization_slug text, role text)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        SELECT m.organization_id, o.name, o.slug, m.role
        FROM memberships m JOIN organizations o ON o.id = m.organization_id
        WHERE m.user_id = p_user_id
        ORDER BY o.name
    $$
"""


def _replace_auth_memberships(definition: str, runtime: str) -> None:
    op.execute("DROP FUNCTION auth_memberships(uuid)")
    op.execute(definition)
    op.execute("REVOKE ALL ON FUNCTION auth_memberships(uuid) FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION auth_memberships(uuid) TO {runtime}")


def upgrade() -> None:
    """Create invitations under forced RLS, memberships.last_used_at and the definer functions."""
    runtime = f'"{op.get_context().config.attributes.get("runtime_role", "agentforge_app")}"'
    op.create_table(
        "invitations",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("token_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("invited_by_user_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("accepted_by_user_id", sa.Uuid(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("email = lower(email)", name=op.f("ck_invitations_email_lower_case")),
        sa.CheckConstraint("role IN ('owner', 'member', 'viewer')", name=op.f("ck_invitations_role_known")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], name=op.f("fk_invitations_organizations")),
        sa.ForeignKeyConstraint(["invited_by_user_id"], ["users.id"], name="fk_invitations_invited_by_users"),
        sa.ForeignKeyConstraint(["accepted_by_user_id"], ["users.id"], name="fk_invitations_accepted_by_users"),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_invitations")),
    )
    op.create_index("ix_invitations_org_email", "invitations", ["organization_id", "email"])
    # Looked up by hash before the invitee belongs to the organization (through invitation_by_token()).
    op.create_index("ix_invitations_sha256", "invitations", ["token_sha256"], unique=True)
    op.execute("ALTER TABLE invitations ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE invitations FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON invitations USING (organization_id = {CURRENT_ORG}) "
        f"WITH CHECK (organization_id = {CURRENT_ORG})"
    )
    op.execute("CREATE POLICY owner_invitation_lookup ON invitations FOR ALL TO CURRENT_USER USING (true)")
    op.execute(f"GRANT INSERT, UPDATE (revoked_at) ON invitations TO {runtime}")
    op.execute(
        "GRANT SELECT (organization_id, id, email, role, invited_by_user_id, created_at, expires_at, accepted_at, "
        f"accepted_by_user_id, revoked_at) ON invitations TO {runtime}"
    )
    op.add_column("memberships", sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
    _replace_auth_memberships(MEMBERSHIPS_WITH_LAST_USE, runtime)
    for signature, definition in FUNCTIONS.items():
        op.execute(definition)
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        if signature != "invitation_join(uuid, uuid, uuid)":  # called only from the two accepting functions
            op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO {runtime}")


def downgrade() -> None:
    """Back to 0013: drop the functions, invitations and memberships.last_used_at."""
    runtime = f'"{op.get_context().config.attributes.get("runtime_role", "agentforge_app")}"'
    for signature in reversed(FUNCTIONS):
        op.execute(f"DROP FUNCTION {signature}")
    _replace_auth_memberships(MEMBERSHIPS_0001, runtime)
    op.drop_column("memberships", "last_used_at")
    op.drop_table("invitations")
