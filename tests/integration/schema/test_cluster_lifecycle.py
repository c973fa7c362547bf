"""The embedded cluster from the operator's side: processes started together on a cold data directory all
come up, and the cluster stops once the last process using it exits, however it was asked to stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from domain.secret_env import SecretsKey
from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.fault]


@pytest.fixture
def data_dir(tmp_path) -> Iterator[Path]:
    """A brand-new AGENTFORGE_DATA_DIR; whatever cluster a failed test leaves there is stopped afterwards."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("DATABASE_URL is set: these tests are about the embedded cluster's start and stop")
    path = tmp_path / "pgdata"
    yield path
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.communicate()
    for process in postgres_processes(path):
        process.terminate()


def process_env(data_dir: Path) -> dict[str, str]:
    """The environment of an operator's process using the embedded cluster in `data_dir`."""
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "ADMIN_DATABASE_URL")}
    env.update(
        AGENTFORGE_DATA_DIR=str(data_dir),
        SECRET_KEY="test",
        AGENTFORGE_SECRETS_KEY=SECRETS_KEY,
        AGENTFORGE_SANDBOX="none",
        PYTHONUNBUFFERED="1",
    )
    return env


SECRETS_KEY = SecretsKey.generate()


STARTED: list[subprocess.Popen] = []


def interruptible() -> None:
    """Let the child take SIGINT as a terminal's Ctrl-C (a suite started in the background inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def flask(data_dir: Path, *args: str) -> subprocess.Popen:
    """Start `flask --app app ARGS…` against the embedded cluster in `data_dir`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "app", *args],
        cwd=ROOT,
        env=process_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
    )
    STARTED.append(process)
    return process


def postgres_processes(data_dir: Path) -> list[psutil.Process]:
    """The postgres processes serving `data_dir` (none once the cluster has stopped)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "postgres" and str(data_dir.resolve()) in cmdline:
            found.append(process)
    return found


def handle_pids(data_dir: Path) -> list[int]:
    """The pids pgserver's handle file says are using the cluster."""
    path = data_dir / ".handle_pids.json"
    text = path.read_text().strip() if path.exists() else ""
    return json.loads(text) if text else []


def wait_until(predicate, timeout: float, what: str) -> None:
    """Poll `predicate` until it holds, or fail saying `what` did not happen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def assert_cluster_stopped(data_dir: Path, output: str = "", within: float = 10.0) -> None:
    """No postgres process for `data_dir` and no pid left in its handle file, within `within` seconds.

    `output` (what the last process printed) is shown when the cluster did not stop cleanly.
    """
    wait_until(lambda: not postgres_processes(data_dir), within, f"the cluster in {data_dir} stopping")
    assert handle_pids(data_dir) == [], output
    # pgserver kills a postmaster that pg_ctl could not stop, which leaves postmaster.pid behind; the next
    # start sees that its pid no longer runs and starts afresh, so only a live pid there would be stale.
    leftover = data_dir / "postmaster.pid"
    if leftover.exists():
        assert not serves(int(leftover.read_text().split()[0]), data_dir), output


def serves(pid: int, data_dir: Path) -> bool:
    """Whether `pid` is a live postgres of `data_dir` (not a zombie, not a reused pid of another program)."""
    try:
        process = psutil.Process(pid)
        return (
            process.status() != psutil.STATUS_ZOMBIE
            and process.name() == "postgres"
            and str(data_dir.resolve()) in process.cmdline()
        )
    except psutil.Error:
        return False


def test_five_cold_starts_of_three_processes_at_once_all_come_up(data_dir):
    for round_number in range(1, 6):  # round 1 on a brand-new directory, then on the stopped cluster
        processes = {
            "init-db": flask(data_dir, "init-db"),
            "worker": flask(data_dir, "worker", "--until-idle", "--poll-seconds", "0.2"),
            "create-org": flask(data_dir, "create-org", f"Round {round_number}"),
        }
        outputs = {name: process.communicate(timeout=180)[0] for name, process in processes.items()}
        for name, process in processes.items():
            assert process.returncode == 0, f"round {round_number}, {name}:\n{outputs[name]}"
        assert "Database is at the newest schema." in outputs["init-db"]
        assert "Worker stopped after 0 runs." in outputs["worker"]
        assert f"Created organization Round {round_number}" in outputs["create-org"]
        assert_cluster_stopped(data_dir)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_web_and_worker(data_dir: Path) -> tuple[subprocess.Popen, subprocess.Popen]:
    """`flask run` and a `worker` started together on a cold cluster, returned once both serve."""
    port = free_port()
    web = flask(data_dir, "run", "--port", str(port))
    worker = flask(data_dir, "worker", "--poll-seconds", "0.2")

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(healthy, 120, "the web process answering /healthz")
    wait_until(lambda: len(handle_pids(data_dir)) == 2, 120, "both processes joining the cluster")
    assert sorted(handle_pids(data_dir)) == sorted([web.pid, worker.pid])
    return web, worker


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_cluster_stops_when_the_last_process_is_told_to_stop(data_dir, stop):
    web, worker = start_web_and_worker(data_dir)

    web.send_signal(stop)
    web.communicate(timeout=30)
    assert postgres_processes(data_dir), "the cluster stopped while the worker still uses it"
    assert handle_pids(data_dir) == [worker.pid]

    worker.send_signal(stop)
    output = worker.communicate(timeout=30)[0]
    assert worker.returncode == 0 and "Worker stopped after 0 runs." in output
    assert_cluster_stopped(data_dir, output)


def test_a_killed_process_does_not_keep_the_cluster_alive(data_dir):
    web, worker = start_web_and_worker(data_dir)

    worker.kill()  # SIGKILL: no chance to leave the handle file
    worker.communicate(timeout=30)
    web.send_signal(signal.SIGTERM)
    assert_cluster_stopped(data_dir, web.communicate(timeout=30)[0])
