"""Environments, versions and evaluator configurations created from page forms: one row per submitted form.

Each table gains `submission_key`, the key each rendering of a create form
carries (as evaluation_runs has since 0022), unique per organization when set:
a second POST of the same form (a double click, Back and submit again) finds
the first one's row instead of creating another.

Revision ID: 0034
Revises: 0033
"""

import sqlalchemy as sa
from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None

TABLES = ("environments", "environment_versions", "evaluator_configs")


def upgrade() -> None:
    """Add the column and its unique partial index to each table."""
    for table in TABLES:
        op.add_column(table, sa.Column("submission_key", sa.Uuid(), nullable=True))
        op.create_index(
            f"ux_{table}_org_submission_key",
            table,
            ["organization_id", "submission_key"],
            unique=True,
            postgresql_where=sa.text("submission_key IS NOT NULL"),
        )


def downgrade() -> None:
    """Drop the indexes and columns."""
    for table in TABLES:
        op.drop_index(f"ux_{table}_org_submission_key", table_name=table)
        op.drop_column(table, "submission_key")
