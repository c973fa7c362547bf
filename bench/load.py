"""Concurrent load: 32 logged-in members for 60 s against gunicorn, on pages and exports; throughput, p95, errors.

Each client is a member of its own (as a team's researchers are): one person's burst past the per-user limit on
expensive requests answers 429 by design, so 429s are counted apart from errors. `make bench` runs it after the
other measurements; `python -m bench.load` runs it alone on the benchmark database `make bench` left (1M trials)
and replaces its section of BENCHMARKS.md.
"""

from __future__ import annotations

import os
import random
import statistics
import threading
import time
import urllib.error
from dataclasses import dataclass

from bench.export import PORT, login, start_server

CLIENTS = int(os.environ.get("BENCH_LOAD_CLIENTS", "32"))
SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", "60"))


@dataclass(frozen=True)
class LoadResult:
    """What the load run measured."""

    requests: int
    errors: int  # answers other than 200 and 429, and requests that failed
    refused: int  # 429: a member past the per-user limit on expensive requests
    seconds: float
    p50_ms: float
    p95_ms: float
    gunicorn: str


def load_urls(ids: dict) -> list[str]:
    """The pages and exports the clients pick from, for the sample ids `bench.pages.sample_ids` found."""
    return [
        "/environments",
        f"/environments/{ids['environment']}",
        f"/runs/{ids['run']}",
        f"/trials/{ids['trial']}",
        "/capability-gap",
        f"/api/v1/evaluation-runs/{ids['run']}",
        "/api/v1/rollouts?kind=preference",
        f"/api/v1/rollouts?kind=all&evaluationRunId={ids['run']}",
    ]


def member_emails(owner: str) -> list[str]:
    """The owner and CLIENTS - 1 more members of the same organization, one per client."""
    local, _, domain = owner.partition("@")
    return [owner, *(f"{local}-load{i}@{domain}" for i in range(1, CLIENTS))]


def run_load(emails: list[str], password: str, urls: list[str]) -> LoadResult:
    """Serve with gunicorn (4 workers x 8 threads), then let CLIENTS clients, each a member of its own, request
    `urls` at random."""
    env = {**os.environ, "DB_POOL_SIZE": "8"}
    gunicorn = "4 workers x 8 threads"
    server = start_server(env, workers=4, threads=8)
    try:
        openers = [login(emails[i % len(emails)], password) for i in range(CLIENTS)]
        timings: list[float] = []
        errors, refused = [0], [0]
        lock = threading.Lock()
        deadline = time.monotonic() + SECONDS

        def client(opener) -> None:
            rng = random.Random()
            local, failed, busy = [], 0, 0
            while time.monotonic() < deadline:
                url = rng.choice(urls)
                started = time.perf_counter()
                status = 0
                try:
                    with opener.open(f"http://127.0.0.1:{PORT}{url}", timeout=30) as response:
                        response.read()
                        status = response.status
                except urllib.error.HTTPError as answer:
                    status = answer.code
                except (urllib.error.URLError, OSError):
                    status = 0
                local.append((time.perf_counter() - started) * 1000)
                busy += status == 429
                failed += status not in (200, 429)
            with lock:
                timings.extend(local)
                errors[0] += failed
                refused[0] += busy

        started = time.monotonic()
        threads = [threading.Thread(target=client, args=(opener,)) for opener in openers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    timings.sort()
    return LoadResult(
        len(timings),
        errors[0],
        refused[0],
        elapsed,
        statistics.median(timings),
        timings[int(len(timings) * 0.95) - 1],
        gunicorn,
    )


def summary(result: LoadResult, urls: list[str]) -> list[str]:
    """Markdown lines for BENCHMARKS.md."""
    return [
        f"{CLIENTS} concurrent clients, each a logged-in member of the organization, for {SECONDS:g} s against "
        f"gunicorn ({result.gunicorn}), each request a random pick of: {', '.join(f'`{u}`' for u in urls)}.",
        "",
        "| requests | requests/s | median ms | p95 ms | errors | 429 (per-user limit) |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {result.requests} | {result.requests / result.seconds:.1f} | {result.p50_ms:.1f} | {result.p95_ms:.1f} | "
        f"{result.errors} | {result.refused} |",
    ]


SECTION = "## Concurrent load"


def main() -> None:
    """Measure on the benchmark database `make bench` left and replace the load section and target row."""
    import re
    from pathlib import Path

    os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")
    from app import create_app
    from bench import pages
    from bench.generate import BENCH_PASSWORD, ORGS, ensure_members
    from queries.accounts import find_organization

    database = create_app().extensions["agentforge_db"]
    name, email, _ = ORGS[0]
    with database.admin_session() as session:
        org = find_organization(session, name)
    if org is None:
        raise SystemExit("no benchmark database: run `make bench` first")
    urls = load_urls(pages.sample_ids(database, org.id))
    members = member_emails(email)
    ensure_members(database, org.id, members)
    result = run_load(members, BENCH_PASSWORD, urls)
    lines = [
        SECTION,
        "",
        *summary(result, urls),
        "",
        "Measured alone by `python -m bench.load` on the database `make bench` left, after the rest of it.",
        "",
    ]
    path = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
    text = path.read_text()
    text = re.sub(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", lambda _: "\n".join(lines) + "\n", text, flags=re.S | re.M)
    mark = "met" if result.errors == 0 else "**not met**"
    text = re.sub(
        r"^\| zero errors under concurrent load \|.*$",
        f"| zero errors under concurrent load | {result.errors} errors ({result.refused} answered 429) | {mark} |",
        text,
        flags=re.M,
    )
    path.write_text(text)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
