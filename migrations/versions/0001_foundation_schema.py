"""Foundation schema: every table, row-level security, immutability triggers, auth lookup, grants.

Revision ID: 0001
Revises:
Create Date: 2026-11-30 06:42:59.283561
"""

from alembic import context, op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the tables, then secure them."""
    op.create_table(
        "organizations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("slug", sa.String(length=200), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("name", name=op.f("uq_organizations_name")),
        sa.UniqueConstraint("slug", name=op.f("uq_organizations_slug")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("password_hash", sa.String(length=400), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("email = lower(email)", name=op.f("ck_users_email_lower_case")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "artifacts",
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("content_type", sa.String(length=100), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("size >= 0", name=op.f("ck_artifacts_size_non_negative")),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_artifacts_organizations"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_artifacts")),
    )
    op.create_table(
        "auth_sessions",
        sa.Column("token_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_auth_sessions_users")),
        sa.PrimaryKeyConstraint("token_sha256", name=op.f("pk_auth_sessions")),
    )
    op.create_index(op.f("ix_auth_sessions_user_id"), "auth_sessions", ["user_id"], unique=False)
    op.create_table(
        "environments",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_environments_organizations"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_environments")),
        sa.UniqueConstraint("organization_id", "name", name=op.f("uq_environments_organization_id_name")),
    )
    op.create_table(
        "evaluator_configs",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("agent", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("max_steps", sa.Integer(), nullable=False),
        sa.Column("timeout_s", sa.Double(), nullable=False),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "attempt_count BETWEEN 1 AND 8",
            name=op.f("ck_evaluator_configs_attempt_count_range"),
        ),
        sa.CheckConstraint("max_steps >= 1", name=op.f("ck_evaluator_configs_max_steps_positive")),
        sa.CheckConstraint("timeout_s > 0", name=op.f("ck_evaluator_configs_timeout_positive")),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_evaluator_configs_organizations"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_evaluator_configs")),
        sa.UniqueConstraint(
            "organization_id",
            "name",
            name=op.f("uq_evaluator_configs_organization_id_name"),
        ),
    )
    op.create_table(
        "memberships",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "role IN ('owner', 'member', 'viewer')",
            name=op.f("ck_memberships_role_known"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_memberships_organizations"),
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_memberships_users")),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_memberships")),
        sa.UniqueConstraint(
            "organization_id",
            "user_id",
            name=op.f("uq_memberships_organization_id_user_id"),
        ),
    )
    op.create_index(op.f("ix_memberships_user_id"), "memberships", ["user_id"], unique=False)
    op.create_table(
        "environment_versions",
        sa.Column("environment_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("spec", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "spec_sha256 ~ '^[0-9a-f]{64}$'",
            name=op.f("ck_environment_versions_spec_sha256_hex"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_environment_versions_version_positive")),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_id"],
            ["environments.organization_id", "environments.id"],
            name=op.f("fk_environment_versions_environments"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_environment_versions")),
        sa.UniqueConstraint(
            "organization_id",
            "environment_id",
            "version",
            name=op.f("uq_environment_versions_organization_id_environment_id_version"),
        ),
    )
    op.create_table(
        "evaluation_runs",
        sa.Column("environment_version_id", sa.Uuid(), nullable=False),
        sa.Column("evaluator_config_id", sa.Uuid(), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("reset_mode", sa.String(length=20), nullable=False),
        sa.Column("reset_of_run_id", sa.Uuid(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("pass_at_k", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("stage_pass_at_k", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "(reset_mode = 'initial') = (reset_of_run_id IS NULL)",
            name=op.f("ck_evaluation_runs_reset_names_its_run"),
        ),
        sa.CheckConstraint(
            "reset_mode IN ('initial', 'new_workspace', 'new_world')",
            name=op.f("ck_evaluation_runs_reset_mode_known"),
        ),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'completed', 'failed', 'cancelled')",
            name=op.f("ck_evaluation_runs_status_known"),
        ),
        sa.CheckConstraint(
            "attempt_count BETWEEN 1 AND 8",
            name=op.f("ck_evaluation_runs_attempt_count_range"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name=op.f("fk_evaluation_runs_environment_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluator_config_id"],
            ["evaluator_configs.organization_id", "evaluator_configs.id"],
            name=op.f("fk_evaluation_runs_evaluator_configs"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "reset_of_run_id"],
            ["evaluation_runs.organization_id", "evaluation_runs.id"],
            name=op.f("fk_evaluation_runs_evaluation_runs"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_evaluation_runs")),
    )
    op.create_index(
        "ix_evaluation_runs_claimable",
        "evaluation_runs",
        ["created_at"],
        unique=False,
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    op.create_index(
        "ix_evaluation_runs_org_version_created",
        "evaluation_runs",
        ["organization_id", "environment_version_id", "created_at"],
        unique=False,
    )
    op.create_table(
        "failure_category_counts",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("environment_version_id", sa.Uuid(), nullable=False),
        sa.Column("failure_category", sa.String(length=64), nullable=False),
        sa.Column("trials", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name=op.f("fk_failure_category_counts_environment_versions"),
        ),
        sa.PrimaryKeyConstraint(
            "organization_id",
            "environment_version_id",
            "failure_category",
            name=op.f("pk_failure_category_counts"),
        ),
    )
    op.create_table(
        "stage_metric_rollups",
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("environment_version_id", sa.Uuid(), nullable=False),
        sa.Column("stage_key", sa.String(length=100), nullable=False),
        sa.Column("trials", sa.BigInteger(), nullable=False),
        sa.Column("passed", sa.BigInteger(), nullable=False),
        sa.Column("value_sum", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name=op.f("fk_stage_metric_rollups_environment_versions"),
        ),
        sa.PrimaryKeyConstraint(
            "organization_id",
            "environment_version_id",
            "stage_key",
            name=op.f("pk_stage_metric_rollups"),
        ),
    )
    op.create_table(
        "evaluation_trials",
        sa.Column("evaluation_run_id", sa.Uuid(), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("reward", sa.Double(), nullable=True),
        sa.Column("failure_category", sa.String(length=64), nullable=True),
        sa.Column("metrics", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("trajectory_artifact_id", sa.Uuid(), nullable=True),
        sa.Column("log_excerpt", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.CheckConstraint(
            "reward IS NULL OR (reward >= 0 AND reward <= 1)",
            name=op.f("ck_evaluation_trials_reward_range"),
        ),
        sa.CheckConstraint("trial_number >= 1", name=op.f("ck_evaluation_trials_trial_number_positive")),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluation_run_id"],
            ["evaluation_runs.organization_id", "evaluation_runs.id"],
            name=op.f("fk_evaluation_trials_evaluation_runs"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "trajectory_artifact_id"],
            ["artifacts.organization_id", "artifacts.id"],
            name=op.f("fk_evaluation_trials_artifacts"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_evaluation_trials")),
        sa.UniqueConstraint(
            "organization_id",
            "evaluation_run_id",
            "trial_number",
            name=op.f("uq_evaluation_trials_trial_number_per_run"),
        ),
    )
    op.create_table(
        "rollouts",
        sa.Column("environment_version_id", sa.Uuid(), nullable=False),
        sa.Column("evaluation_run_id", sa.Uuid(), nullable=False),
        sa.Column("evaluation_trial_id", sa.Uuid(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Double(), nullable=True),
        sa.Column("organization_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "reward IS NULL OR (reward >= 0 AND reward <= 1)",
            name=op.f("ck_rollouts_reward_range"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "environment_version_id"],
            ["environment_versions.organization_id", "environment_versions.id"],
            name=op.f("fk_rollouts_environment_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluation_run_id"],
            ["evaluation_runs.organization_id", "evaluation_runs.id"],
            name=op.f("fk_rollouts_evaluation_runs"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id", "evaluation_trial_id"],
            ["evaluation_trials.organization_id", "evaluation_trials.id"],
            name=op.f("fk_rollouts_evaluation_trials"),
        ),
        sa.PrimaryKeyConstraint("organization_id", "id", name=op.f("pk_rollouts")),
        sa.UniqueConstraint(
            "organization_id",
            "evaluation_trial_id",
            name=op.f("uq_rollouts_organization_id_evaluation_trial_id"),
        ),
    )
    op.create_index(
        "ix_rollouts_org_run",
        "rollouts",
        ["organization_id", "evaluation_run_id"],
        unique=False,
    )
    op.create_index(
        "ix_rollouts_org_version_reward",
        "rollouts",
        ["organization_id", "environment_version_id", "reward"],
        unique=False,
    )
    _secure()


def downgrade() -> None:
    """Drop everything this revision created."""
    op.execute("DROP FUNCTION IF EXISTS auth_memberships(uuid)")
    op.drop_index("ix_rollouts_org_version_reward", table_name="rollouts")
    op.drop_index("ix_rollouts_org_run", table_name="rollouts")
    op.drop_table("rollouts")
    op.drop_table("evaluation_trials")
    op.drop_table("stage_metric_rollups")
    op.drop_table("failure_category_counts")
    op.drop_index("ix_evaluation_runs_org_version_created", table_name="evaluation_runs")
    op.drop_index(
        "ix_evaluation_runs_claimable",
        table_name="evaluation_runs",
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    op.drop_table("evaluation_runs")
    op.drop_table("environment_versions")
    op.drop_index(op.f("ix_memberships_user_id"), table_name="memberships")
    op.drop_table("memberships")
    op.drop_table("evaluator_configs")
    op.drop_table("environments")
    op.drop_index(op.f("ix_auth_sessions_user_id"), table_name="auth_sessions")
    op.drop_table("auth_sessions")
    op.drop_table("artifacts")
    op.drop_table("users")
    op.drop_table("organizations")
    op.execute("DROP FUNCTION IF EXISTS reject_change_of_immutable_row() CASCADE")


# Tables holding organization_id: RLS enabled and forced, one tenant policy each.
ORG_TABLES = (
    "memberships",
    "environments",
    "environment_versions",
    "evaluator_configs",
    "artifacts",
    "evaluation_runs",
    "evaluation_trials",
    "rollouts",
    "failure_category_counts",
    "stage_metric_rollups",
)
IMMUTABLE_TABLES = ("environment_versions", "artifacts")
CURRENT_ORG = "(SELECT NULLIF(current_setting('app.current_org', true), '')::uuid)"


def _secure() -> None:
    """Row-level security, immutability triggers, the auth lookup function and the runtime role's grants."""
    runtime = context.config.attributes.get("runtime_role", "agentforge_app")
    for table in ORG_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (organization_id = {CURRENT_ORG}) WITH CHECK (organization_id = {CURRENT_ORG})"
        )
    # organizations has no organization_id: its id is the org. Runtime sees only the current one;
    # the owner role (not forced) reads names for the SECURITY DEFINER lookup below and for the CLI.
    op.execute("ALTER TABLE organizations ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON organizations USING (id = {CURRENT_ORG}) WITH CHECK (id = {CURRENT_ORG})"
    )
    # Login must list a user's memberships before any org is chosen: only the owner role (never the
    # runtime role) may read across orgs, and the runtime role reaches that only via auth_memberships().
    op.execute("CREATE POLICY owner_membership_lookup ON memberships FOR SELECT TO CURRENT_USER USING (true)")
    op.execute(
        """
        CREATE FUNCTION auth_memberships(p_user_id uuid)
        RETURNS TABLE (organization_id uuid, organization_name text, organization_slug text, role text)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT m.organization_id, o.name, o.slug, m.role
            FROM memberships m JOIN organizations o ON o.id = m.organization_id
            WHERE m.user_id = p_user_id
            ORDER BY o.name
        $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION auth_memberships(uuid) FROM PUBLIC")
    op.execute(
        """
        CREATE FUNCTION reject_change_of_immutable_row() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '% rows are immutable: create a new row instead of %', TG_TABLE_NAME, lower(TG_OP)
                USING ERRCODE = 'restrict_violation';
        END
        $$
        """
    )
    for table in IMMUTABLE_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION reject_change_of_immutable_row()"
        )
    _grant(runtime)


def _grant(runtime: str) -> None:
    """Give the runtime role exactly what web and worker need, nothing more."""
    role = f'"{runtime}"'
    op.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
    op.execute(f"GRANT EXECUTE ON FUNCTION auth_memberships(uuid) TO {role}")
    op.execute(f"GRANT SELECT ON organizations TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON users TO {role}")
    op.execute(f"GRANT SELECT, INSERT, DELETE ON auth_sessions TO {role}")
    for table in ORG_TABLES:
        privileges = "SELECT, INSERT" if table in IMMUTABLE_TABLES else "SELECT, INSERT, UPDATE, DELETE"
        op.execute(f"GRANT {privileges} ON {table} TO {role}")
