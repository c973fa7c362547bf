"""What the export's line needs, kept on the trial, so PostgreSQL builds each line without walking the trial twice.

* evaluation_trials.steps_too_deep: the steps nest deeper than MAX_STORED_JSON_DEPTH
  (128) levels, which only a row from before JSON was held to 64 levels, or one written
  by hand, can. The export leaves such steps out of its line (`trajectoryOmitted`).
* evaluation_trials.no_steps: the trial has no steps (none stored, or an empty list);
  its line has no trajectory.

  A trigger sets both whenever steps are written, so the export reads two booleans
  instead of walking (and decompressing) every trial's steps once more. Constant
  defaults: adding them rewrites no row; the rows they are true for are marked here.
* A CHECK that a trial's metrics hold stage_* values and the verifier's
  "explanations" only, which every writer already keeps to: the export's `stages` is
  then `metrics - 'explanations'`, not an aggregate over each trial's keys.

Revision ID: 0036
Revises: 0035
"""

from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

TOO_DEEP = """strict $.**{128} ? (@.type() == "object" || @.type() == "array")"""

FLAG = f"""
CREATE FUNCTION trial_steps_depth() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.steps_too_deep := NEW.steps IS NOT NULL AND jsonb_path_exists(NEW.steps, '{TOO_DEEP}');
    NEW.no_steps := NEW.steps IS NULL OR jsonb_typeof(NEW.steps) <> 'array' OR jsonb_array_length(NEW.steps) = 0;
    RETURN NEW;
END $$;
CREATE TRIGGER trial_steps_depth BEFORE INSERT OR UPDATE OF steps ON evaluation_trials
    FOR EACH ROW EXECUTE FUNCTION trial_steps_depth();
"""

MARK_EXISTING = f"""
DO $$
DECLARE org uuid;
BEGIN
    FOR org IN SELECT id FROM organizations LOOP
        PERFORM set_config('app.current_org', org::text, true);
        UPDATE evaluation_trials SET steps_too_deep = true WHERE jsonb_path_exists(steps, '{TOO_DEEP}');
        -- an empty list is a few bytes: only those are read whole
        UPDATE evaluation_trials SET no_steps = true
            WHERE steps IS NULL OR (pg_column_size(steps) < 64
                                    AND (jsonb_typeof(steps) <> 'array' OR jsonb_array_length(steps) = 0));
    END LOOP;
    PERFORM set_config('app.current_org', '', true);
END $$
"""

STAGES_ONLY = """
CREATE FUNCTION trial_metrics_are_stages(metrics jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_typeof(metrics) = 'object'
       AND coalesce(bool_and(key LIKE 'stage\\_%' OR key = 'explanations'), true)
    FROM jsonb_object_keys(CASE WHEN jsonb_typeof(metrics) = 'object' THEN metrics ELSE '{}' END) AS key
$$;
ALTER TABLE evaluation_trials ADD CONSTRAINT ck_evaluation_trials_metrics_are_stages
    CHECK (trial_metrics_are_stages(metrics)) NOT VALID;
"""


def upgrade() -> None:
    """Add the flags, their trigger and the metrics CHECK; mark the rows they are true for; validate the CHECK."""
    op.execute("ALTER TABLE evaluation_trials ADD COLUMN steps_too_deep boolean NOT NULL DEFAULT false")
    op.execute("ALTER TABLE evaluation_trials ADD COLUMN no_steps boolean NOT NULL DEFAULT false")
    op.execute(FLAG)
    op.execute(MARK_EXISTING)
    op.execute(STAGES_ONLY)
    op.execute("ALTER TABLE evaluation_trials VALIDATE CONSTRAINT ck_evaluation_trials_metrics_are_stages")


def downgrade() -> None:
    """Drop the CHECK, its function, the trigger, its function and the flags."""
    op.execute("ALTER TABLE evaluation_trials DROP CONSTRAINT ck_evaluation_trials_metrics_are_stages")
    op.execute("DROP FUNCTION trial_metrics_are_stages(jsonb)")
    op.execute("DROP TRIGGER trial_steps_depth ON evaluation_trials")
    op.execute("DROP FUNCTION trial_steps_depth()")
    op.execute("ALTER TABLE evaluation_trials DROP COLUMN steps_too_deep")
    op.execute("ALTER TABLE evaluation_trials DROP COLUMN no_steps")
