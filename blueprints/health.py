"""`/healthz`: is the app up and can it reach PostgreSQL (no login needed)."""

from flask import Blueprint, jsonify
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from blueprints.auth import public
from web.database import get_database

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@public
def healthz():
    """Answer 200 when the database answers, 503 otherwise."""
    try:
        with get_database().engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError:
        return jsonify(status="unavailable", database="unreachable"), 503
    return jsonify(status="ok", database="ok")
