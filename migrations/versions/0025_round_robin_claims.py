"""Round-robin claims: organizations with as many runs in progress take turns, the one served longest ago first.

0011's claim ordered every claimable run by its organization's runs in
progress, then by age. With one worker nobody is ever in progress when it
claims, so the queue was first in, first out across organizations: one
organization's six queued runs all went before another's single run. Now each
organization's last claim is kept in organizations.last_claimed_at (written by
the claim, which the runtime role cannot write), and among the organizations
with claimable work the claim serves the one with the fewest runs in progress,
then the one whose last claim is oldest (never claimed first), then the one
whose oldest claimable run is oldest; within it, runs in the same order as
before (oldest first, an abandoned run whatever the cap, a queued one only
under the cap). Claims stay serialised by 0011's advisory lock, so the cap
holds across workers and `clock_timestamp()` orders the turns.

The claim reads only the organizations with claimable work and a few index
probes per organization: a skip scan of the new partial index of queued runs
(organization_id, created_at, id) lists the organizations with queued runs, the
in-progress index the ones with abandoned runs. The old claim sorted every
queued run at each claim (240 ms with 200,000 queued). The queue index leads
with organization_id, so the claim-queue index 0001 made without it goes.

Revision ID: 0025
Revises: 0024
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

CLAIM_LOCK = 7_421_002  # 0011's pg_advisory_xact_lock key: one claim at a time, so the per-organization cap holds
SIGNATURE = "claim_next_run(text, integer, integer, integer)"

ROUND_ROBIN_CLAIM = f"""
CREATE FUNCTION claim_next_run(p_worker text, p_lease_seconds integer, p_max_attempts integer,
                               p_max_running_per_org integer)
RETURNS TABLE (run_organization_id uuid, run_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    v_org uuid;
    v_running bigint;
    r evaluation_runs%ROWTYPE;
    q evaluation_runs%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock({CLAIM_LOCK});
    <<claiming>>
    LOOP
        FOR v_org, v_running IN
            WITH RECURSIVE queued_orgs(organization_id) AS (  -- one index probe per organization with queued runs
                (SELECT er.organization_id FROM evaluation_runs er WHERE er.status = 'queued'
                 ORDER BY er.organization_id LIMIT 1)
                UNION ALL
                SELECT (SELECT er.organization_id FROM evaluation_runs er
                        WHERE er.status = 'queued' AND er.organization_id > qo.organization_id
                        ORDER BY er.organization_id LIMIT 1)
                FROM queued_orgs qo WHERE qo.organization_id IS NOT NULL
            ), candidates AS (
                SELECT qo.organization_id FROM queued_orgs qo WHERE qo.organization_id IS NOT NULL
                UNION
                SELECT er.organization_id FROM evaluation_runs er
                WHERE er.status = 'running' AND er.lease_expires_at < now()
            )
            SELECT c.organization_id, ip.runs
            FROM candidates c
            JOIN organizations o ON o.id = c.organization_id
            CROSS JOIN LATERAL (
                SELECT count(*) AS runs FROM evaluation_runs p
                WHERE p.organization_id = c.organization_id AND p.status = 'running' AND p.lease_expires_at >= now()
            ) ip
            CROSS JOIN LATERAL (
                SELECT least(
                    CASE WHEN ip.runs < p_max_running_per_org THEN (
                        SELECT er.created_at FROM evaluation_runs er
                        WHERE er.organization_id = c.organization_id AND er.status = 'queued'
                        ORDER BY er.created_at LIMIT 1)
                    END,
                    (SELECT min(er.created_at) FROM evaluation_runs er
                     WHERE er.organization_id = c.organization_id AND er.status = 'running'
                       AND er.lease_expires_at < now())
                ) AS created_at
            ) oldest
            WHERE oldest.created_at IS NOT NULL
            ORDER BY ip.runs, o.last_claimed_at NULLS FIRST, oldest.created_at, c.organization_id
        LOOP
            -- The organization's oldest claimable run: an abandoned one whatever the cap, a queued one under it.
            SELECT er.* INTO r FROM evaluation_runs er
            WHERE er.organization_id = v_org AND er.status = 'running' AND er.lease_expires_at < now()
            ORDER BY er.created_at, er.id LIMIT 1
            FOR UPDATE SKIP LOCKED;
            IF v_running < p_max_running_per_org THEN
                SELECT er.* INTO q FROM evaluation_runs er
                WHERE er.organization_id = v_org AND er.status = 'queued'
                ORDER BY er.created_at, er.id LIMIT 1
                FOR UPDATE SKIP LOCKED;
                IF q.id IS NOT NULL AND (r.id IS NULL OR (q.created_at, q.id) < (r.created_at, r.id)) THEN
                    r := q;
                END IF;
            END IF;
            CONTINUE WHEN r.id IS NULL;  -- its claimable runs are locked by a write right now: the next organization
            IF r.attempts >= p_max_attempts THEN
                UPDATE evaluation_runs er
                SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
                    error = concat_ws(E'\\n', er.error, format(
                        'gave up after %s attempts: the worker running it stopped before finishing', r.attempts))
                WHERE er.organization_id = r.organization_id AND er.id = r.id;
                CONTINUE claiming;  -- the turns are read again
            END IF;
            UPDATE evaluation_runs er
            SET status = 'running', lease_owner = p_worker, attempts = r.attempts + 1,
                lease_expires_at = now() + make_interval(secs => p_lease_seconds),
                started_at = coalesce(er.started_at, now())
            WHERE er.organization_id = r.organization_id AND er.id = r.id;
            UPDATE organizations SET last_claimed_at = clock_timestamp() WHERE id = v_org;
            run_organization_id := r.organization_id;
            run_id := r.id;
            RETURN NEXT;
            RETURN;
        END LOOP;
        RETURN;
    END LOOP;
END
$$
"""

# 0011's function, restored by downgrade().
FEWEST_IN_PROGRESS_CLAIM = f"""
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


def _replace_claim(definition: str) -> None:
    runtime = op.get_context().config.attributes.get("runtime_role", "agentforge_app")
    op.execute(f"DROP FUNCTION {SIGNATURE}")
    op.execute(definition)
    op.execute(f"REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION {SIGNATURE} TO "{runtime}"')


def upgrade() -> None:
    """Add organizations.last_claimed_at and the queue index; claim round-robin across organizations."""
    op.add_column("organizations", sa.Column("last_claimed_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_evaluation_runs_queue",
        "evaluation_runs",
        ["organization_id", "created_at", "id"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.drop_index("ix_evaluation_runs_claimable", table_name="evaluation_runs")
    _replace_claim(ROUND_ROBIN_CLAIM)


def downgrade() -> None:
    """Back to 0011's claim (fewest runs in progress, then oldest run first) and its index."""
    _replace_claim(FEWEST_IN_PROGRESS_CLAIM)
    op.create_index(
        "ix_evaluation_runs_claimable",
        "evaluation_runs",
        ["created_at"],
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    op.drop_index("ix_evaluation_runs_queue", table_name="evaluation_runs")
    op.drop_column("organizations", "last_claimed_at")
