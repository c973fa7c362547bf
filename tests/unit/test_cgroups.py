"""Control groups per sandbox, on a hierarchy laid out as the kernel lays it out (in a temporary directory).

The real cgroup v1 hierarchy of these machines is exercised by the sandbox tests (a memory bomb, a fork bomb);
these check what the worker writes where on both versions, v2 included, which these machines do not mount with the
memory controller.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from worker import cgroups
from worker.sandbox import SandboxSettings

REAL = SandboxSettings.from_environ().hierarchy

LIMITS = {"memoryMb": 512, "processes": 10}


def kernel_files(directory: Path, names: list[str]) -> None:
    """The files the kernel would make in a new group (a plain directory has none)."""
    for name in names:
        (directory / name).write_text("")


def test_v2_delegates_controllers_moves_the_worker_into_a_leaf_and_writes_each_limit(tmp_path):
    root = tmp_path / "unified"
    own = root / "system.slice" / "agentforge.service"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (own / "cgroup.controllers").write_text("cpu io memory pids\n")
    (own / "cgroup.procs").write_text("4242\n")  # the worker's group holds processes: it moves into a leaf first
    (own / "cgroup.subtree_control").write_text("")
    hierarchy = cgroups.detect(tmp_path, "0::/system.slice/agentforge.service\n")
    assert hierarchy.version == 2 and "cgroup v2" in hierarchy.words
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert list(own.glob("agentforge-worker-*/cgroup.procs"))  # the worker's own leaf
    group = hierarchy.group("agent")
    (directory,) = {path for _, path in group.dirs}
    assert directory.parent == own / "agentforge"
    kernel_files(directory, ["memory.max", "memory.swap.max", "pids.max", "cpu.max", "cgroup.procs"])
    group.limit(LIMITS)
    written = {name: (directory / name).read_text() for name in ("memory.max", "memory.swap.max", "pids.max")}
    assert written == {"memory.max": str(512 * 1024 * 1024), "memory.swap.max": "0", "pids.max": "10"}
    assert (directory / "cpu.max").read_text() == "100000 100000"
    assert group.procs_files == [str(directory / "cgroup.procs")]
    (directory / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.breach() == "memoryMb"


def test_v1_writes_memory_swap_pids_and_cpu_each_in_its_own_hierarchy(tmp_path):
    for controller in ("memory", "pids", "cpu"):
        (tmp_path / controller / "jobs").mkdir(parents=True)
        (tmp_path / controller / "cgroup.procs").write_text("")
    proc = "9:pids:/jobs\n4:memory:/jobs\n2:cpu,cpuacct:/jobs\n0::/\n"
    hierarchy = cgroups.detect(tmp_path, proc)
    assert hierarchy.version == 1
    group = hierarchy.group("environment")
    dirs = dict(group.dirs)
    assert {name: path.parent for name, path in dirs.items()} == {
        name: tmp_path / name / "jobs" / "agentforge" for name in ("memory", "pids", "cpu")
    }
    kernel_files(dirs["memory"], ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.oom_control"])
    kernel_files(dirs["pids"], ["pids.max", "pids.events"])
    kernel_files(dirs["cpu"], ["cpu.cfs_period_us", "cpu.cfs_quota_us"])
    group.limit(LIMITS)
    assert (dirs["memory"] / "memory.limit_in_bytes").read_text() == str(512 * 1024 * 1024)
    assert (dirs["memory"] / "memory.memsw.limit_in_bytes").read_text() == str(512 * 1024 * 1024)
    assert (dirs["pids"] / "pids.max").read_text() == "10"
    assert (dirs["cpu"] / "cpu.cfs_quota_us").read_text() == "100000"
    assert group.breach() is None
    (dirs["pids"] / "pids.events").write_text("max 2\n")
    assert group.breach() == "processes"


def test_without_a_writable_hierarchy_limits_stay_per_process(tmp_path):
    hierarchy = cgroups.detect(tmp_path, "0::/\n")  # neither v2 controllers nor v1 mounts
    assert hierarchy.version == 0
    assert "per-process rlimits only" in hierarchy.words


@pytest.mark.skipif(not REAL.version, reason="no writable cgroup hierarchy here (the worker is not root)")
def test_a_real_group_is_removed_with_every_process_in_it_killed_even_one_that_left_its_session():
    group = REAL.group("agent")
    sleepers = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(3)]
    for procs in group.procs_files:
        for sleeper in sleepers:
            Path(procs).write_text(str(sleeper.pid))
    assert group.pids() == {sleeper.pid for sleeper in sleepers}
    group.remove()
    assert [sleeper.wait(timeout=5) for sleeper in sleepers] == [-9, -9, -9]
    assert not any(path.exists() for _, path in group.dirs)
