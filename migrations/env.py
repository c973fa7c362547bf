"""Alembic environment: migrations run as the owner role on the connection db/migrate.py's migrate() hands over."""

from alembic import context

from models import Base

target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run migrations on the connection passed in `config.attributes` (db.migrate.migrate does this)."""
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
