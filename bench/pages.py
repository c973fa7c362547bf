"""Server time of every page and API endpoint through Flask's test client, and the naive SQL a page replaces."""

from __future__ import annotations

import os
import re
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from bench.generate import BENCH_PASSWORD, ENVIRONMENTS
from bench.triage import TRIAGE_QUERIES

REQUESTS = int(os.environ.get("BENCH_REQUESTS", "60"))
AGGREGATE_PAGES = (
    "/environments",
    "/environments/<id>",
    "/environments/<id>/export",
    "/capability-gap",
    "/partial-rewards/versions/<id>",
    "/compare?a=<version>&b=<version>",
)


@dataclass(frozen=True)
class Timing:
    """Median and p95 in milliseconds."""

    median: float
    p95: float


def percentile_timing(samples: list[float]) -> Timing:
    """Median and p95 of millisecond samples."""
    ordered = sorted(samples)
    return Timing(statistics.median(ordered), ordered[max(0, int(len(ordered) * 0.95) - 1)])


def csrf_token_of(page: str) -> str:
    """The value of the page's hidden csrf_token input."""
    found = re.search(r'<input[^>]*name="csrf_token"[^>]*value="([^"]+)"', page)
    if found is None:
        raise ValueError("the page has no csrf_token input")
    return found.group(1)


def login(client, email: str) -> None:
    """Log the test client in through the real form."""
    token = csrf_token_of(client.get("/login").text)
    response = client.post("/login", data={"email": email, "password": BENCH_PASSWORD, "csrf_token": token})
    assert response.status_code == 303, response.status_code


def measure(client, url: str, headers: dict | None = None, before: Callable[[], object] | None = None) -> Timing:
    """Server time over REQUESTS requests after 5 warm-ups (`before` called ahead of each, untimed)."""
    for _ in range(5):
        if before is not None:
            before()
        client.get(url, headers=headers)
    samples = []
    for _ in range(REQUESTS):
        if before is not None:
            before()
        started = time.perf_counter()
        response = client.get(url, headers=headers)
        response.get_data()
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return percentile_timing(samples)


def sample_ids(database, org_id: uuid.UUID) -> dict[str, Any]:
    """Ids of real rows to put into the URLs (the newest run, trial, rollout and its artifact)."""
    with database.session(org_id) as session:
        row = session.execute(
            text("""
            SELECT t.evaluation_run_id, t.id, r.id, t.trajectory_artifact_id, t.environment_version_id,
                   v.environment_id, er.evaluator_config_id,
                   to_char((now() - interval '1 hour') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI'),
                   (SELECT CASE name WHEN 'admin-console' THEN 'stage_inventory' ELSE 'stage_triage' END
                    FROM environments WHERE id = v.environment_id), md5(t.task)
            FROM evaluation_trials t JOIN rollouts r ON r.organization_id = t.organization_id
              AND r.evaluation_trial_id = t.id
            JOIN environment_versions v ON v.organization_id = t.organization_id AND v.id = t.environment_version_id
            JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
            ORDER BY t.id DESC LIMIT 1""")
        ).one()
        other = session.execute(
            text("SELECT id FROM environment_versions WHERE environment_id = :e AND id <> :v ORDER BY version LIMIT 1"),
            {"e": row[5], "v": row[4]},
        ).scalar()
    names = ("run", "trial", "rollout", "artifact", "version", "environment", "config", "hour_ago", "stage", "task")
    return {**dict(zip(names, row, strict=True)), "other_version": other or row[4]}


LAST_STAGE = ENVIRONMENTS["admin-console"][0][-1]  # the generator's failed trials never pass it


def explorer_pages(ids: dict[str, Any]) -> list[tuple[str, str, dict | None]]:
    """The trials explorer's first page (failed first) under each single filter and three combined."""
    queries = {
        "status=succeeded": "status=succeeded",
        "rewardBand=recovery": "rewardBand=recovery",
        "stageFailed=<first stage>": f"stageFailed={ids['stage']}",
        "environmentVersionId=<id>": f"environmentVersionId={ids['version']}",
        "evaluatorConfigId=<id>": f"evaluatorConfigId={ids['config']}",
        "source=imported": "source=imported",
        "finishedAfter=<1 hour ago>": "finishedAfter=" + ids["hour_ago"],
        "sort=-steps": "sort=-steps",
        # Filters that match few trials or none: a page must not walk the whole history to learn that.
        "minReward=0.6&maxReward=0.9 (matches none)": "minReward=0.6&maxReward=0.9",
        "finishedBefore=2020-01-01 (matches none)": "finishedBefore=2020-01-01T00:00",
        "stagePassed=<last stage> (no failed trial passed it)": f"stagePassed={LAST_STAGE}",
        # A task of compare's per-task table, in its version (each count's link).
        "environmentVersionId=<id>&task=<task key>": f"environmentVersionId={ids['version']}&task={ids['task']}",
        "environmentId=<id>&status=failed&stagePassed=<first stage>": (
            f"environmentId={ids['environment']}&status=failed&stagePassed={ids['stage']}"
        ),
        # Three filters whose first page is full at both sizes (one version's gave_up trials fill only 9 to 15 rows
        # of it at 10k, so the ratio compared a short page with a full one).
        "environmentId=<id>&failureCategory=gave_up&stageFailed=<first stage>": (
            f"environmentId={ids['environment']}&failureCategory=gave_up&stageFailed={ids['stage']}"
        ),
    }
    queries.update(TRIAGE_QUERIES)  # labels and review states (bench/triage.py seeds them)
    pages = [(f"/trials?{label}", f"/trials?{query}", None) for label, query in queries.items()]
    return [*pages, ("/api/v1/trials?rewardBand=failed", "/api/v1/trials?rewardBand=failed", None)]


def endpoints(ids: dict[str, uuid.UUID]) -> list[tuple[str, str, dict | None]]:
    """(label, URL, headers) of every page and API endpoint, filled with real ids."""
    fragment = {"HX-Request": "true"}
    return [
        ("/environments", "/environments", None),
        ("/environments/<id>", f"/environments/{ids['environment']}", None),
        ("/environments/<id>/export", f"/environments/{ids['environment']}/export", None),
        ("/runs/<id>", f"/runs/{ids['run']}", None),
        ("/trials/<id>", f"/trials/{ids['trial']}", None),
        ("/trials", "/trials", None),
        ("/trials?failureCategory=gave_up", "/trials?failureCategory=gave_up", None),
        *explorer_pages(ids),
        ("/capability-gap", "/capability-gap", None),
        ("/capability-gap?environmentId=<id>", f"/capability-gap?environmentId={ids['environment']}", fragment),
        ("/partial-rewards", "/partial-rewards", None),
        ("/partial-rewards/versions/<id>", f"/partial-rewards/versions/{ids['version']}", fragment),
        ("/capability-gap?evaluatorConfigId=<id>", f"/capability-gap?evaluatorConfigId={ids['config']}", fragment),
        (
            "/partial-rewards/versions/<id>?evaluatorConfigId=<id>",
            f"/partial-rewards/versions/{ids['version']}?evaluatorConfigId={ids['config']}",
            fragment,
        ),
        ("/compare?a=<version>&b=<version>", f"/compare?a={ids['other_version']}&b={ids['version']}", None),
        (
            "/api/v1/compare?a=<version>&b=<version>",
            f"/api/v1/compare?a={ids['other_version']}&b={ids['version']}",
            None,
        ),
        ("/settings/members", "/settings/members", None),
        ("/api/v1/me", "/api/v1/me", None),
        ("/api/v1/environments", "/api/v1/environments", None),
        ("/api/v1/evaluation-runs/<id>", f"/api/v1/evaluation-runs/{ids['run']}", None),
        ("/api/v1/rollouts/<id>", f"/api/v1/rollouts/{ids['rollout']}", None),
        ("/api/v1/artifacts/<id>", f"/api/v1/artifacts/{ids['artifact']}", None),
        ("/api/v1/rollouts?kind=preference", "/api/v1/rollouts?kind=preference", None),
        (
            "/api/v1/rollouts?kind=failed&evaluationRunId=<id>",
            f"/api/v1/rollouts?kind=failed&evaluationRunId={ids['run']}",
            None,
        ),
        ("/api/v1/openapi.json", "/api/v1/openapi.json", None),
    ]


def measure_all(app, email: str, ids: dict[str, uuid.UUID]) -> dict[str, Timing]:
    """Server time of /healthz, /login and every logged-in endpoint."""
    anonymous, client = app.test_client(), app.test_client()
    login(client, email)
    results = {"/healthz": measure(anonymous, "/healthz"), "/login": measure(anonymous, "/login")}
    for label, url, headers in endpoints(ids):
        results[label] = measure(client, url, headers)
    return results


# What each aggregate page would cost computed from the raw history (the hand-written query it replaces).
NAIVE = {
    "/environments": """
        SELECT e.id, count(DISTINCT er.id), count(t.id), avg(t.reward)
        FROM environments e JOIN environment_versions v ON v.environment_id = e.id
        LEFT JOIN evaluation_runs er ON er.environment_version_id = v.id
        LEFT JOIN evaluation_trials t ON t.evaluation_run_id = er.id GROUP BY e.id""",
    "/environments/<id>": """
        SELECT v.id, count(DISTINCT er.id), count(t.id), avg(t.reward) FROM environment_versions v
        LEFT JOIN evaluation_runs er ON er.environment_version_id = v.id
        LEFT JOIN evaluation_trials t ON t.evaluation_run_id = er.id WHERE v.environment_id = :environment
        GROUP BY v.id""",
    "/environments/<id>/export": """
        SELECT count(*), count(*) FILTER (WHERE r.reward = 1), count(*) FILTER (WHERE r.reward < 1),
               count(*) FILTER (WHERE r.reward > 0 AND r.reward < 1)
        FROM rollouts r JOIN environment_versions v ON v.id = r.environment_version_id
        WHERE v.environment_id = :environment""",
    "/capability-gap": """
        SELECT t.environment_version_id, t.failure_category, count(*) FROM evaluation_trials t
        WHERE t.failure_category IS NOT NULL GROUP BY 1, 2""",
    "/compare?a=<version>&b=<version>": """
        SELECT t.environment_version_id, count(*), count(*) FILTER (WHERE t.reward = 1), avg(t.reward),
               stddev_samp(t.reward) FROM evaluation_trials t
        WHERE t.environment_version_id IN (:version, :other_version) GROUP BY 1""",
    "/partial-rewards/versions/<id>": """
        SELECT m.key, count(*), count(*) FILTER (WHERE m.value::float8 = 1), avg(m.value::float8)
        FROM evaluation_trials t CROSS JOIN LATERAL jsonb_each_text(t.metrics) m
        WHERE t.environment_version_id = :version AND m.key LIKE 'stage\\_%' GROUP BY 1""",
}


def naive_timings(database, org_id: uuid.UUID, ids: dict[str, uuid.UUID]) -> dict[str, Timing]:
    """PostgreSQL time of each naive aggregate (median of 5 after a warm-up), as the runtime role."""
    results = {}
    with database.session(org_id) as session:
        for label, sql in NAIVE.items():
            params = {
                "environment": ids["environment"],
                "version": ids["version"],
                "other_version": ids["other_version"],
            }
            session.execute(text(sql), params).all()
            samples = []
            for _ in range(5):
                started = time.perf_counter()
                session.execute(text(sql), params).all()
                samples.append((time.perf_counter() - started) * 1000)
            results[label] = percentile_timing(samples)
    return results
