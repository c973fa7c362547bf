"""Runs in run order: the run indexes end in id, so "newest first, ties by id" is one backward index range.

The environments pages order runs by (created_at, id): runs created in one
instant (one transaction) are told apart by id. The indexes they read ended in
created_at, so PostgreSQL sorted each created_at group again (an incremental
sort), and the newest completed run of a version filtered the version's runs
by status as it walked them. Now:

* ix_evaluation_runs_org_version_created ends in id (an environment's recent
  runs, paged by (created_at, id));
* ix_evaluation_runs_completed (new, partial on completed runs): a version's
  newest completed run (Latest pass@1, a version's pass@k);
* ix_evaluation_runs_completed_by_evaluator ends in id (the pass@1 trends).

Revision ID: 0028
Revises: 0027
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

COMPLETED = sa.text("status = 'completed'")


def _recreate(name: str, columns: list[str], where: sa.TextClause | None = None) -> None:
    op.drop_index(name, table_name="evaluation_runs")
    op.create_index(name, "evaluation_runs", columns, postgresql_where=where)


def upgrade() -> None:
    """Rebuild the two run-order indexes with id last, and add the completed runs' one."""
    _recreate(
        "ix_evaluation_runs_org_version_created", ["organization_id", "environment_version_id", "created_at", "id"]
    )
    _recreate(
        "ix_evaluation_runs_completed_by_evaluator",
        ["organization_id", "environment_version_id", "evaluator_config_id", "created_at", "id"],
        COMPLETED,
    )
    op.create_index(
        "ix_evaluation_runs_completed",
        "evaluation_runs",
        ["organization_id", "environment_version_id", "created_at", "id"],
        postgresql_where=COMPLETED,
    )


def downgrade() -> None:
    """The indexes as 0021 and 0001 made them."""
    op.drop_index("ix_evaluation_runs_completed", table_name="evaluation_runs")
    _recreate(
        "ix_evaluation_runs_completed_by_evaluator",
        ["organization_id", "environment_version_id", "evaluator_config_id", "created_at"],
        COMPLETED,
    )
    _recreate("ix_evaluation_runs_org_version_created", ["organization_id", "environment_version_id", "created_at"])
