"""Worker queue: world and episode seeds on runs, the cross-org claim function, run notifications.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add seeds to runs and the SECURITY DEFINER claim function the worker calls."""
    op.add_column("evaluation_runs", sa.Column("world_seed", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("evaluation_runs", sa.Column("base_seed", sa.Integer(), nullable=False, server_default="0"))
    op.create_check_constraint("attempts_non_negative", "evaluation_runs", "attempts >= 0")
    # The claim function runs as the owner and must see queued runs of every organization.
    op.execute("CREATE POLICY owner_claim_queue ON evaluation_runs FOR ALL TO CURRENT_USER USING (true)")
    op.execute(
        """
        CREATE FUNCTION claim_next_run(p_worker text, p_lease_seconds integer, p_max_attempts integer)
        RETURNS TABLE (run_organization_id uuid, run_id uuid)
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            r evaluation_runs%ROWTYPE;
        BEGIN
            LOOP
                SELECT * INTO r FROM evaluation_runs er
                WHERE er.status = 'queued' OR (er.status = 'running' AND er.lease_expires_at < now())
                ORDER BY er.created_at
                LIMIT 1
                FOR UPDATE SKIP LOCKED;
                IF NOT FOUND THEN
                    RETURN;
                END IF;
                IF r.attempts >= p_max_attempts THEN
                    UPDATE evaluation_runs er
                    SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
                        error = concat_ws(E'\\n', er.error, format(
                            'gave up after %s attempts: the worker running it stopped before finishing', r.attempts))
                    WHERE er.organization_id = r.organization_id AND er.id = r.id;
                    CONTINUE;
                END IF;
                UPDATE evaluation_runs er
                SET status = 'running', lease_owner = p_worker, attempts = r.attempts + 1,
                    lease_expires_at = now() + make_interval(secs => p_lease_seconds),
                    started_at = coalesce(er.started_at, now())
                WHERE er.organization_id = r.organization_id AND er.id = r.id;
                run_organization_id := r.organization_id;
                run_id := r.id;
                RETURN NEXT;
                RETURN;
            END LOOP;
        END
        $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION claim_next_run(text, integer, integer) FROM PUBLIC")
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(f'GRANT EXECUTE ON FUNCTION claim_next_run(text, integer, integer) TO "{runtime}"')


def downgrade() -> None:
    """Remove the claim function and the seed columns."""
    op.execute("DROP FUNCTION claim_next_run(text, integer, integer)")
    op.execute("DROP POLICY owner_claim_queue ON evaluation_runs")
    op.drop_constraint("ck_evaluation_runs_attempts_non_negative", "evaluation_runs")
    op.drop_column("evaluation_runs", "base_seed")
    op.drop_column("evaluation_runs", "world_seed")
