"""Harbor tasks written as an attacker would, against the real worker, sandbox and disks: a build that leaves sparse
files far larger than its disk, one that leaves a tree 100,000 folders deep, a verifier that asks a million seconds,
a build slower than its timeout over many RUN lines, a reward file of 48 kB, and one organization's build offered to
another. Each ends as the task's limits and the operator's ceiling say, and the worker's disk keeps nothing of it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import ApiClient
from tests.helpers import parse
from tests.integration.harbor_tasks.test_task_runs import bash_agent, outcome, run_task, trial_of
from worker.loop import WorkerSettings
from worker.sandbox import SandboxSettings

pytestmark = [pytest.mark.slow, pytest.mark.fault]  # hostile builds and verifiers, run by the real worker

MB = 1024 * 1024


def task(folder: Path, *, dockerfile: str = "", toml: str = "", test_sh: str = "echo 1 > /logs/verifier/reward.txt"):
    """A Harbor task folder: an instruction, task.toml, environment/Dockerfile, tests/test.sh, a solution."""
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "solution").mkdir()
    (folder / "instruction.md").write_text("Do nothing in particular.\n")
    (folder / "task.toml").write_text('version = "1.0"\n' + toml)
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n" + dockerfile)
    (folder / "tests" / "test.sh").write_text(f"#!/bin/bash\n{test_sh}\n")
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    return folder


def run(api: ApiClient, database, folder: Path, settings: WorkerSettings, agent=None, attempts=1, timeout_s=60):
    """Upload `folder` as a new environment of `api`'s organization, run it with the real worker; the run (API)."""
    return run_task(api, database, folder, agent or {"kind": "oracle"}, attempts, timeout_s, settings)


def log_of(api: ApiClient, trial: dict) -> str:
    """The trial's page as a reviewer reads it."""
    return parse(api.get(f"/trials/{trial['id']}").text).get_text()


@contextlib.contextmanager
def disk_of_its_own(tmp_path: Path, size_mb: int = 6144):
    """A file system of `size_mb` for the worker's state directory alone, so what the worker keeps on the host is
    what that file system uses (every disk image, cached task and staging copy lives there, unlinked or not)."""
    image, point = tmp_path / "state.img", tmp_path / "state"
    point.mkdir()
    with open(image, "wb") as made:
        made.truncate(size_mb * MB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(point)], check=True, capture_output=True)
    try:
        (point / "agentforge").mkdir()
        yield point / "agentforge"
    finally:
        subprocess.run(["umount", "--lazy", str(point)], check=False, capture_output=True)
        image.unlink()


def used(path: Path) -> int:
    seen = os.statvfs(path)
    return (seen.f_blocks - seen.f_bfree) * seen.f_frsize


class Peak:
    """The most bytes a file system used while the block ran, sampled every 20 ms."""

    def __init__(self, path: Path) -> None:
        self.path, self.most, self.done = path, used(path), threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.done.wait(0.02):
            self.most = max(self.most, used(self.path))

    def __enter__(self) -> Peak:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join()


@pytest.fixture
def root_worker(tmp_path):
    """Worker settings whose state directory is a file system of its own (the sandbox's disks need root)."""
    if os.geteuid() != 0:
        pytest.fail("these attacks need the worker as root: the disks a sandbox gets are mounted")
    with disk_of_its_own(tmp_path) as state:
        yield WorkerSettings(sandbox=replace(SandboxSettings.from_environ(), state_dir=str(state)))


def test_sparse_files_a_build_leaves_are_not_written_out_on_the_workers_disk(api, database, tmp_path, root_worker):
    """storage_mb = 32 and 40 sparse files of 60 MB in /app: 2,400 MB apparent. Before, the worker copied them byte
    for byte into its cache (the host's disk grew by 2,491 MB); now the copy is refused before a byte is written."""
    folder = task(
        tmp_path / "sparse",
        toml="[environment]\nstorage_mb = 32\n",
        dockerfile="RUN for i in $(seq 1 40); do truncate -s 60M /app/s-$i; done\n",
    )
    state = Path(root_worker.sandbox.state_dir)
    before = used(state)
    with Peak(state) as peak:
        finished = run(api, database, folder, root_worker, attempts=2)
    assert (peak.most - before) < 32 * MB + 16 * MB, f"the state directory grew by {(peak.most - before) / MB:.0f} MB"
    assert used(state) - before < 16 * MB
    first, second = trial_of(api, finished, 1), trial_of(api, finished, 2)
    assert (first["status"], first["failureCategory"]) == ("error", "resource_limit")
    said = log_of(api, first)
    assert "the built /app holds more than 32 MB (apparent size, sparse files counted whole)" in said
    assert "([environment] storage_mb: 32 MB); the worker keeps none of it" in said
    assert second["failureCategory"] == "resource_limit"  # the build is not run again by every trial
    assert "this build failed before on this worker and is not run again" in log_of(api, second)
    cached = {p.name for home in state.glob("harbor-tasks/*/*") if home.is_dir() for p in home.iterdir()}
    assert cached == {"tree", "tree.bytes", "app.failed"}


def test_a_tree_100000_folders_deep_ends_the_build_naming_the_depth_limit(api, database, tmp_path, root_worker):
    """Before, copying a 1,100-level tree out of the build died of RecursionError half-way and left the partial copy
    on the worker's disk, outside the cache's bound."""
    deep = "import os\nfor _ in range(100_000):\n    os.mkdir('d')\n    os.chdir('d')\n"
    (tmp_path / "deep").mkdir()
    folder = task(
        tmp_path / "deep" / "task",
        toml="[environment]\nstorage_mb = 2048\n",
        dockerfile="COPY deep.py /app/\nRUN python3 /app/deep.py\n",
    )
    (folder / "environment" / "deep.py").write_text(deep)
    state = Path(root_worker.sandbox.state_dir)
    before = used(state)
    trial = trial_of(api, run(api, database, folder, root_worker, timeout_s=120))
    assert used(state) - before < 16 * MB, f"the state directory kept {(used(state) - before) / MB:.0f} MB"
    leftovers = [p.name for p in state.iterdir() if p.name not in ("harbor-tasks", "uid-locks", "disk-images")]
    assert leftovers == []  # no sandbox directory, no disk image
    (home,) = (p for p in state.glob("harbor-tasks/*/*") if p.is_dir())
    assert sorted(p.name for p in home.iterdir()) == ["app.failed", "tree", "tree.bytes"]  # no staging copy
    assert (trial["status"], trial["failureCategory"]) == ("error", "resource_limit")
    assert "the built /app has folders more than 128 levels deep; the worker keeps none of it" in log_of(api, trial)


def test_a_verifier_asking_a_million_seconds_ends_within_the_operators_ceiling(api, database, tmp_path, monkeypatch):
    """[verifier] timeout_sec = 1000000 and a test.sh that sleeps 75 s, under a 20 s ceiling. Before, the trial took
    77 s (an evaluator's timeoutS of 10 and the ceiling notwithstanding) and held the worker from every other
    organization's runs."""
    monkeypatch.setenv("AGENTFORGE_MAX_TRIAL_TIMEOUT_S", "20")
    folder = task(
        tmp_path / "patient",
        toml="[verifier]\ntimeout_sec = 1000000\n",
        test_sh="sleep 75\necho 1 > /logs/verifier/reward.txt",
    )
    clock = time.monotonic()
    finished = run(api, database, folder, WorkerSettings(), timeout_s=10)
    took = time.monotonic() - clock
    assert took < 20 + 10, f"the trial took {took:.1f} s under a ceiling of 20 s"
    trial = trial_of(api, finished)
    assert outcome(trial) == ("failed", 0.0, "timeout")
    assert "timeout: the verifier (tests/test.sh) did not finish within" in log_of(api, trial)
    page = parse(api.get(f"/environments/{finished['environmentId']}").text).get_text(" ", strip=True)
    assert "verifier 20 s" in page
    assert "[verifier] timeout_sec = 1e+06 is over the most a trial may take (AGENTFORGE_MAX_TRIAL_TIMEOUT_S)" in page


def test_build_timeout_sec_bounds_the_whole_build_not_each_line(api, database, tmp_path):
    """build_timeout_sec = 8 and four `RUN sleep 7`: before, each line had 8 s and the build took 30 s."""
    folder = task(
        tmp_path / "slow-build",
        toml="[environment]\nbuild_timeout_sec = 8\n",
        dockerfile="RUN sleep 7\nRUN sleep 7\nRUN sleep 7\nRUN sleep 7\n",
    )
    clock = time.monotonic()
    finished = run(api, database, folder, WorkerSettings(), attempts=2)
    took = time.monotonic() - clock
    assert took < 8 + 10, f"two trials took {took:.1f} s with a build of 8 s at most"
    first, second = trial_of(api, finished, 1), trial_of(api, finished, 2)
    assert (first["status"], first["failureCategory"]) == ("error", "timeout")
    said = log_of(api, first)
    assert "the build ran out of its 8s (build_timeout_sec) at the Dockerfile's line 4: RUN sleep 7" in said
    assert (second["status"], second["failureCategory"]) == ("error", "timeout")
    assert "this build failed before on this worker and is not run again" in log_of(api, second)


def test_a_reward_file_of_50_kb_ends_verifier_failed_naming_the_limit(api, database, tmp_path):
    """Before, a reward.json over ~48 KB overflowed what the worker read back and ended environment_error."""
    wordy = '{"reward": 1, "pad": "%s"}' % ("x" * 50_000)
    folder = task(tmp_path / "wordy", test_sh=f"echo '{wordy}' > /logs/verifier/reward.json")
    trial = trial_of(api, run(api, database, folder, WorkerSettings()))
    assert outcome(trial) == ("failed", 0.0, "verifier_failed")
    assert "reward.json is over 32 KB, the most a reward file may hold" in log_of(api, trial)


def test_one_organizations_build_is_never_anothers(api, database, tmp_path, make_member, app):
    """The build leaves a secret of its own making in /app. Before, the second organization's trial started from the
    first's build (its files, their times, its uid)."""
    folder = task(tmp_path / "shared", dockerfile="RUN head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \\n' > token\n")
    other = ApiClient(app.test_client(), make_member("eve@globex.test", "Globex Research"))
    settings = WorkerSettings()
    tokens = []
    for who in (api, other):
        trial = trial_of(who, run(who, database, folder, settings, agent=bash_agent("cat /app/token")))
        (call,) = [s for s in trial["steps"] if s.get("toolCalls")]
        tokens.append(call["observation"])
    assert tokens[0].endswith("[exit code 0]") and tokens[1].endswith("[exit code 0]"), tokens
    assert tokens[0] != tokens[1], tokens
