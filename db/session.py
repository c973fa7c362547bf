"""Engines and sessions: the pooled runtime engine, org-scoped sessions, the owner's sessions, request slots.

Every transaction a `Database` session opens first runs
`set_config('app.current_org', <org or ''>, true)`, so PostgreSQL's row-level
security sees exactly one organization (or none) and the setting dies with the
transaction, never leaking to the next user of a pooled connection.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, CursorResult, Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from db.urls import DatabaseUrls, sqlalchemy_url
from domain.json_depth import loads_stored

if TYPE_CHECKING:
    from domain.secret_env import SecretsKey


def _scope_transaction_to_org(session: Session, _transaction, connection) -> None:
    """Set `app.current_org` and `app.current_user` for the transaction just begun, from the session's info.

    Unset means no organization's rows and no user's own row.
    """
    org_id, user_id = session.info.get("org_id"), session.info.get("user_id")
    connection.execute(
        text("SELECT set_config('app.current_org', :org, true), set_config('app.current_user', :user, true)"),
        {"org": str(org_id) if org_id else "", "user": str(user_id) if user_id else ""},
    )


def slot_key(scope: str, owner: uuid.UUID, index: int) -> int:
    """The bigint advisory-lock key of `owner`'s slot `index` in `scope` (64 bits of a sha256: no two users share)."""
    digest = hashlib.sha256(f"agentforge:{scope}:{owner}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _unlock_advisory_locks(dbapi_connection: Any, _record: Any, _state: Any) -> None:
    """Before a slot connection goes back to the pool: release every advisory lock it holds (whatever path got it
    there). Should this fail, the pool closes the connection, which releases them too."""
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock_all()")


class HeldSlot:
    """One slot held for a request: a session-level advisory lock on a pooled connection of its own.

    `release()` (idempotent, from any thread) returns the connection, whose reset unlocks it; a process that dies
    holding slots drops its connections, so PostgreSQL releases them then.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection: Connection | None = connection
        self._guard = threading.Lock()

    def release(self) -> None:
        """Give the slot back."""
        with self._guard:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


class Database:
    """The app's connection to PostgreSQL: a pooled runtime engine and org-scoped sessions.

    Its sessions carry `secrets_key` in their info: the key that seals the env values stored in this database.
    """

    secrets_key: SecretsKey | None = None

    def __init__(self, urls: DatabaseUrls, *, pool_size: int = 10, secrets_key: SecretsKey | None = None) -> None:
        self.urls, self.secrets_key = urls, secrets_key
        self.engine: Engine = create_engine(
            sqlalchemy_url(urls.runtime),
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            json_deserializer=loads_stored,  # a value stored nested too deep reads with its deep parts left out
        )
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        event.listen(self._sessions, "after_begin", _scope_transaction_to_org)
        self._admin_engine: Engine | None = None  # the owner role's, made on first use (see admin_session)
        self._admin_sessions = sessionmaker(expire_on_commit=False)
        self._pool_size = pool_size
        self._slot_engine: Engine | None = None  # connections that hold request slots, made on first use
        self._slot_engine_guard = threading.Lock()

    def session(self, org_id: uuid.UUID | None = None, user_id: uuid.UUID | None = None) -> Session:
        """Open a session whose every transaction sees only `org_id`'s rows (none when `org_id` is None).

        `user_id` (the logged-in user) also makes that user's own account row visible.
        """
        return self._sessions(info={"org_id": org_id, "user_id": user_id, "secrets_key": self.secrets_key})

    def admin_session(self, org_id: uuid.UUID | None = None) -> Session:
        """Open a session as the owner role (CLI administration), still scoped to `org_id` by forced RLS.

        The owner's engine is made on first use (the web never uses it) and keeps one connection for the next
        command, so a script of many administrative writes logs in once, not once per write.
        """
        if self._admin_engine is None:
            self._admin_engine = create_engine(
                sqlalchemy_url(self.urls.admin),
                pool_size=1,
                max_overflow=4,
                pool_pre_ping=True,
                json_deserializer=loads_stored,
            )
            self._admin_sessions = sessionmaker(self._admin_engine, expire_on_commit=False)
            event.listen(self._admin_sessions, "after_begin", _scope_transaction_to_org)
        return self._admin_sessions(info={"org_id": org_id, "secrets_key": self.secrets_key})

    def hold_slot(self, scope: str, owner: uuid.UUID, slots: int) -> HeldSlot | None:
        """Take one of `owner`'s `slots` slots in `scope`, across every process using this database; None when all
        are held.

        A slot is a session-level advisory lock (pg_try_advisory_lock, never waiting) held on a connection of its
        own, in autocommit so it holds no snapshot: it outlives the request's own transactions (an export streams
        from one of its own) and is released by `HeldSlot.release()`.
        """
        connection = self._slots().connect()
        try:
            for index in range(slots):
                key = slot_key(scope, owner, index)
                if connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar():
                    return HeldSlot(connection)
        except BaseException:
            connection.close()
            raise
        connection.close()
        return None

    def _slots(self) -> Engine:
        with self._slot_engine_guard:
            if self._slot_engine is None:
                self._slot_engine = create_engine(
                    sqlalchemy_url(self.urls.runtime),
                    pool_size=self._pool_size,
                    max_overflow=self._pool_size,
                    pool_pre_ping=True,
                    isolation_level="AUTOCOMMIT",
                )
                event.listen(self._slot_engine, "reset", _unlock_advisory_locks)
            return self._slot_engine

    def dispose(self) -> None:
        """Close every pooled connection (the runtime role's and, once used, the owner's and the slots')."""
        self.engine.dispose()
        if self._admin_engine is not None:
            self._admin_engine.dispose()
        if self._slot_engine is not None:
            self._slot_engine.dispose()


def rows_changed(result: Any) -> int:
    """How many rows an UPDATE or DELETE touched (its CursorResult's rowcount, which Result's type hides)."""
    return cast("CursorResult[Any]", result).rowcount


def secrets_key_of(session: Session) -> SecretsKey | None:
    """The secrets key the session's Database was opened with (Database.session puts it in the session's info)."""
    return session.info.get("secrets_key")
