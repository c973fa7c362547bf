"""Export throughput: GET /api/v1/rollouts?kind=failed from gunicorn beside PostgreSQL's own COPY of the same query.

The server runs as a separate gunicorn process; its peak resident memory is
sampled while the export streams, so growth shows whether anything loads the
whole result. The three transfers are measured in ROUNDS, each round one export
and the two COPYs back to back, so a noisy stretch of the machine (these 2 cores
swing 1.5x between minutes) slows all three of a round rather than one kind; the
ratio reported is the median of the rounds' own ratios.
"""

from __future__ import annotations

import http.cookiejar
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import TypeVar

import psutil
import psycopg

from bench.pages import csrf_token_of
from db.session import Database
from db.urls import libpq_url
from queries.exports import psycopg_sql, rollout_lines_sql, select_rollouts
from queries.filters import TrialFilters

T = TypeVar("T")

TRIALS = "JOIN evaluation_trials t ON t.organization_id = r.organization_id AND t.id = r.evaluation_trial_id"


def stored_rows_sql(kind: str, selection) -> str:
    """The same rollouts as the export, with their trial's fields and trajectory steps as stored (no line built)."""
    columns = "r.id, r.seed, r.reward, r.evaluation_run_id, r.environment_version_id, t.trial_number, "
    columns += "t.failure_category, t.metrics, t.steps"
    return f"SELECT {columns} {selection.source(TRIALS)} ORDER BY r.seq"


ROOT = Path(__file__).resolve().parent.parent
PORT = int(os.environ.get("BENCH_PORT", "5077"))
ROUNDS = 5


@dataclass(frozen=True)
class Transfer:
    """One measured transfer: lines, bytes, seconds."""

    lines: int
    bytes: int
    seconds: float


@dataclass(frozen=True)
class Round:
    """One export over HTTP and the two COPYs, measured back to back."""

    export: Transfer
    copy: Transfer  # COPY of the export's own query
    copy_stored: Transfer  # COPY of the same rollouts with their steps as stored


@dataclass(frozen=True)
class ExportResult:
    """ROUNDS rounds and the server's peak RSS growth while they ran."""

    rounds: list[Round]
    rss_growth_mb: float

    @property
    def export(self) -> Transfer:
        return median_transfer([r.export for r in self.rounds])

    @property
    def copy(self) -> Transfer:
        return median_transfer([r.copy for r in self.rounds])

    @property
    def copy_stored(self) -> Transfer:
        return median_transfer([r.copy_stored for r in self.rounds])

    def round_ratios(self, baseline: str = "copy_stored") -> list[float]:
        """Each round's export MB/s over that of the round's `baseline` COPY, in round order."""
        return [throughput_ratio(r.export, getattr(r, baseline)) for r in self.rounds]

    def ratio(self, baseline: str = "copy_stored") -> float:
        """The median of the rounds' ratios."""
        return median(self.round_ratios(baseline))


def start_server(env: dict[str, str], workers: int = 1, threads: int = 4) -> subprocess.Popen:
    """Serve the app with gunicorn and wait until /healthz answers."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-w",
            str(workers),
            "--threads",
            str(threads),
            "-b",
            f"127.0.0.1:{PORT}",
            "app:create_app()",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=1)
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("gunicorn did not start")


def login(email: str, password: str) -> urllib.request.OpenerDirector:
    """Log in through the real form; return an opener carrying the session cookie."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page = opener.open(f"http://127.0.0.1:{PORT}/login").read().decode()
    token = csrf_token_of(page)
    data = urllib.parse.urlencode({"email": email, "password": password, "csrf_token": token}).encode()
    opener.open(f"http://127.0.0.1:{PORT}/login", data=data)
    return opener


def timed_export(opener: urllib.request.OpenerDirector, query: str) -> Transfer:
    """Stream one export to the end, counting lines and bytes."""
    started = time.perf_counter()
    lines = size = 0
    with opener.open(f"http://127.0.0.1:{PORT}/api/v1/rollouts?{query}") as response:
        while chunk := response.read(1 << 20):
            size += len(chunk)
            lines += chunk.count(b"\n")
    return Transfer(lines, size, time.perf_counter() - started)


def timed_copy(database: Database, org_id, kind: str, stored: bool = False) -> Transfer:
    """COPY (the export's own SQL, or with `stored` the rows it reads) TO STDOUT as the runtime role, scoped to the
    organization."""
    selection = select_rollouts(org_id, kind, TrialFilters())
    sql = stored_rows_sql(kind, selection) if stored else rollout_lines_sql(kind, selection, newest_first=False)
    sql = psycopg_sql(sql)
    started = time.perf_counter()
    lines = size = 0
    with psycopg.connect(libpq_url(database.urls.runtime)) as conn:
        conn.execute("SELECT set_config('app.current_org', %s, true)", (str(org_id),))
        with conn.cursor().copy(f"COPY ({sql}) TO STDOUT", selection.params) as copy:
            for chunk in copy:
                size += len(chunk)
                lines += bytes(chunk).count(b"\n")
    return Transfer(lines, size, time.perf_counter() - started)


def peak_rss_growth(process: psutil.Process, work: Callable[[], T]) -> tuple[float, T]:
    """Run `work()` while sampling the RSS of `process` and its children; return (growth in MB, result)."""

    def rss() -> int:
        return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)])

    baseline, peak, done = rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = work()
    finally:
        done.set()
        sampler.join()
    return max(0, peak[0] - baseline) / 2**20, result


def median_transfer(transfers: list[Transfer]) -> Transfer:
    """The transfer with the median duration."""
    return sorted(transfers, key=lambda t: t.seconds)[len(transfers) // 2]


def measure_export(database: Database, org_id, email: str, password: str) -> ExportResult:
    """Export kind=failed over HTTP and COPY it both ways, ROUNDS times in turn (a round on a cold cache is one the
    median passes over); sample the server's RSS throughout."""
    env = {**os.environ, "AGENTFORGE_DATABASE": os.environ["AGENTFORGE_DATABASE"]}
    server = start_server(env)

    def measure_round() -> Round:
        return Round(
            timed_export(opener, "kind=failed"),
            timed_copy(database, org_id, "failed"),
            timed_copy(database, org_id, "failed", stored=True),
        )

    try:
        opener = login(email, password)
        timed_export(opener, "kind=failed&environmentId=00000000-0000-0000-0000-000000000000")  # warm up
        growth, rounds = peak_rss_growth(psutil.Process(server.pid), lambda: [measure_round() for _ in range(ROUNDS)])
    finally:
        server.terminate()
        server.wait(timeout=30)
    return ExportResult(rounds, growth)


def throughput_ratio(export: Transfer, copy: Transfer) -> float:
    """The export's MB/s over COPY's (the two carry the same rollouts and steps)."""
    return (export.bytes / export.seconds) / (copy.bytes / copy.seconds)


def summary(result: ExportResult) -> list[str]:
    """Markdown lines for BENCHMARKS.md."""
    ratios = sorted(result.round_ratios())
    rows = []
    for name, t in (
        ("GET /api/v1/rollouts?kind=failed (gunicorn)", result.export),
        ("COPY (the export's query) TO STDOUT", result.copy),
        ("COPY (the same rollouts with their stored steps) TO STDOUT", result.copy_stored),
    ):
        rows.append(
            f"| {name} | {t.lines} | {t.bytes / 2**20:.1f} | {t.seconds:.2f} | {t.lines / t.seconds:,.0f} | "
            f"{t.bytes / 2**20 / t.seconds:.1f} |"
        )
    return [
        f"| transfer | lines | MB | seconds (median of {len(result.rounds)}) | lines/s | MB/s |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Export throughput (MB/s) is **{result.ratio():.2f}x** that of COPY of the same rollouts with their stored "
        f"steps (target at least 0.8x), {result.ratio('copy'):.2f}x that of COPY of the export's own query: medians "
        f"of the {len(result.rounds)} rounds' own ratios ({', '.join(f'{r:.2f}' for r in ratios)} against the "
        "stored steps), each round one export and the two COPYs back to back. Peak RSS growth of the gunicorn server "
        f"during the rounds: **{result.rss_growth_mb:.1f} MB** (target under 50 MB).",
    ]
