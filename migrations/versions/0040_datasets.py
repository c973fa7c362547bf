"""Datasets: a dataset of the organization, its immutable versions, and each version's ordered tasks.

A dataset version is an ordered list of tasks; a task is an environment version and, for kinds that draw worlds
(built-in, MCP), a fixed world seed (NULL for a Harbor-task version, one task by itself). `tasks_sha256` covers the
ordered tasks, so the same tasks are the same version (unique per dataset) and one change is a new one. A version
holds a task once: (environment version, world seed) is unique per version with NULLs not distinct (PostgreSQL 15+).
Every table holds organization_id under forced row-level security with the tenant policy, composite keys
(organization_id, …) and foreign keys within the organization; versions and their tasks are immutable (the trigger
of migration 0001), so the runtime role may only read and insert them.

Revision ID: 0040
Revises: 0039
"""

import sqlalchemy as sa
from alembic import op

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None

CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"
TABLES = ("datasets", "dataset_versions", "dataset_tasks")
IMMUTABLE = ("dataset_versions", "dataset_tasks")
GRANTS = {
    "datasets": "SELECT, INSERT, UPDATE, DELETE",
    "dataset_versions": "SELECT, INSERT",
    "dataset_tasks": "SELECT, INSERT",
}


def upgrade() -> None:
    """Create the three tables under RLS, their grants and the immutability triggers."""
    now = sa.text("now()")
    op.create_table(
        "datasets",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], name="fk_datasets_organizations"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_datasets"),
        sa.UniqueConstraint("organization_id", "name", name="uq_datasets_organization_id_name"),
    )
    op.create_table(
        "dataset_versions",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("tasks_sha256", sa.String(64), nullable=False),
        sa.Column("task_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.ForeignKeyConstraint(
            ["organization_id", "dataset_id"],
            ["datasets.organization_id", "datasets.id"],
            name="fk_dataset_versions_datasets",
        ),
        sa.CheckConstraint("version >= 1", name="ck_dataset_versions_version_positive"),
        sa.CheckConstraint("tasks_sha256 ~ '^[0-9a-f]{64}$'", name="ck_dataset_versions_tasks_sha256_hex"),
        sa.CheckConstraint("task_count BETWEEN 1 AND 10000", name="ck_dataset_versions_task_count_range"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_dataset_versions"),
        sa.UniqueConstraint(
            "organization_id", "dataset_id", "version", name="uq_dataset_versions_organization_id_dataset_id_version"
        ),
        sa.UniqueConstraint(
            "organization_id",
            "dataset_id",
            "tasks_sha256",
            name="uq_dataset_versions_organization_id_dataset_id_tasks_sha256",
        ),
    )
    op.create_table(
        "dataset_tasks",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("dataset_version_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("environment_version_id", sa.Uuid(), nullable=False),
        sa.Column("world_seed", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["organization_id", "dataset_version_id"],
            ["dataset_versions.organization_id", "dataset_versions.id"],
            name="fk_dataset_tasks_dataset_versions",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name="fk_dataset_tasks_environment_versions",
        ),
        sa.CheckConstraint("position >= 1", name="ck_dataset_tasks_position_positive"),
        sa.CheckConstraint("world_seed IS NULL OR world_seed >= 0", name="ck_dataset_tasks_world_seed_range"),
        sa.PrimaryKeyConstraint("organization_id", "id", name="pk_dataset_tasks"),
        sa.UniqueConstraint(
            "organization_id",
            "dataset_version_id",
            "position",
            name="uq_dataset_tasks_organization_id_dataset_version_id_position",
        ),
        sa.UniqueConstraint(
            "organization_id",
            "dataset_version_id",
            "environment_version_id",
            "world_seed",
            name="uq_dataset_tasks_task_once_per_version",
            postgresql_nulls_not_distinct=True,
        ),
    )
    op.create_index(
        "ix_dataset_tasks_organization_id_environment_version_id",
        "dataset_tasks",
        ["organization_id", "environment_version_id"],
    )
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
        )
        op.execute(f'GRANT {GRANTS[table]} ON {table} TO "{runtime}"')
    for table in IMMUTABLE:
        op.execute(
            f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION reject_change_of_immutable_row()"
        )


def downgrade() -> None:
    """Drop the three tables (their policies and triggers go with them)."""
    for table in reversed(TABLES):
        op.drop_table(table)
