"""Harbor task uploads under attack: another organization's pages while three gzip bombs are uploaded at once, and
the serving process's memory.

One organization's member uploads, from three clients without pause, gzip bombs (each a valid task and 640 MB of
zeros, 0.62 MB compressed: in turn one whose entry announces its 640 MB in its header, and one whose zeros follow
the archive's end, which the server inflates up to the task's bound before refusing) to a gunicorn server (one
worker, four threads: the bombs and the pages share one process). A member of the other organization requests its
`/environments` and an environment's page, quiet and under the bombs, in interleaved rounds, so both see the same
machine. The process's peak RSS growth (gunicorn and its worker) is sampled while the bombs run.
`python -m bench.uploads` measures on the app's database (the embedded `agentforge_bench` unless configured
otherwise) and replaces the "Uploads under attack" section and its target rows of BENCHMARKS.md; `make bench` runs
it with the rest.
"""

from __future__ import annotations

import os
import re
import tarfile
import threading
import time
import urllib.error
import urllib.request
import uuid
import zlib
from dataclasses import dataclass

os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")

import psutil
from sqlalchemy import text

from bench.export import PORT, login, peak_rss_growth, start_server
from bench.generate import BENCH_PASSWORD, ORGS, ensure_catalog
from bench.pages import Timing, percentile_timing
from bench.sections import BENCHMARKS, replace_section
from db.session import Database
from writes.environments import create_environment
from writes.tokens import create_token

BOMB_MB = 640
ROUNDS = 3
REQUESTS = int(os.environ.get("BENCH_UPLOAD_REQUESTS", "40"))  # page requests per round, each way
ATTACKERS = 3
RATIO_TARGET = 1.5
RSS_TARGET_MB = 64.0
SECTION = "## Uploads under attack"
TASK = (("t/instruction.md", b"Do it."), ("t/tests/test.sh", b"echo 1 > /logs/verifier/reward.txt\n"))
BOMB_TARGET = "bench-bomb-target"


def _tar_entry(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(tarfile.USTAR_FORMAT)


def _gzipped(head: bytes, zeros_mb: int, tail: bytes) -> bytes:
    """`head`, `zeros_mb` MB of zeros and `tail`, gzip-compressed as they are made: the zeros are never whole."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS, 9, zlib.Z_RLE)  # RLE: as small, twice as fast
    out = [deflate.compress(head)]
    block = bytes(1024 * 1024)
    out += [deflate.compress(block) for _ in range(zeros_mb)]
    out += [deflate.compress(tail), deflate.flush()]
    return b"".join(out)


def _task_entries() -> bytes:
    return b"".join(_tar_entry(name, len(data)) + data + bytes(-len(data) % 512) for name, data in TASK)


def task_bomb(zeros_mb: int = BOMB_MB) -> bytes:
    """The issue's bomb: a valid task and one entry of `zeros_mb` MB of zeros (its header says how many)."""
    return _gzipped(_task_entries() + _tar_entry("t/zeros", zeros_mb * 1024 * 1024), zeros_mb, bytes(1024))


def trailing_bomb(zeros_mb: int = BOMB_MB) -> bytes:
    """A valid task, the archive's end, then `zeros_mb` MB of zeros that no header announces."""
    return _gzipped(_task_entries() + bytes(1024), zeros_mb, b"")


def valid_task() -> bytes:
    return _gzipped(_task_entries() + bytes(1024), 0, b"")


@dataclass(frozen=True)
class UploadsResult:
    """The other organization's page times quiet and under the bombs, the uploads' answers and the RSS growth."""

    quiet: Timing
    attacked: Timing
    uploads: dict[int, int]  # status → how many
    rss_growth_mb: float
    trials: int  # in the database, for the record

    @property
    def p95_ratio(self) -> float:
        return self.attacked.p95 / self.quiet.p95

    @property
    def median_ratio(self) -> float:
        return self.attacked.median / self.quiet.median


def _attacker_token(database: Database) -> tuple[str, uuid.UUID]:
    """An API token of the first organization's owner, and the environment its bombs are sent to."""
    org_id, _ = ensure_catalog(database, *ORGS[0])
    with database.admin_session(org_id) as session, session.begin():
        user_id = session.execute(text("SELECT id FROM users WHERE email = :e"), {"e": ORGS[0][1]}).scalar_one()
        environment_id = session.execute(
            text("SELECT id FROM environments WHERE name = :n"), {"n": BOMB_TARGET}
        ).scalar()
        if environment_id is None:
            environment_id = create_environment(session, org_id, BOMB_TARGET, "gzip bombs land here").id
        _, token = create_token(session, org_id, user_id, f"bench-uploads-{uuid.uuid4().hex[:8]}")
    return token, environment_id


def _other_pages(database: Database) -> list[str]:
    org_id, _ = ensure_catalog(database, *ORGS[1])
    with database.session(org_id) as session:
        environment_id = session.execute(text("SELECT id FROM environments ORDER BY name LIMIT 1")).scalar_one()
    return ["/environments", f"/environments/{environment_id}"]


def _trials(database: Database) -> int:
    with database.admin_session() as session:
        return int(session.execute(text("SELECT count(*) FROM evaluation_trials")).scalar_one())


def _upload(url: str, token: str, body: bytes) -> int:
    request = urllib.request.Request(
        url, body, {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as answer:
        answer.read()
        return int(answer.code)


def measure(database: Database) -> UploadsResult:
    """Serve with gunicorn; time the other organization's pages quiet and under three attackers, ROUNDS times."""
    token, environment_id = _attacker_token(database)
    pages = _other_pages(database)
    upload_url = f"http://127.0.0.1:{PORT}/api/v1/environments/{environment_id}/versions/harbor-task"
    bombs = [task_bomb(), trailing_bomb()]
    server = start_server({**os.environ})
    try:
        reader = login(ORGS[1][1], BENCH_PASSWORD)

        def timed_pages() -> list[float]:
            samples = []
            for number in range(REQUESTS):
                started = time.perf_counter()
                with reader.open(f"http://127.0.0.1:{PORT}{pages[number % len(pages)]}") as answer:
                    answer.read()
                    assert answer.status == 200, answer.status
                samples.append((time.perf_counter() - started) * 1000)
            return samples

        timed_pages()  # warm: each page, then the upload route
        assert _upload(upload_url, token, valid_task()) in (200, 201)
        quiet: list[float] = []
        attacked: list[float] = []
        statuses: dict[int, int] = {}
        lock = threading.Lock()

        def attack(stop: threading.Event, first: int) -> None:
            sent = first
            while not stop.is_set():
                status = _upload(upload_url, token, bombs[sent % len(bombs)])
                sent += 1
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1

        def attacked_round() -> list[float]:
            stop = threading.Event()
            attackers = [threading.Thread(target=attack, args=(stop, i)) for i in range(ATTACKERS)]
            for attacker in attackers:
                attacker.start()
            time.sleep(0.5)  # the three uploads under way
            try:
                return timed_pages()
            finally:
                stop.set()
                for attacker in attackers:
                    attacker.join()

        def rounds() -> None:
            for _ in range(ROUNDS):
                quiet.extend(timed_pages())
                attacked.extend(attacked_round())

        growth, _ = peak_rss_growth(psutil.Process(server.pid), rounds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return UploadsResult(
        percentile_timing(quiet), percentile_timing(attacked), dict(sorted(statuses.items())), growth, _trials(database)
    )


def _mark(ok: bool) -> str:
    return "met" if ok else "**not met**"


def target_rows(result: UploadsResult) -> list[str]:
    """The two rows of BENCHMARKS.md's Targets table."""
    return [
        f"| another organization's page p95 during three concurrent gzip-bomb uploads within {RATIO_TARGET}x of "
        f"quiet | {result.p95_ratio:.2f}x | {_mark(result.p95_ratio <= RATIO_TARGET)} |",
        f"| serving process's peak RSS growth during three concurrent gzip-bomb uploads under {RSS_TARGET_MB:.0f} MB "
        f"| {result.rss_growth_mb:.1f} MB | {_mark(result.rss_growth_mb < RSS_TARGET_MB)} |",
    ]


def section(result: UploadsResult) -> list[str]:
    """The BENCHMARKS.md section for `result`."""
    answered = ", ".join(f"{count} answered {status}" for status, count in result.uploads.items())
    return [
        SECTION,
        "",
        f"`python -m bench.uploads` (also part of `make bench`), on a database of {result.trials:,} trials: "
        f"gunicorn (1 worker x 4 threads); {ATTACKERS} clients of one organization upload gzip bombs without pause "
        f"(a valid task and {BOMB_MB} MB of zeros, 0.62 MB compressed: in turn an entry announcing its size and "
        "zeros after the archive's end, inflated up to the task's bound of 16 MB + 512 bytes), while a member of "
        f"the other organization requests `/environments` and an environment's page, {REQUESTS} requests a round "
        f"each way, quiet and under the bombs in turn, {ROUNDS} rounds; round-trip times over HTTP, in "
        f"milliseconds. Uploads: {answered}.",
        "",
        "| the other organization's pages | median | p95 |",
        "|---|---:|---:|",
        f"| quiet | {result.quiet.median:.1f} | {result.quiet.p95:.1f} |",
        f"| under three bomb uploads | {result.attacked.median:.1f} | {result.attacked.p95:.1f} |",
        f"| ratio (target p95 at most {RATIO_TARGET}x: {_mark(result.p95_ratio <= RATIO_TARGET)}) | "
        f"{result.median_ratio:.2f}x | {result.p95_ratio:.2f}x |",
        "",
        f"Peak RSS growth of the gunicorn server (master and worker) while the bombs ran: "
        f"**{result.rss_growth_mb:.1f} MB** (target under {RSS_TARGET_MB:.0f} MB: "
        f"{_mark(result.rss_growth_mb < RSS_TARGET_MB)}).",
        "",
    ]


def write(result: UploadsResult) -> None:
    """Replace the section and the target rows in BENCHMARKS.md (the rows are added after the table's last when
    missing)."""
    content = replace_section(BENCHMARKS.read_text() if BENCHMARKS.exists() else "", section(result))
    for row in target_rows(result):
        prefix = row.split(" within ")[0] if " within " in row else row.split(" under ")[0]
        pattern = re.compile(rf"^{re.escape(prefix)}.*$", re.M)
        if pattern.search(content):
            content = pattern.sub(lambda _, r=row: r, content)
        else:
            content = re.sub(
                r"^(\| zero errors under concurrent load \|.*)$",
                lambda m, r=row: f"{m[1]}\n{r}",
                content,
                count=1,
                flags=re.M,
            )
    BENCHMARKS.write_text(content.rstrip("\n") + "\n")


def main() -> None:
    """Measure on the app's database and update BENCHMARKS.md."""
    from app import create_app

    result = measure(create_app().extensions["agentforge_db"])
    write(result)
    print("\n".join(section(result)))


if __name__ == "__main__":
    main()
