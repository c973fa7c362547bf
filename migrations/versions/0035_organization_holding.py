"""organization_holding(kind, id): which of the caller's own organizations holds a trial or a run.

A link to a trial or run of another organization the user belongs to answers
404 in the organization they work in (row-level security hides it); the page
then offers "switch to <organization> and open". This definer function looks
the id up in each organization the calling user (app.current_user) is a member
of, one at a time under that organization's tenant policy, and restores the
caller's app.current_org before it returns. It names no organization the user
is not a member of, and nothing but the organization's id and name.

Revision ID: 0035
Revises: 0034
"""

from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

SIGNATURE = "organization_holding(text, uuid)"
FUNCTION = """
CREATE FUNCTION organization_holding(object_kind text, object_id uuid)
RETURNS TABLE (organization_id uuid, organization_name text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    caller_org text := coalesce(current_setting('app.current_org', true), '');
    caller uuid := NULLIF(current_setting('app.current_user', true), '')::uuid;
    m record;
    held boolean;
BEGIN
    IF caller IS NULL OR object_kind NOT IN ('trial', 'run') THEN
        RETURN;
    END IF;
    FOR m IN SELECT ms.organization_id AS id, o.name FROM memberships ms
             JOIN organizations o ON o.id = ms.organization_id
             WHERE ms.user_id = caller ORDER BY o.name LOOP
        PERFORM set_config('app.current_org', m.id::text, true);
        IF object_kind = 'trial' THEN
            held := EXISTS (SELECT 1 FROM evaluation_trials t WHERE t.organization_id = m.id AND t.id = object_id);
        ELSE
            held := EXISTS (SELECT 1 FROM evaluation_runs r WHERE r.organization_id = m.id AND r.id = object_id);
        END IF;
        IF held THEN
            PERFORM set_config('app.current_org', caller_org, true);
            organization_id := m.id;
            organization_name := m.name;
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
    PERFORM set_config('app.current_org', caller_org, true);
END $$;
"""


def upgrade() -> None:
    """Create the function; only the runtime role may call it."""
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(FUNCTION)
    op.execute(f"REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION {SIGNATURE} TO "{runtime}"')


def downgrade() -> None:
    """Drop the function."""
    op.execute(f"DROP FUNCTION {SIGNATURE}")
