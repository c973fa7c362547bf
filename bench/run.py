"""`make bench`: measure pages, API endpoints and exports on generated history; write BENCHMARKS.md.

Runs against the app's own database configuration, in the database
`agentforge_bench` of the embedded cluster unless AGENTFORGE_DATABASE says
otherwise; generates history there first when it holds fewer than
BENCH_FAILED failed rollouts (default 200,000) in its first organization.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")

from sqlalchemy import text

from app import create_app
from bench import export as export_bench
from bench import load as load_bench
from bench.generate import ATTEMPTS, BENCH_PASSWORD, ORGS, ensure_catalog, generate_runs

ROOT = Path(__file__).resolve().parent.parent
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200"))
FAILED_TARGET = int(os.environ.get("BENCH_FAILED", "200000"))
FAILED_SHARE = 0.55  # of generated trials


def login(client, email: str) -> None:
    """Log the test client in through the real form."""
    page = client.get("/login").text
    token = page.split('name="csrf_token" type="hidden" value="', 1)[1].split('"', 1)[0]
    response = client.post("/login", data={"email": email, "password": BENCH_PASSWORD, "csrf_token": token})
    assert response.status_code == 303, response.status_code


def measure(client, url: str) -> tuple[float, float]:
    """Return (median, p95) server time in milliseconds over REQUESTS requests, after 10 warm-ups."""
    for _ in range(10):
        client.get(url)
    timings = []
    for _ in range(REQUESTS):
        start = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1]


def ensure_history(database) -> tuple:
    """Make sure the first benchmark organization holds FAILED_TARGET failed rollouts; return (org id, catalog)."""
    org_id, catalog = ensure_catalog(database, *ORGS[0])
    with database.session(org_id) as session:
        failed = session.execute(text("SELECT count(*) FROM rollouts WHERE reward < 1")).scalar()
    if failed < FAILED_TARGET:
        runs_per_version = int((FAILED_TARGET - failed) / FAILED_SHARE / ATTEMPTS / len(catalog)) + 1
        print(f"generating {runs_per_version * ATTEMPTS * len(catalog)} trials …", flush=True)
        for version_id, env_name, config_id in catalog:
            generate_runs(database, org_id, version_id, env_name, config_id, runs_per_version)
    return org_id, catalog


def main() -> None:
    """Run every measurement and write BENCHMARKS.md."""
    app = create_app()
    database = app.extensions["agentforge_db"]
    org_id, _ = ensure_history(database)
    with database.session(org_id) as session:
        trials = session.execute(text("SELECT count(*) FROM evaluation_trials")).scalar()
        run_id = session.execute(text("SELECT id FROM evaluation_runs ORDER BY created_at DESC LIMIT 1")).scalar()
        rollout_id = session.execute(text("SELECT id FROM rollouts ORDER BY seq DESC LIMIT 1")).scalar()
        environment_id = session.execute(text("SELECT id FROM environments ORDER BY name LIMIT 1")).scalar()

    anonymous, client = app.test_client(), app.test_client()
    login(client, ORGS[0][1])
    pages = [(label, *measure(anonymous, label)) for label in ("/healthz", "/login")]
    pages += [
        (label, *measure(client, url))
        for label, url in (
            ("/environments", "/environments"),
            ("/environments/<id>", f"/environments/{environment_id}"),
            ("/runs/<id>", f"/runs/{run_id}"),
            ("/api/v1/me", "/api/v1/me"),
            ("/api/v1/evaluation-runs/<id>", f"/api/v1/evaluation-runs/{run_id}"),
            ("/api/v1/rollouts/<id>", f"/api/v1/rollouts/{rollout_id}"),
            ("/api/v1/rollouts?kind=preference", "/api/v1/rollouts?kind=preference"),
        )
    ]
    exported = export_bench.measure_export(database, org_id, ORGS[0][1], BENCH_PASSWORD)
    with database.session(org_id) as session:
        trial_id = session.execute(text("SELECT id FROM evaluation_trials ORDER BY id DESC LIMIT 1")).scalar()
    load_urls = [
        "/environments",
        f"/environments/{environment_id}",
        f"/runs/{run_id}",
        f"/trials/{trial_id}",
        "/capability-gap",
        f"/api/v1/evaluation-runs/{run_id}",
        "/api/v1/rollouts?kind=preference",
        f"/api/v1/rollouts?kind=all&evaluationRunId={run_id}",
    ]
    loaded = load_bench.run_load(ORGS[0][1], BENCH_PASSWORD, load_urls)

    lines = [
        "# Benchmarks",
        "",
        "Produced by `make bench` (`python -m bench.run`) on database `agentforge_bench` of the embedded "
        f"PostgreSQL; the measured organization holds {trials:,} evaluation trials.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"{platform.platform()}.",
        "",
        "## Pages and API endpoints",
        "",
        f"Server time through Flask's test client (routing, auth, SQL, rendering; no network), {REQUESTS} "
        "requests each after 10 warm-ups.",
        "",
        "| endpoint | median ms | p95 ms |",
        "|---|---:|---:|",
        *(f"| `{label}` | {median:.2f} | {p95:.2f} |" for label, median, p95 in pages),
        "",
        "## Export: failed rollouts",
        "",
        *export_bench.summary(exported),
        "",
        "## Concurrent load",
        "",
        *load_bench.summary(loaded, load_urls),
        "",
    ]
    (ROOT / "BENCHMARKS.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
