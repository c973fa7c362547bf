"""A sandbox's disk, attacked: a tenant program that fills its workspace, makes empty files by the thousand, writes
through the log folders bound into it, or ships a Harbor task whose /app is larger than its disk; and a worker killed
before it could unmount. Before worker/disk.py each
file was held to fileSizeMb and nothing held their number or their sum: a command agent writing 64 MB files in a
loop filled the worker's disk, and the PostgreSQL beside it, for every organization."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from domain.limits import resolve_limits
from tests.integration.sandbox.test_sandbox import BWRAP_PROBLEM, needs_bwrap
from tests.integration.sandbox.test_sandbox_trust import BUILTIN, probe, report_of
from tests.paths import ROOT
from worker import disk
from worker.harbor_tasks import copy_app
from worker.sandbox import Bind, LimitExceeded, SandboxSettings, TrialSandbox, run_bounded, sweep_left_behind
from worker.trial import run_trial

pytestmark = pytest.mark.slow  # sandboxed programs; and the disks mounted are counted, so never beside another test

needs_disk = pytest.mark.skipif(
    BWRAP_PROBLEM is not None or not SandboxSettings.from_environ().disk_limited,
    reason="the worker cannot mount a disk per sandbox here (not root): each file is held to fileSizeMb alone, as the "
    "worker's start line and the docs say",
)


def mounted_disks(settings: SandboxSettings | None = None) -> list[str]:
    """The mount points of the sandbox disks mounted now (this process's view, the worker's)."""
    state_dir = (settings or SandboxSettings.from_environ()).state_dir
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [point for point in points if point.startswith(state_dir + "/")]


@pytest.mark.fault
@needs_disk
@pytest.mark.parametrize(
    ("what", "disk_mb", "fewest", "most"),
    [
        ("bytes", 16, 8, 16),  # 1 MB files: what 16 MB hold after the file system's own blocks
        ("files", 4, 100, 4096),  # empty files: the inodes of a 4 MB disk, where the host's are millions
    ],
)
def test_an_agent_filling_its_workspace_gets_no_space_at_its_disk_limit(what, disk_mb, fewest, most):
    agent = probe("fill", what, diskMb=disk_mb)
    outcome = run_trial(BUILTIN, agent, world_seed=1, seed=1, max_steps=3, timeout_s=60)
    seen = report_of(outcome.log)
    assert seen["error"] == "No space left on device", seen
    assert fewest <= seen["made"] <= most, seen
    assert mounted_disks() == []  # unmounted with the trial, its image gone with it


@pytest.mark.fault
@needs_disk
def test_an_agent_that_dies_of_a_full_disk_ends_the_trial_as_resource_limit_naming_the_disk():
    agent = probe("fill", "bytes", "crash", diskMb=16)
    outcome = run_trial(BUILTIN, agent, world_seed=1, seed=1, max_steps=3, timeout_s=60)
    assert (outcome.status, outcome.failure_category) == ("failed", "resource_limit"), outcome.log
    assert "agent exceeded the limit of 16 MB of disk" in outcome.log


@pytest.mark.fault
@needs_disk
def test_the_log_folders_bound_into_a_sandbox_share_its_disk():
    # Harbor's /logs/agent and /logs/verifier are folders beside the workspace: written through them, the host's
    # disk was reachable again. Both count toward the same diskMb.
    sandbox = TrialSandbox(SandboxSettings.from_environ(), seed=1, trial=1)
    try:
        party = sandbox.party("environment", limits={"diskMb": 16})
        logs = party.own_dir("logs", writable=True)
        write = "head -c 10485760 /dev/zero > /logs/a && head -c 10485760 /dev/zero > b"
        launch = sandbox.launch(
            "environment", ["sh", "-c", write], binds=(Bind(logs, "/logs", writable=True),), limits={"diskMb": 16}
        )
        with pytest.raises(LimitExceeded, match=r"exceeded the limit of 16 MB of disk: .*No space left on device"):
            run_bounded(launch, timeout=30)
        assert os.path.getsize(logs / "a") == 10 << 20
    finally:
        sandbox.close()
    assert mounted_disks() == []


@pytest.mark.fault
@needs_disk
def test_each_party_of_a_trial_has_a_disk_of_its_own_size():
    sandbox = TrialSandbox(SandboxSettings.from_environ(), seed=1, trial=1)
    sizes = "import os; s = os.statvfs('.'); print(s.f_blocks * s.f_frsize >> 20)"
    try:
        agent = run_bounded(sandbox.launch("agent", [sys.executable, "-c", sizes], limits={"diskMb": 64}), timeout=30)
        environment = run_bounded(sandbox.launch("environment", [sys.executable, "-c", sizes]), timeout=30)
        assert len(mounted_disks()) == 2
    finally:
        sandbox.close()
    assert 56 <= int(agent.stdout) <= 64, agent.stdout
    default = resolve_limits(None)["diskMb"]
    assert default * 0.9 <= int(environment.stdout) <= default, environment.stdout
    assert mounted_disks() == []


@pytest.mark.leak
@needs_disk
def test_a_disk_starts_empty_whatever_the_sandbox_before_it_of_the_same_size_wrote():
    # Every disk of a size is a copy of one empty image: what one tenant writes must never reach the next one's.
    settings = SandboxSettings.from_environ()
    write = "echo secret-of-org-a > note && mkdir -p deep/er && cp note deep/er/ && sync"
    look = "find .; df --output=used . | tail -1"
    seen = []
    for argv in (["sh", "-c", write], ["sh", "-c", look]):
        sandbox = TrialSandbox(settings, seed=1, trial=1)
        try:
            seen.append(run_bounded(sandbox.launch("agent", argv, limits={"diskMb": 12}), timeout=30))
        finally:
            sandbox.close()
    assert seen[0].returncode == 0, seen[0].stderr
    *found, used = seen[1].stdout.split()
    assert found == ["."], seen[1].stdout  # nothing in the workspace
    assert int(used) < 1024, seen[1].stdout  # kB used on the disk: the empty file system's own blocks


@pytest.mark.fault
@needs_disk
def test_a_harbor_task_whose_app_does_not_fit_its_disk_is_refused_naming_the_limit(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "data.bin").write_bytes(os.urandom(4 << 20))
    sandbox = TrialSandbox(SandboxSettings.from_environ(), seed=1, trial=1)
    try:
        party = sandbox.party("environment", workspace_at="/app", limits={"diskMb": 2})
        with pytest.raises(LimitExceeded, match=r"^the task's /app did not fit the limit of 2 MB of disk$"):
            copy_app(app, party)
    finally:
        sandbox.close()
    assert mounted_disks() == []


@needs_bwrap
def test_where_no_disk_can_be_mounted_the_start_line_says_each_file_is_held_alone(monkeypatch, tmp_path):
    # A worker that is not root, or a container without loop devices: mount(8) refuses, and the worker says so.
    def refused(path: Path, size_mb: int) -> None:
        raise disk.MountFailed("mount failed: only root can do that")

    monkeypatch.setattr(disk, "mount", refused)
    disk.mountable.cache_clear()
    try:
        settings = SandboxSettings(mode="bwrap", state_dir=str(tmp_path / "state"))
        reason = "mount failed: only root can do that" if os.geteuid() == 0 else "the worker is not root"
        assert settings.describe_limits().endswith(f"; files: fileSizeMb per file only: {reason}")
        assert settings.disk_limited is False
        sandbox = TrialSandbox(settings, seed=1, trial=1)
        try:
            finished = run_bounded(sandbox.launch("agent", ["sh", "-c", "echo ran"]), timeout=30)
            assert mounted_disks(settings) == []  # trials still run, each file held to fileSizeMb
        finally:
            sandbox.close()
        assert finished.stdout == "ran\n"
    finally:
        disk.mountable.cache_clear()


@pytest.mark.fault
@needs_disk
def test_what_a_killed_worker_left_is_swept_at_the_next_start_and_a_live_sandbox_is_not():
    # A worker killed mid-trial (SIGKILL, out of memory) never unmounts: its disk would hold its space until a reboot.
    settings = SandboxSettings.from_environ()
    dying = (
        "import os, signal; from worker.sandbox import SandboxSettings, TrialSandbox\n"
        "sandbox = TrialSandbox(SandboxSettings.from_environ(), seed=1, trial=1)\n"
        "sandbox.party('agent', limits={'diskMb': 8}); (sandbox.party('agent').workspace / 'kept').write_text('x')\n"
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    killed = subprocess.run([sys.executable, "-c", dying], cwd=ROOT, capture_output=True, text=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (left,) = mounted_disks()
    live = TrialSandbox(settings, seed=2, trial=2)
    try:
        live_dir = live.party("environment", limits={"diskMb": 8}).host_dir
        assert sweep_left_behind(settings) == 1
        assert mounted_disks() == [str(live_dir)] and not os.path.exists(left)
        assert sweep_left_behind(settings) == 0
    finally:
        live.close()
    assert mounted_disks() == []


@needs_disk
def test_a_state_directory_that_does_not_exist_yet_still_gets_disks(tmp_path):
    # Asked before any sandbox had made it, the answer was "no" (mkdtemp failed) and stayed so: it is tried once.
    settings = SandboxSettings(state_dir=str(tmp_path / "made" / "later"))
    assert settings.disk_problem() is None
    assert settings.describe_limits().endswith("; files: a disk of diskMb per sandbox")
