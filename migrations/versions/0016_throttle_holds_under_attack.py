"""A burst checks at most five passwords per account, the correct one included.

0015 let a correct password clear the failures recorded before it and did not
count itself, so a login by the real user in the middle of a burst of guesses
gave the burst more checks. Now the success counts as one checked attempt (the
next success forgets it), and a refusal (429) marks the account
(`login_throttle.refused_at`): a success within that window forgets no failure.
Sequential use is unchanged: a few typos, then a successful login, and the
count starts again from that one login.

Revision ID: 0016
Revises: 0015
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

WINDOW = "interval '15 minutes'"
MARK_REFUSED = f"""
            IF v_wait > 0 THEN
                INSERT INTO login_throttle AS t (key, window_started_at, failures, refused_at)
                VALUES (v_account, now(), 0, now())
                ON CONFLICT (key) DO UPDATE SET refused_at = now();
                RETURN QUERY SELECT NULL::uuid, v_wait;"""
RESET_UNLESS_REFUSED = f"""
            IF NOT EXISTS (SELECT 1 FROM login_throttle t
                           WHERE t.key = v_account AND t.refused_at > now() - {WINDOW}) THEN
                DELETE FROM login_throttle t WHERE t.key = v_account AND t.failures <= v_seen;
                UPDATE login_throttle t SET failures = t.failures - v_seen WHERE t.key = v_account;
            END IF;
            -- The success itself was a checked attempt: it counts until the next success forgets it.
            INSERT INTO login_throttle AS t (key, window_started_at, failures) VALUES (v_account, now(), 1)
            ON CONFLICT (key) DO UPDATE SET
                failures = CASE WHEN t.window_started_at < now() - {WINDOW} THEN 1 ELSE t.failures + 1 END,
                window_started_at = CASE WHEN t.window_started_at < now() - {WINDOW} THEN now()
                                         ELSE t.window_started_at END;"""


def _m0015():
    """The functions of 0015, which this revision amends."""
    spec = importlib.util.spec_from_file_location("m0015", Path(__file__).with_name("0015_atomic_login_throttle.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _amended(functions: dict[str, str]) -> dict[str, str]:
    begin, login = "auth_login_begin(text, text)", "auth_login(uuid, text, text, text, bytea, interval)"
    refuse_from = """
            IF v_wait > 0 THEN
                RETURN QUERY SELECT NULL::uuid, v_wait;"""
    reset_from = """
            DELETE FROM login_throttle t WHERE t.key = v_account AND t.failures <= v_seen;
            UPDATE login_throttle t SET failures = t.failures - v_seen WHERE t.key = v_account;"""
    assert refuse_from in functions[begin] and reset_from in functions[login]
    return {
        begin: functions[begin].replace(refuse_from, MARK_REFUSED).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"),
        login: functions[login].replace(reset_from, RESET_UNLESS_REFUSED).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"),
    }


def upgrade() -> None:
    """Add login_throttle.refused_at; refusals mark it, successes respect it."""
    op.execute("ALTER TABLE login_throttle ADD COLUMN refused_at timestamp with time zone")
    for definition in _amended(_m0015().FUNCTIONS).values():
        op.execute(definition)


def downgrade() -> None:
    """Back to 0015's functions; drop the column."""
    for definition in _m0015().FUNCTIONS.values():
        op.execute(definition.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
    op.execute("ALTER TABLE login_throttle DROP COLUMN refused_at")
