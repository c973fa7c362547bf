"""Unproven accounts: an account made through an invitation link is not proof of its email until another organization's
link reaches it.

An owner sees every invitation link they make, so an owner could invite
victim@x, open the link and set the password, and hold victim@x's account from
then on: the real person, invited by another organization, was told to log in
to an account they could not open, and the operator's add-member attached the
squatter's account to other organizations.

users.email_proven is false for an account made through a link
(accept_invitation_with_account): all it shows is that someone held that link,
perhaps the inviting owner. Such an account
* is proven once a link of a new organization for it (one it does not belong
  to and never used a link of: its owners did not make the account, even if
  they removed it since) is used for it: accepted while logged in to it (the
  password holder also holds the other organization's link), or
* is taken over through such a link: whoever holds it sets a new password; every
  login session of the account ends, every API token of it is revoked, and it
  leaves every organization it had joined (those links' holders were not
  proven either, so nothing it reached before goes to the new holder), then
  joins the inviting organization, proven from then on;
* is refused by add-member (writes.accounts.add_membership checks the column).
A link of an organization the account belongs to or used a link of before
proves and takes over nothing (its owners may have made the account). Accounts
made by the operator (create-user) and accounts made before this migration are
proven, except those made through a link and never used with another
organization's link since, which start unproven.

invitation_by_token() also says what the link can do for the email's account:
`new` (none yet), `existing` (log in and accept) or `unproven` (log in and
accept, or take it over with a new password), so the page can say so first.

Revision ID: 0026
Revises: 0025
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

PENDING = "i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now()"


def new_organization_for(user: str, org: str) -> str:
    """SQL: `org` is an organization `user` neither belongs to nor ever used a link of (its owners did not make the
    account, even if they removed it since)."""
    return f"""
        NOT EXISTS (SELECT 1 FROM memberships m WHERE m.organization_id = {org} AND m.user_id = {user})
        AND NOT EXISTS (SELECT 1 FROM invitations used
                        WHERE used.organization_id = {org} AND used.accepted_by_user_id = {user})
    """


# What the link can do for the email's account: none yet, log in only, or log in or take it over.
ACCOUNT_STATE = f"""
    CASE WHEN u.id IS NULL THEN 'new'
         WHEN NOT u.email_proven AND {new_organization_for("u.id", "i.organization_id")} THEN 'unproven'
         ELSE 'existing' END
"""

FUNCTIONS = {
    "invitation_by_token(bytea)": f"""
        CREATE FUNCTION invitation_by_token(p_sha256 bytea)
        RETURNS TABLE (organization_id uuid, id uuid, organization_name text, email text, role text,
                       expires_at timestamptz, account text)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT i.organization_id, i.id, o.name, i.email, i.role, i.expires_at, {ACCOUNT_STATE}
            FROM invitations i JOIN organizations o ON o.id = i.organization_id
            LEFT JOIN users u ON u.email = i.email
            WHERE i.token_sha256 = p_sha256 AND {PENDING}
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
            -- The password's holder also holds a link of an organization the account is not in: the email is theirs.
            UPDATE users u SET email_proven = true
            WHERE u.id = v_user AND NOT u.email_proven AND {new_organization_for("v_user", "v_org")};
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
            v_user uuid;
            v_proven boolean;
            v_joined uuid;
            v_previous text := current_setting('app.current_org', true);
        BEGIN
            SELECT i.organization_id, i.id, i.email INTO v_org, v_invitation, v_email
            FROM invitations i WHERE i.token_sha256 = p_sha256 AND {PENDING}
            FOR UPDATE OF i;
            IF v_org IS NULL THEN
                RETURN NULL;
            END IF;
            -- The account as it is once locked: two links used at once take it over once.
            SELECT u.id, u.email_proven INTO v_user, v_proven FROM users u WHERE u.email = v_email FOR UPDATE;
            IF v_user IS NULL THEN
                INSERT INTO users (id, email, password_hash, name, email_proven)
                VALUES (p_id, v_email, p_password_hash, COALESCE(NULLIF(btrim(p_name), ''), v_email), false)
                ON CONFLICT (email) DO NOTHING;
                IF NOT FOUND THEN
                    RETURN '';  -- made a moment ago through another link: it is unproven, that link's holder has it
                END IF;
                PERFORM invitation_join(v_org, v_invitation, p_id);
                RETURN v_email;
            END IF;
            IF v_proven OR NOT ({new_organization_for("v_user", "v_org")}) THEN
                RETURN '';  -- the email's account is proven, or this organization's links reached it: log in and accept
            END IF;
            -- Unproven, and this link is another organization's: its holder takes the account over.
            UPDATE users u SET password_hash = p_password_hash, email_proven = true,
                               name = COALESCE(NULLIF(btrim(p_name), ''), u.name)
            WHERE u.id = v_user;
            DELETE FROM auth_sessions s WHERE s.user_id = v_user;
            UPDATE api_tokens t SET revoked_at = now() WHERE t.user_id = v_user AND t.revoked_at IS NULL;
            FOR v_joined IN SELECT m.organization_id FROM memberships m WHERE m.user_id = v_user LOOP
                PERFORM set_config('app.current_org', v_joined::text, true);  -- memberships' tenant policy checks it
                DELETE FROM memberships m WHERE m.organization_id = v_joined AND m.user_id = v_user;
            END LOOP;
            PERFORM set_config('app.current_org', COALESCE(v_previous, ''), true);
            PERFORM invitation_join(v_org, v_invitation, v_user);
            RETURN v_email;
        END
        $$
    """,
}

# 0014's definitions, restored by downgrade().
FUNCTIONS_0014 = {
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
}

# Made through a link (the account and the invitation's acceptance share a transaction, so a timestamp) and never
# used with another organization's link since.
BACKFILL = """
    UPDATE users u SET email_proven = false
    FROM invitations made
    WHERE made.accepted_by_user_id = u.id AND made.accepted_at = u.created_at
      AND NOT EXISTS (SELECT 1 FROM invitations later
                      WHERE later.accepted_by_user_id = u.id AND later.organization_id <> made.organization_id)
"""


def _replace(functions: dict[str, str]) -> None:
    runtime = f'"{op.get_context().config.attributes.get("runtime_role", "agentforge_app")}"'
    for signature, definition in functions.items():
        op.execute(f"DROP FUNCTION {signature}")
        op.execute(definition)
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO {runtime}")


def upgrade() -> None:
    """Add users.email_proven (false for accounts made through a link and not proven since) and the functions."""
    op.add_column("users", sa.Column("email_proven", sa.Boolean(), server_default=sa.true(), nullable=False))
    op.execute(BACKFILL)
    _replace(FUNCTIONS)


def downgrade() -> None:
    """Back to 0014's functions; the column goes."""
    _replace(FUNCTIONS_0014)
    op.drop_column("users", "email_proven")
