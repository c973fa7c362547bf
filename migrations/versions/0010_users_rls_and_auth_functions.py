"""users under row-level security; logins, sessions and throttling only through SECURITY DEFINER functions.

The runtime role may set app.current_org and app.current_user to anything, so
nothing secret may depend on them: it reads users' id, email and name (only
of the current organization's members and of the current user), never a
password hash, and it cannot read or write auth_sessions or login_throttle at
all. Passwords are checked inside auth_login(), which receives the scrypt (or
pbkdf2) key the app derived from the typed password and the salt, compares it
with the stored one and answers with the user id alone.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
CURRENT_USER_ID = "(SELECT NULLIF(current_setting('app.current_user', true), '')::uuid)"
THROTTLE_WINDOW = "interval '15 minutes'"
ACCOUNT_LIMIT, ADDRESS_LIMIT = 5, 30  # failed logins per window before logins are refused

FUNCTIONS = {
    "auth_password_salt(text)": """
        CREATE FUNCTION auth_password_salt(p_email text) RETURNS text
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT split_part(u.password_hash, '$', 1) || '$' || split_part(u.password_hash, '$', 2)
            FROM users u WHERE u.email = lower(btrim(p_email))
        $$
    """,
    "auth_login_wait(text, text)": f"""
        CREATE FUNCTION auth_login_wait(p_email text, p_address text) RETURNS integer
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT COALESCE(max(ceil(extract(epoch FROM t.window_started_at + {THROTTLE_WINDOW} - now()))::integer
                                + 1), 0)
            FROM login_throttle t
            WHERE t.window_started_at + {THROTTLE_WINDOW} > now()
              AND ((t.key = 'account:' || left(lower(btrim(p_email)), 320) AND t.failures >= {ACCOUNT_LIMIT})
                OR (t.key = 'address:' || COALESCE(p_address, 'unknown') AND t.failures >= {ADDRESS_LIMIT}))
        $$
    """,
    "auth_login(text, text, text, bytea, interval)": f"""
        CREATE FUNCTION auth_login(p_email text, p_derived_key text, p_address text,
                                   p_session_sha256 bytea, p_lifetime interval)
        RETURNS uuid
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            v_account text := 'account:' || left(lower(btrim(p_email)), 320);
            v_address text := 'address:' || COALESCE(p_address, 'unknown');
            v_user uuid;
        BEGIN
            IF auth_login_wait(p_email, p_address) > 0 THEN
                RETURN NULL;
            END IF;
            SELECT u.id INTO v_user FROM users u
            WHERE u.email = lower(btrim(p_email))
              AND sha256(convert_to(split_part(u.password_hash, '$', 3), 'UTF8'))
                  = sha256(convert_to(COALESCE(p_derived_key, ''), 'UTF8'));
            IF v_user IS NULL THEN
                INSERT INTO login_throttle AS t (key, window_started_at, failures)
                SELECT k, now(), 1 FROM unnest(ARRAY[v_account, v_address]) AS k
                ON CONFLICT (key) DO UPDATE SET
                    failures = CASE WHEN t.window_started_at < now() - {THROTTLE_WINDOW} THEN 1
                                    ELSE t.failures + 1 END,
                    window_started_at = CASE WHEN t.window_started_at < now() - {THROTTLE_WINDOW} THEN now()
                                             ELSE t.window_started_at END;
                RETURN NULL;
            END IF;
            DELETE FROM login_throttle WHERE key = v_account;
            INSERT INTO auth_sessions (token_sha256, user_id, expires_at)
            VALUES (p_session_sha256, v_user, now() + p_lifetime);
            RETURN v_user;
        END
        $$
    """,
    "auth_session_user(bytea)": """
        CREATE FUNCTION auth_session_user(p_session_sha256 bytea)
        RETURNS TABLE (id uuid, email text, name text)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT u.id, u.email, u.name
            FROM auth_sessions s JOIN users u ON u.id = s.user_id
            WHERE s.token_sha256 = p_session_sha256 AND s.expires_at > now()
        $$
    """,
    "auth_close_session(bytea)": """
        CREATE FUNCTION auth_close_session(p_session_sha256 bytea) RETURNS void
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            DELETE FROM auth_sessions WHERE token_sha256 = p_session_sha256
        $$
    """,
    "auth_token_user(bytea)": """
        CREATE FUNCTION auth_token_user(p_sha256 bytea)
        RETURNS TABLE (id uuid, email text, name text, organization_id uuid)
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT u.id, u.email, u.name, t.organization_id
            FROM auth_token(p_sha256) t JOIN users u ON u.id = t.user_id
        $$
    """,
    "account_id_by_email(text)": """
        CREATE FUNCTION account_id_by_email(p_email text) RETURNS uuid
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT u.id FROM users u WHERE u.email = lower(btrim(p_email))
        $$
    """,
    "create_account(uuid, text, text, text)": """
        CREATE FUNCTION create_account(p_id uuid, p_email text, p_password_hash text, p_name text) RETURNS boolean
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            INSERT INTO users (id, email, password_hash, name) VALUES (p_id, p_email, p_password_hash, p_name)
            ON CONFLICT (email) DO NOTHING
            RETURNING true
        $$
    """,
}


def upgrade() -> None:
    """Secure users, auth_sessions and login_throttle; add the definer functions the runtime role goes through."""
    runtime = f'"{op.get_context().config.attributes.get("runtime_role", "agentforge_app")}"'
    op.execute("ALTER TABLE users ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE users FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY member_visibility ON users FOR SELECT "
        f"USING (id = {CURRENT_USER_ID} OR id IN "
        f"(SELECT m.user_id FROM memberships m WHERE m.organization_id = {CURRENT_ORG}))"
    )
    for table in ("users", "auth_sessions", "login_throttle"):
        if table != "users":
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        # The owner role (definer functions, the CLI) sees every row; the runtime role has no policy here.
        op.execute(f"CREATE POLICY owner_account_admin ON {table} FOR ALL TO CURRENT_USER USING (true)")
        op.execute(f"REVOKE ALL ON {table} FROM {runtime}")
    op.execute(f"GRANT SELECT (id, email, name, created_at) ON users TO {runtime}")
    # Token hashes stay in the database: the runtime role lists tokens without them and looks them up by function.
    op.execute(f"REVOKE SELECT ON api_tokens FROM {runtime}")
    op.execute(
        "GRANT SELECT (organization_id, id, user_id, name, prefix, created_at, last_used_at, expires_at, revoked_at) "
        f"ON api_tokens TO {runtime}"
    )
    for signature, definition in FUNCTIONS.items():
        op.execute(definition)
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO {runtime}")


def downgrade() -> None:
    """Back to 0009: drop the functions and policies, give the runtime role its table grants back."""
    runtime = f'"{op.get_context().config.attributes.get("runtime_role", "agentforge_app")}"'
    for signature in reversed(FUNCTIONS):
        op.execute(f"DROP FUNCTION {signature}")
    op.execute(f"GRANT SELECT ON api_tokens TO {runtime}")
    for table in ("users", "auth_sessions", "login_throttle"):
        op.execute(f"DROP POLICY owner_account_admin ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("DROP POLICY member_visibility ON users")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON users TO {runtime}")
    op.execute(f"GRANT SELECT, INSERT, DELETE ON auth_sessions TO {runtime}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON login_throttle TO {runtime}")
