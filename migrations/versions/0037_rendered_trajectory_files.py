"""A trial's trajectory file is rendered from the trial's own log and steps instead of being stored a second time.

trial-{n}-trajectory.json holds nothing but the trial's log_excerpt and steps (schemaVersion, log, and the steps as
a JSON string), so storing its body as well kept every trajectory twice: 1,143 of the 7,850 bytes a trial took at
5M trials. From now on the artifact row of a trajectory file keeps its name, size and sha256 with no body
(`body IS NULL`, allowed for trajectory files only); its id is its trial's id, and
`trial_trajectory_document(log, steps)` renders the bytes, the same function that gave the size and sha256 when
the trial was recorded. Every download renders them again and compares their sha256 with the recorded one.
Files recorded before keep their stored bodies; ATIF documents and task bundles are stored as they came.

Revision ID: 0037
Revises: 0036
"""

from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

DOCUMENT = """
CREATE FUNCTION trial_trajectory_document(log text, steps jsonb) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT convert_to(json_build_object('schemaVersion', 1, 'log', log,
                                        'trajectory', json_build_object('steps', steps)::text)::text, 'UTF8')
$$;
"""

RENDERED = (
    "body IS NOT NULL OR (content_type = 'application/json' AND filename ~ '^trial-[0-9]+-trajectory\\.json$')"
)


def upgrade() -> None:
    """The rendering function, and a body no longer required of trajectory files."""
    op.execute(DOCUMENT)
    op.execute("ALTER TABLE artifacts ALTER COLUMN body DROP NOT NULL")
    op.execute(f"ALTER TABLE artifacts ADD CONSTRAINT ck_artifacts_body_or_rendered_trajectory CHECK ({RENDERED})")


def downgrade() -> None:
    """Store the rendered bodies, require a body again, drop the function."""
    op.execute(
        """DO $$
        DECLARE org uuid;
        BEGIN
            ALTER TABLE artifacts DISABLE TRIGGER artifacts_immutable;
            FOR org IN SELECT id FROM organizations LOOP
                PERFORM set_config('app.current_org', org::text, true);
                UPDATE artifacts a SET body = trial_trajectory_document(t.log_excerpt, t.steps)
                FROM evaluation_trials t
                WHERE a.body IS NULL AND t.organization_id = a.organization_id AND t.id = a.id
                  AND t.trajectory_artifact_id = a.id;
            END LOOP;
            PERFORM set_config('app.current_org', '', true);
            ALTER TABLE artifacts ENABLE TRIGGER artifacts_immutable;
        END $$"""
    )
    op.execute("ALTER TABLE artifacts DROP CONSTRAINT ck_artifacts_body_or_rendered_trajectory")
    op.execute("ALTER TABLE artifacts ALTER COLUMN body SET NOT NULL")
    op.execute("DROP FUNCTION trial_trajectory_document(text, jsonb)")
