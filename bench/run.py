"""`make bench`: measure server time of every page and API endpoint and write BENCHMARKS.md.

Requests go through Flask's test client in this process against the app's own
database configuration (the embedded cluster by default), so the figures are
server time: routing, auth, SQL and rendering, without a network hop.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

from sqlalchemy import select

from app import create_app
from models.accounts import User, add_membership, create_organization, create_user, find_organization

ROOT = Path(__file__).resolve().parent.parent
# Same cluster as the app, its own database, so benchmark data never mixes with demo data.
os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200"))
BENCH_ORG, BENCH_EMAIL, BENCH_PASSWORD = "Bench Org", "bench@agentforge.test", "bench-password"
PUBLIC_ENDPOINTS = ["/healthz", "/login"]
LOGGED_IN_ENDPOINTS = ["/environments", "/api/v1/me"]


def ensure_bench_user(database) -> None:
    """Create the benchmark organization and user once."""
    with database.admin_session() as session, session.begin():
        org = find_organization(session, BENCH_ORG) or create_organization(session, BENCH_ORG)
    with database.admin_session(org.id) as session, session.begin():
        if session.scalar(select(User.id).where(User.email == BENCH_EMAIL)) is None:
            add_membership(session, create_user(session, BENCH_EMAIL, BENCH_PASSWORD), org, "owner")


def login(client) -> None:
    """Log the client in through the real form."""
    page = client.get("/login").text
    token = page.split('name="csrf_token" type="hidden" value="', 1)[1].split('"', 1)[0]
    response = client.post("/login", data={"email": BENCH_EMAIL, "password": BENCH_PASSWORD, "csrf_token": token})
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


def main() -> None:
    """Run every measurement and write BENCHMARKS.md."""
    app = create_app()
    ensure_bench_user(app.extensions["agentforge_db"])
    anonymous, client = app.test_client(), app.test_client()
    login(client)
    rows = [(url, *measure(anonymous, url)) for url in PUBLIC_ENDPOINTS]
    rows += [(url, *measure(client, url)) for url in LOGGED_IN_ENDPOINTS]
    lines = [
        "# Benchmarks",
        "",
        "Produced by `make bench` (`python -m bench.run`, database `agentforge_bench` of the embedded cluster); "
        "server time through Flask's test client, "
        f"{REQUESTS} requests per endpoint after 10 warm-ups, on the embedded PostgreSQL.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"{platform.platform()}.",
        "",
        "| endpoint | median ms | p95 ms |",
        "|---|---:|---:|",
        *(f"| `{url}` | {median:.2f} | {p95:.2f} |" for url, median, p95 in rows),
        "",
    ]
    (ROOT / "BENCHMARKS.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
