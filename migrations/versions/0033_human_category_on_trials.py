"""A reviewer's failure category becomes the trial's, so every count and filter follows it; triaged trials are marked.

* evaluation_trials.failure_category is the category pages and exports use: the
  verifier's until a reviewer sets a human category, then the reviewer's. The
  verifier's stays stored: trial_reviews.verifier_category holds it from the
  moment the trial's review row is written (until then the trial's own column
  is the verifier's). writes.triage keeps evaluation_trials.failure_category =
  coalesce(human_category, verifier_category).
* A trigger keeps the category rollups (failure_category_counts,
  evaluator_category_counts) right when a trial's category changes: one less
  under the old category, one more under the new, a rollup row gone at zero.
* evaluation_trials.triaged: a reviewer recorded something on the trial (a label,
  a review or a note). Exports read the triage tables only for these trials, so
  an export of untouched trials costs what it did before triage existed.
  (A constant default: adding it rewrites no row.)

Existing reviews are carried over: their verifier_category is the trial's
category, human categories already set move onto their trials (through the
trigger), and every trial with a label, review or note is marked triaged.

Revision ID: 0033
Revises: 0032
"""

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

ROLLUP_FUNCTION = """
CREATE FUNCTION category_rollups_of_recategorised_trial() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE evaluator uuid;
BEGIN
    SELECT evaluator_config_id INTO evaluator FROM evaluation_runs
        WHERE organization_id = NEW.organization_id AND id = NEW.evaluation_run_id;
    IF OLD.failure_category IS NOT NULL THEN
        UPDATE failure_category_counts SET trials = trials - 1
            WHERE organization_id = OLD.organization_id AND environment_version_id = OLD.environment_version_id
              AND failure_category = OLD.failure_category;
        DELETE FROM failure_category_counts
            WHERE organization_id = OLD.organization_id AND environment_version_id = OLD.environment_version_id
              AND failure_category = OLD.failure_category AND trials <= 0;
    END IF;
    IF NEW.failure_category IS NOT NULL THEN
        INSERT INTO failure_category_counts AS c (organization_id, environment_version_id, failure_category, trials)
            VALUES (NEW.organization_id, NEW.environment_version_id, NEW.failure_category, 1)
            ON CONFLICT (organization_id, environment_version_id, failure_category)
            DO UPDATE SET trials = c.trials + 1;
    END IF;
    UPDATE evaluator_category_counts SET trials = trials - 1
        WHERE organization_id = OLD.organization_id AND environment_version_id = OLD.environment_version_id
          AND evaluator_config_id = evaluator AND failure_category = coalesce(OLD.failure_category, '');
    DELETE FROM evaluator_category_counts
        WHERE organization_id = OLD.organization_id AND environment_version_id = OLD.environment_version_id
          AND evaluator_config_id = evaluator AND failure_category = coalesce(OLD.failure_category, '')
          AND trials <= 0;
    INSERT INTO evaluator_category_counts AS c (organization_id, environment_version_id, evaluator_config_id,
                                                failure_category, trials)
        VALUES (NEW.organization_id, NEW.environment_version_id, evaluator, coalesce(NEW.failure_category, ''), 1)
        ON CONFLICT (organization_id, environment_version_id, evaluator_config_id, failure_category)
        DO UPDATE SET trials = c.trials + 1;
    RETURN NULL;
END $$;
CREATE TRIGGER category_rollups_on_recategorise AFTER UPDATE OF failure_category ON evaluation_trials
    FOR EACH ROW WHEN (OLD.failure_category IS DISTINCT FROM NEW.failure_category)
    EXECUTE FUNCTION category_rollups_of_recategorised_trial();
"""

# Per organization (forced row-level security applies to the owner too).
CARRY_OVER = """
DO $$
DECLARE org uuid;
BEGIN
    FOR org IN SELECT id FROM organizations LOOP
        PERFORM set_config('app.current_org', org::text, true);
        UPDATE trial_reviews r SET verifier_category = t.failure_category FROM evaluation_trials t
            WHERE t.organization_id = r.organization_id AND t.id = r.evaluation_trial_id;
        UPDATE evaluation_trials t SET failure_category = r.human_category FROM trial_reviews r
            WHERE r.organization_id = t.organization_id AND r.evaluation_trial_id = t.id
              AND r.human_category IS NOT NULL;
        UPDATE evaluation_trials t SET triaged = true
            WHERE t.id IN (SELECT evaluation_trial_id FROM trial_reviews
                           UNION SELECT evaluation_trial_id FROM trial_labels
                           UNION SELECT evaluation_trial_id FROM trial_notes);
    END LOOP;
    PERFORM set_config('app.current_org', '', true);
END $$
"""

PUT_BACK = """
DO $$
DECLARE org uuid;
BEGIN
    FOR org IN SELECT id FROM organizations LOOP
        PERFORM set_config('app.current_org', org::text, true);
        UPDATE evaluation_trials t SET failure_category = r.verifier_category FROM trial_reviews r
            WHERE r.organization_id = t.organization_id AND r.evaluation_trial_id = t.id
              AND r.human_category IS NOT NULL;
    END LOOP;
    PERFORM set_config('app.current_org', '', true);
END $$
"""


def upgrade() -> None:
    """Add the two columns and the rollup trigger, then carry existing reviews over."""
    op.add_column("trial_reviews", sa.Column("verifier_category", sa.String(64), nullable=True))
    op.add_column("evaluation_trials", sa.Column("triaged", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute(ROLLUP_FUNCTION)
    op.execute(CARRY_OVER)


def downgrade() -> None:
    """Put the verifier's categories back on the trials, then drop the trigger and the columns."""
    op.execute(PUT_BACK)
    op.execute("DROP TRIGGER category_rollups_on_recategorise ON evaluation_trials")
    op.execute("DROP FUNCTION category_rollups_of_recategorised_trial()")
    op.drop_column("evaluation_trials", "triaged")
    op.drop_column("trial_reviews", "verifier_category")
