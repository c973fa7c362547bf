"""Every failure stays counted: a successful login no longer erases the account's failures in the window, and
checking a password takes the same per-account and per-address locks as reserving the attempt.

0015 let a correct password clear the failures recorded before it. In a burst of
guesses that freed slots as soon as the real user logged in, so more than five
wrong passwords could be checked for one account within the window. Now the
window's failures stand until the window ends (15 minutes from the first): at
most five wrong passwords per account, and thirty per address, are ever checked
per window, however the attempts interleave.

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

LOGIN = "auth_login(uuid, text, text, text, bytea, interval)"
FORGET = """
            -- Forget the failures that came before this attempt; those made while it was in flight stay counted.
            DELETE FROM login_throttle t WHERE t.key = v_account AND t.failures <= v_seen;
            UPDATE login_throttle t SET failures = t.failures - v_seen WHERE t.key = v_account;"""
KEEP = """
            -- The window's failures stay counted (a success erases none: a burst cannot win back checks)."""


def _m0015():
    """Migration 0015, whose auth_login this revision amends."""
    spec = importlib.util.spec_from_file_location("m0015", Path(__file__).with_name("0015_atomic_login_throttle.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _login_of_0015() -> str:
    """auth_login as 0015 created it."""
    return _m0015().FUNCTIONS[LOGIN].replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")


def upgrade() -> None:
    """A success keeps the failures; completing an attempt takes the same locks as reserving one.

    Without the locks, a reservation could read the failures before a concurrent check recorded its failure and
    count the attempts in flight after that check had left them: one attempt too few, so one check too many.
    """
    m0015, login = _m0015(), _login_of_0015()
    begin = """
        BEGIN
            DELETE FROM login_attempts a"""
    locked = f"""
        BEGIN
            PERFORM pg_advisory_xact_lock({m0015.ACCOUNT_LOCK}, hashtext(v_account));
            PERFORM pg_advisory_xact_lock({m0015.ADDRESS_LOCK}, hashtext(v_address));
            DELETE FROM login_attempts a"""
    assert FORGET in login and begin in login
    op.execute(login.replace(FORGET, KEEP).replace(begin, locked))


def downgrade() -> None:
    """Back to 0015: a success forgets the failures made before it."""
    op.execute(_login_of_0015())
