"""Secret env values sealed at rest: secret_env columns, existing plaintext values sealed, agent edits refused.

Revision ID: 0012
Revises: 0009

Env values of environment specs and agent configs leave the jsonb columns: each
value there becomes "***" and the values are sealed (AES-256-GCM, the secrets
key handed over by db.migrate.migrate) into `secret_env`. Versions that held env values
get a new spec_sha256 that covers keyed digests of the values instead of the
values (models.environments.spec_sha256). The tables are FORCE'd under RLS even
for the owner, so rows are visited one organization at a time; the immutability
trigger of environment_versions is suspended inside this transaction only.
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import context, op

from domain.specs import spec_sha256
from domain.secret_env import SecretsKeyError, open_env, row_name, seal_env

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# table, jsonb column holding the env, whether the row's spec_sha256 follows its spec, immutability trigger
TABLES = (
    ("environment_versions", "spec", True, "environment_versions_immutable"),
    ("evaluator_configs", "agent", False, None),
)
WITH_ENV = "jsonb_typeof({column} -> 'env') = 'object' AND {column} -> 'env' <> '{{}}'::jsonb"


def _each_organization(connection) -> list:
    """Every organization id, each made current for the rows that follow (organizations is not FORCE'd)."""
    return [row[0] for row in connection.execute(sa.text("SELECT id FROM organizations ORDER BY id"))]


def _rewrite(table: str, column: str, hashed: bool, trigger: str | None, rewrite) -> None:
    """Apply `rewrite(row) -> (config, sealed, sha256)` to every row of `table` that holds env values."""
    connection = op.get_bind()
    for org_id in _each_organization(connection):
        connection.execute(sa.text("SELECT set_config('app.current_org', :org, true)"), {"org": str(org_id)})
        extra = ", spec_sha256" if hashed else ""
        rows = connection.execute(
            sa.text(
                f"SELECT organization_id, id, {column}, secret_env{extra} FROM {table} "
                f"WHERE {WITH_ENV.format(column=column)}"
            )
        ).all()
        if rows and trigger:
            op.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
        for row in rows:
            config, sealed, sha256 = rewrite(row)
            connection.execute(
                sa.text(
                    f"UPDATE {table} SET {column} = CAST(:config AS jsonb), secret_env = :sealed"
                    + (", spec_sha256 = :sha256" if hashed else "")
                    + " WHERE organization_id = :org AND id = :id"
                ),
                {"config": json.dumps(config), "sealed": sealed, "sha256": sha256, "org": row[0], "id": row[1]},
            )
        if rows and trigger:
            op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
    connection.execute(sa.text("SELECT set_config('app.current_org', '', true)"))


def upgrade() -> None:
    """Add secret_env, seal every plaintext env value, and refuse edits of an evaluator config's agent."""
    key = context.config.attributes.get("secrets_key")
    for table, column, hashed, trigger in TABLES:
        op.add_column(table, sa.Column("secret_env", sa.LargeBinary(), nullable=True))

        def seal(row, table=table, column=column, hashed=hashed):
            if row.secret_env is not None:  # already sealed: nothing to do
                return row[2], row.secret_env, row.spec_sha256 if hashed else None
            if key is None:
                raise SecretsKeyError(
                    f"{table} holds env values to seal: run the migration with AGENTFORGE_SECRETS_KEY "
                    "(or the instance's secrets_key file) available"
                )
            config, sealed = seal_env(row[2], key, row_name(table, row.organization_id, row.id))
            return config, sealed, spec_sha256(row[2], key) if hashed else None

        _rewrite(table, column, hashed, trigger, seal)
    op.execute(
        """
        CREATE FUNCTION reject_change_of_agent() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'evaluator_configs.agent cannot change: create a new evaluator configuration instead'
                USING ERRCODE = 'restrict_violation';
        END
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER evaluator_configs_agent_immutable BEFORE UPDATE OF agent, secret_env ON evaluator_configs "
        "FOR EACH ROW WHEN (OLD.agent IS DISTINCT FROM NEW.agent OR OLD.secret_env IS DISTINCT FROM NEW.secret_env) "
        "EXECUTE FUNCTION reject_change_of_agent()"
    )


def downgrade() -> None:
    """Put the env values back into the jsonb columns (plaintext, as before 0012) and drop secret_env."""
    key = context.config.attributes.get("secrets_key")
    op.execute("DROP TRIGGER evaluator_configs_agent_immutable ON evaluator_configs")
    op.execute("DROP FUNCTION reject_change_of_agent()")
    for table, column, hashed, trigger in TABLES:

        def unseal(row, table=table, column=column, hashed=hashed):
            config = open_env(row[2], row.secret_env, key, row_name(table, row.organization_id, row.id))
            canonical = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
            return config, None, hashlib.sha256(canonical).hexdigest() if hashed else None

        _rewrite(table, column, hashed, trigger, unseal)
        op.drop_column(table, "secret_env")
