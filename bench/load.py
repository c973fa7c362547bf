"""Concurrent load: 32 logged-in clients for 60 s against gunicorn, on pages and exports; throughput, p95, errors."""

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
    errors: int
    seconds: float
    p50_ms: float
    p95_ms: float
    gunicorn: str


def run_load(email: str, password: str, urls: list[str]) -> LoadResult:
    """Serve with gunicorn (4 workers x 8 threads), then let CLIENTS clients request `urls` at random."""
    env = {**os.environ, "DB_POOL_SIZE": "8"}
    gunicorn = "4 workers x 8 threads"
    server = start_server(env, workers=4, threads=8)
    try:
        openers = [login(email, password) for _ in range(CLIENTS)]
        timings: list[float] = []
        errors = [0]
        lock = threading.Lock()
        deadline = time.monotonic() + SECONDS

        def client(opener) -> None:
            rng = random.Random()
            local, failed = [], 0
            while time.monotonic() < deadline:
                url = rng.choice(urls)
                started = time.perf_counter()
                try:
                    with opener.open(f"http://127.0.0.1:{PORT}{url}", timeout=30) as response:
                        response.read()
                        ok = response.status == 200
                except (urllib.error.URLError, OSError):
                    ok = False
                local.append((time.perf_counter() - started) * 1000)
                failed += not ok
            with lock:
                timings.extend(local)
                errors[0] += failed

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
        len(timings), errors[0], elapsed, statistics.median(timings), timings[int(len(timings) * 0.95) - 1], gunicorn
    )


def summary(result: LoadResult, urls: list[str]) -> list[str]:
    """Markdown lines for BENCHMARKS.md."""
    return [
        f"{CLIENTS} concurrent logged-in clients for {SECONDS:g} s against gunicorn ({result.gunicorn}), each request "
        f"a random pick of: {', '.join(f'`{u}`' for u in urls)}.",
        "",
        "| requests | requests/s | median ms | p95 ms | errors |",
        "|---:|---:|---:|---:|---:|",
        f"| {result.requests} | {result.requests / result.seconds:.1f} | {result.p50_ms:.1f} | {result.p95_ms:.1f} | "
        f"{result.errors} |",
    ]
