"""Where the app's database is: the owner and runtime URLs, their two spellings (SQLAlchemy's and libpq's), the roles.

With DATABASE_URL set the app connects where it says; without it, the embedded cluster (db/cluster.py) is
started or joined under AGENTFORGE_DATA_DIR and its URLs returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import make_url

OWNER_ROLE = "agentforge_owner"
RUNTIME_ROLE = "agentforge_app"
DEFAULT_DATABASE = "agentforge"
SUPERUSER = "postgres"


@dataclass(frozen=True)
class DatabaseUrls:
    """Where to connect: `admin` as the owner role (migrations), `runtime` as the RLS-bound role."""

    admin: str
    runtime: str

    def __repr__(self) -> str:
        """Show where the URLs point without their passwords (they may end up in logs)."""
        return f"DatabaseUrls(admin={make_url(self.admin)!r}, runtime={make_url(self.runtime)!r})"


def sqlalchemy_url(url: str) -> str:
    """Return `url` with the psycopg 3 driver named, as SQLAlchemy needs it."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """Return `url` in the plain form psycopg and libpq accept (no SQLAlchemy driver suffix)."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def resolve_urls(config: dict) -> DatabaseUrls:
    """Decide where the app's database lives from its config (external URLs or the embedded cluster)."""
    runtime = config.get("DATABASE_URL")
    if runtime:
        return DatabaseUrls(admin=config.get("ADMIN_DATABASE_URL") or runtime, runtime=runtime)
    from db.cluster import ensure_embedded_roles_and_database, start_embedded_cluster  # only without DATABASE_URL

    superuser_url = start_embedded_cluster(config["AGENTFORGE_DATA_DIR"])
    return ensure_embedded_roles_and_database(superuser_url, config.get("AGENTFORGE_DATABASE", DEFAULT_DATABASE))


def runtime_role_of(urls: DatabaseUrls) -> str:
    """Return the name of the role the runtime URL logs in as."""
    return make_url(urls.runtime).username or RUNTIME_ROLE
