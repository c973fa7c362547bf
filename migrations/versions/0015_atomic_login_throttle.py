"""Atomic login throttle: an attempt reserves a slot under per-account and per-address locks before it is checked.

Before, the throttle was read, the password checked and the failure counted
in separate steps, so a burst of concurrent wrong passwords all passed the
read before any failure was written (22 of 24 were checked) and a correct
password in the same burst erased the account's count. Now
auth_login_begin() takes transaction-scoped advisory locks on the account
and on the address, counts recent failures plus attempts still in flight,
and either answers how long to wait or records a reserved attempt (committed
at once, so every concurrent request sees it). auth_login() then consumes
that reservation: it checks the password only with one, counts a failure
against both keys, and on success forgets only the failures that were
already there when the attempt was reserved (failures made concurrently stay
counted). A reservation not consumed within a minute (a process died) stops
counting.

Revision ID: 0015
Revises: 0014
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

THROTTLE_WINDOW = "interval '15 minutes'"
IN_FLIGHT = "interval '1 minute'"  # a reserved attempt older than this no longer counts (its process died)
ACCOUNT_LIMIT, ADDRESS_LIMIT = 5, 30  # attempts per window: failures plus attempts in flight
ACCOUNT_LOCK, ADDRESS_LOCK = 15001, 15002  # advisory lock classes: account keys, then address keys (fixed order)
ACCOUNT_KEY = "'account:' || left(lower(btrim(p_email)), 320)"
ADDRESS_KEY = "'address:' || COALESCE(p_address, 'unknown')"

FUNCTIONS = {
    "auth_login_begin(text, text)": f"""
        CREATE FUNCTION auth_login_begin(p_email text, p_address text)
        RETURNS TABLE (attempt_id uuid, retry_after integer)
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            v_account text := {ACCOUNT_KEY};
            v_address text := {ADDRESS_KEY};
            v_account_failures integer := 0;
            v_account_window timestamptz;
            v_address_failures integer := 0;
            v_address_window timestamptz;
            v_wait integer := 0;
            v_id uuid;
        BEGIN
            PERFORM pg_advisory_xact_lock({ACCOUNT_LOCK}, hashtext(v_account));
            PERFORM pg_advisory_xact_lock({ADDRESS_LOCK}, hashtext(v_address));
            DELETE FROM login_attempts a
            WHERE (a.account_key = v_account OR a.address_key = v_address) AND a.reserved_at < now() - {IN_FLIGHT};
            SELECT t.failures, t.window_started_at INTO v_account_failures, v_account_window
            FROM login_throttle t WHERE t.key = v_account AND t.window_started_at + {THROTTLE_WINDOW} > now();
            SELECT t.failures, t.window_started_at INTO v_address_failures, v_address_window
            FROM login_throttle t WHERE t.key = v_address AND t.window_started_at + {THROTTLE_WINDOW} > now();
            IF COALESCE(v_account_failures, 0)
               + (SELECT count(*) FROM login_attempts a WHERE a.account_key = v_account) >= {ACCOUNT_LIMIT} THEN
                v_wait := ceil(extract(epoch FROM COALESCE(v_account_window, now()) + {THROTTLE_WINDOW} - now()))
                          ::integer + 1;
            END IF;
            IF COALESCE(v_address_failures, 0)
               + (SELECT count(*) FROM login_attempts a WHERE a.address_key = v_address) >= {ADDRESS_LIMIT} THEN
                v_wait := greatest(v_wait, ceil(extract(epoch FROM COALESCE(v_address_window, now())
                                                + {THROTTLE_WINDOW} - now()))::integer + 1);
            END IF;
            IF v_wait > 0 THEN
                RETURN QUERY SELECT NULL::uuid, v_wait;
                RETURN;
            END IF;
            v_id := gen_random_uuid();
            INSERT INTO login_attempts (id, account_key, address_key, account_failures_seen, reserved_at)
            VALUES (v_id, v_account, v_address, COALESCE(v_account_failures, 0), now());
            RETURN QUERY SELECT v_id, 0;
        END
        $$
    """,
    "auth_login(uuid, text, text, text, bytea, interval)": f"""
        CREATE FUNCTION auth_login(p_attempt uuid, p_email text, p_derived_key text, p_address text,
                                   p_session_sha256 bytea, p_lifetime interval)
        RETURNS uuid
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            v_account text := {ACCOUNT_KEY};
            v_address text := {ADDRESS_KEY};
            v_seen integer;
            v_user uuid;
        BEGIN
            DELETE FROM login_attempts a
            WHERE a.id = p_attempt AND a.account_key = v_account AND a.address_key = v_address
              AND a.reserved_at >= now() - {IN_FLIGHT}
            RETURNING a.account_failures_seen INTO v_seen;
            IF NOT FOUND THEN
                RETURN NULL;  -- no reserved attempt: nothing is checked
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
            -- Forget the failures that came before this attempt; those made while it was in flight stay counted.
            DELETE FROM login_throttle t WHERE t.key = v_account AND t.failures <= v_seen;
            UPDATE login_throttle t SET failures = t.failures - v_seen WHERE t.key = v_account;
            INSERT INTO auth_sessions (token_sha256, user_id, expires_at)
            VALUES (p_session_sha256, v_user, now() + p_lifetime);
            RETURN v_user;
        END
        $$
    """,
}
REPLACED = ("auth_login(text, text, text, bytea, interval)", "auth_login_wait(text, text)")


def _runtime() -> str:
    return f'"{op.get_context().config.attributes.get("runtime_role", "agentforge_app")}"'


def upgrade() -> None:
    """Create login_attempts (owner-only) and replace auth_login/auth_login_wait with the reserving pair."""
    runtime = _runtime()
    op.execute(
        f"""
        CREATE TABLE login_attempts (
            id uuid NOT NULL CONSTRAINT pk_login_attempts PRIMARY KEY,
            account_key varchar(400) NOT NULL,
            address_key varchar(400) NOT NULL,
            account_failures_seen integer NOT NULL,
            reserved_at timestamp with time zone NOT NULL
        )
        """
    )
    op.execute("CREATE INDEX ix_login_attempts_account_key ON login_attempts (account_key)")
    op.execute("CREATE INDEX ix_login_attempts_address_key ON login_attempts (address_key)")
    op.execute("ALTER TABLE login_attempts ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE login_attempts FORCE ROW LEVEL SECURITY")
    op.execute("CREATE POLICY owner_account_admin ON login_attempts FOR ALL TO CURRENT_USER USING (true)")
    op.execute(f"REVOKE ALL ON login_attempts FROM {runtime}")
    for signature in REPLACED:
        op.execute(f"DROP FUNCTION {signature}")
    for signature, definition in FUNCTIONS.items():
        op.execute(definition)
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO {runtime}")


def downgrade() -> None:
    """Back to 0013: the check-then-count functions of 0010, no reservations."""
    runtime = _runtime()
    for signature in FUNCTIONS:
        op.execute(f"DROP FUNCTION {signature}")
    op.execute("DROP TABLE login_attempts")
    spec = importlib.util.spec_from_file_location("m0010", Path(__file__).with_name("0010_users_rls_and_auth_functions.py"))
    m0010 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m0010)
    for signature in reversed(REPLACED):
        op.execute(m0010.FUNCTIONS[signature])
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO {runtime}")
