"""Fair queue: claim_next_run serves the organization with the fewest runs in progress first, within a cap.

Claims are serialised by a transaction-scoped advisory lock, so the count of
an organization's runs in progress that a claim sees includes every claim
committed before it: several workers together never exceed the cap. A run
whose lease expired is reclaimed whatever the cap (it is already in progress).

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

CLAIM_LOCK = 7_421_002  # pg_advisory_xact_lock key: one claim at a time, so the per-organization cap holds


def upgrade() -> None:
    """Replace claim_next_run(worker, lease, attempts) with the fair one that also takes the per-org cap."""
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute("DROP FUNCTION claim_next_run(text, integer, integer)")
    op.execute(
        f"""
        CREATE FUNCTION claim_next_run(p_worker text, p_lease_seconds integer, p_max_attempts integer,
                                       p_max_running_per_org integer)
        RETURNS TABLE (run_organization_id uuid, run_id uuid)
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            r evaluation_runs%ROWTYPE;
        BEGIN
            PERFORM pg_advisory_xact_lock({CLAIM_LOCK});
            LOOP
                WITH in_progress AS (
                    SELECT p.organization_id, count(*) AS runs FROM evaluation_runs p
                    WHERE p.status = 'running' AND p.lease_expires_at >= now()
                    GROUP BY p.organization_id
                )
                SELECT er.* INTO r FROM evaluation_runs er
                LEFT JOIN in_progress ip ON ip.organization_id = er.organization_id
                WHERE (er.status = 'queued' AND COALESCE(ip.runs, 0) < p_max_running_per_org)
                   OR (er.status = 'running' AND er.lease_expires_at < now())
                ORDER BY COALESCE(ip.runs, 0), er.created_at, er.id
                LIMIT 1
                FOR UPDATE OF er SKIP LOCKED;
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
    op.execute("REVOKE ALL ON FUNCTION claim_next_run(text, integer, integer, integer) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION claim_next_run(text, integer, integer, integer) TO "{runtime}"')
    # Counting an organization's runs in progress: an index range scan, not a table scan.
    op.create_index(
        "ix_evaluation_runs_in_progress",
        "evaluation_runs",
        ["organization_id", "lease_expires_at"],
        postgresql_where="status = 'running'",
    )


def downgrade() -> None:
    """Back to 0002's oldest-first claim without a cap."""
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.drop_index("ix_evaluation_runs_in_progress", table_name="evaluation_runs")
    op.execute("DROP FUNCTION claim_next_run(text, integer, integer, integer)")
    op.execute(OLDEST_FIRST_CLAIM)
    op.execute("REVOKE ALL ON FUNCTION claim_next_run(text, integer, integer) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION claim_next_run(text, integer, integer) TO "{runtime}"')


# 0002's function, restored by downgrade().
OLDEST_FIRST_CLAIM = """
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
