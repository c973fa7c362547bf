"""The app's Database in Flask: attached to the app, and one org-scoped session per request, closed when it ends."""

from __future__ import annotations

from flask import Flask, current_app, g
from sqlalchemy.orm import Session

from db.session import Database


def init_app(app: Flask, database: Database) -> None:
    """Attach `database` to `app` and close each request's session when the request ends."""
    app.extensions["agentforge_db"] = database
    app.teardown_appcontext(_close_request_session)


def get_database() -> Database:
    """Return the current app's Database."""
    return current_app.extensions["agentforge_db"]


def request_session() -> Session:
    """Return this request's session, scoped to the organization (and user) the request works as."""
    if "db_session" not in g:
        g.db_session = get_database().session(g.get("org_id"), g.get("user_id"))
    return g.db_session


def _close_request_session(_exc: BaseException | None) -> None:
    """Roll back whatever the view did not commit and return the connection to the pool."""
    session = g.pop("db_session", None)
    if session is not None:
        session.close()
