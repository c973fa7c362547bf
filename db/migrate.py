"""The schema: alembic's migrations (migrations/, the checkout's or the installed wheel's) brought to the newest
revision as the owner role."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from db.urls import DatabaseUrls, runtime_role_of, sqlalchemy_url
from domain.install import shipped_folder

if TYPE_CHECKING:
    from domain.secret_env import SecretsKey

MIGRATIONS_LOCK = 7_421_001  # pg_advisory_lock key that serialises concurrent migrations


def migrate(urls: DatabaseUrls, secrets_key: SecretsKey | None = None) -> None:
    """Bring the schema to the newest alembic revision as the owner role; safe to run concurrently and twice.

    `secrets_key` seals env values that older revisions kept in plaintext (needed only when such rows exist).
    """
    from alembic import command
    from alembic.config import Config

    engine = create_engine(sqlalchemy_url(urls.admin), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATIONS_LOCK})
            cfg = Config()
            cfg.set_main_option("script_location", str(shipped_folder("migrations")))
            cfg.attributes["connection"] = conn
            cfg.attributes["runtime_role"] = runtime_role_of(urls)
            cfg.attributes["secrets_key"] = secrets_key
            command.upgrade(cfg, "head")
    finally:
        engine.dispose()
