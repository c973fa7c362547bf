"""A control group per sandbox: one memory, process and CPU limit for every process of a trial's party.

RLIMIT_AS and RLIMIT_NPROC count one process (or one uid): four processes of
1 GB each pass a 1 GB limit, and RLIMIT_AS counts address space that V8 and the
JVM reserve but never touch. A cgroup counts what the whole sandbox holds.

Where the worker can write them (as root), each party gets a group of its own
below the worker's own group:
* cgroup v2 (a unified hierarchy with the memory and pids controllers):
  `memory.max`, `memory.swap.max`, `pids.max`, `cpu.max`;
* cgroup v1 (the memory, pids and cpu hierarchies mounted apart, as on these
  machines): `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` where
  swap is accounted), `pids.max`, `cpu.cfs_quota_us`;
* else none: the programs keep their per-process rlimits (`Hierarchy.NONE`).

A breach shows in the group's counters: `oom_kill` (the kernel killed a
process at the memory limit) and `pids.events`' `max` (a fork was refused).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from domain.limits import MIB

ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
CPUS_PER_SANDBOX = 1  # each party's processes share one CPU's worth of time
GROUP_PREFIX = "agentforge"


@dataclass(frozen=True)
class Hierarchy:
    """Where this worker's sandbox groups go: the version (2, 1, or 0 for none) and one parent directory per
    controller (v2: one directory for all)."""

    version: int
    parents: tuple[tuple[str, Path], ...] = ()

    @property
    def words(self) -> str:
        """How sandbox limits are enforced here, for the worker's start line (docs/sandbox-and-security.md, Limits)."""
        if self.version == 2:
            return "a cgroup v2 group per sandbox (memory.max, pids.max, cpu.max)"
        if self.version == 1:
            return "a cgroup v1 group per sandbox (memory.limit_in_bytes, pids.max, cpu.cfs_quota_us)"
        return (
            "per-process rlimits only, memory as RLIMIT_DATA (no writable cgroup hierarchy: run the worker as root to "
            "get one per sandbox)"
        )

    def group(self, name: str) -> Cgroup:
        """Make a new, empty group for one party (before any of its programs runs)."""
        leaf = f"{name}-{uuid.uuid4().hex[:12]}"
        dirs: list[tuple[str, Path]] = []
        try:
            for controller, parent in self.parents:
                path = parent / leaf
                path.mkdir(mode=0o755)
                dirs.append((controller, path))
        except OSError:
            Cgroup(self.version, tuple(dirs)).remove()
            raise
        return Cgroup(self.version, tuple(dirs))


NONE = Hierarchy(0)


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """Controller → this process's group path, from /proc/self/cgroup ("" names the v2 hierarchy)."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _usable(directory: Path) -> bool:
    """True when a group can be made (and removed) under `directory`."""
    probe = directory / f".probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _v2_parent(root: Path, own: str) -> Path | None:
    """The directory under which v2 sandbox groups go, with memory, pids and cpu enabled for them; None when the
    unified hierarchy lacks those controllers or cannot be written.

    A v2 group with processes may not enable controllers for its children, so this process first moves into a
    leaf of its own (`<own>/agentforge-worker-<pid>`) when its group holds processes, as systemd's delegation does.
    """
    own_dir = root / own.lstrip("/")
    try:
        available = set((own_dir / "cgroup.controllers").read_text().split())
    except OSError:
        return None
    if not {"memory", "pids"} <= available:
        return None
    wanted = [c for c in ("memory", "pids", "cpu") if c in available]
    base = own_dir / GROUP_PREFIX
    try:
        if own != "/" and (own_dir / "cgroup.procs").read_text().split():
            leaf = own_dir / f"{GROUP_PREFIX}-worker-{os.getpid()}"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
        (own_dir / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
        base.mkdir(exist_ok=True)
        (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
    except OSError:
        return None
    return base if _usable(base) else None


def detect(root: Path = ROOT, proc_cgroup: str | None = None) -> Hierarchy:
    """The hierarchy this process can make sandbox groups in: v2 where it has memory and pids, else v1 where memory
    and pids are mounted and writable, else none."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return NONE
    own = _own_paths(proc_cgroup)
    unified = root if (root / "cgroup.controllers").exists() else root / "unified"
    if "" in own and (v2 := _v2_parent(unified, own[""])):
        return Hierarchy(2, (("", v2),))
    parents: list[tuple[str, Path]] = []
    for controller in ("memory", "pids", "cpu"):
        mount = root / controller
        if controller not in own or not (mount / "cgroup.procs").exists():
            if controller == "cpu":
                continue  # CPU time stays bounded by RLIMIT_CPU per process and the trial's time budget
            return NONE
        base = mount / own[controller].lstrip("/") / GROUP_PREFIX
        try:
            base.mkdir(mode=0o755, exist_ok=True)
        except OSError:
            return NONE
        if not _usable(base):
            return NONE
        parents.append((controller, base))
    return Hierarchy(1, tuple(parents))


@dataclass(frozen=True)
class Cgroup:
    """One party's group: its directory in each controller's hierarchy (one directory in v2)."""

    version: int
    dirs: tuple[tuple[str, Path], ...]

    def _dir(self, controller: str) -> Path | None:
        for name, path in self.dirs:
            if name == controller or self.version == 2:
                return path
        return None

    def _write(self, controller: str, name: str, value: str) -> bool:
        path = self._dir(controller)
        if path is None or not (path / name).exists():
            return False
        (path / name).write_text(value)
        return True

    def limit(self, limits: dict[str, int]) -> None:
        """Hold the whole group to `memoryMb` (swap included), `processes` and one CPU's worth of time."""
        memory, pids = str(limits["memoryMb"] * MIB), str(limits["processes"])
        quota = str(CPUS_PER_SANDBOX * CPU_PERIOD_US)
        if self.version == 2:
            self._write("memory", "memory.max", memory)
            self._write("memory", "memory.swap.max", "0")
            self._write("pids", "pids.max", pids)
            self._write("cpu", "cpu.max", f"{quota} {CPU_PERIOD_US}")
            return
        # v1: memsw (memory + swap) may only be set at or above the memory limit, so the order depends on the way.
        if not self._write("memory", "memory.limit_in_bytes", memory):
            raise OSError("the memory group has no memory.limit_in_bytes")
        with contextlib.suppress(OSError):
            self._write("memory", "memory.memsw.limit_in_bytes", memory)
        self._write("pids", "pids.max", pids)
        self._write("cpu", "cpu.cfs_period_us", str(CPU_PERIOD_US))
        self._write("cpu", "cpu.cfs_quota_us", quota)

    @property
    def procs_files(self) -> list[str]:
        """The `cgroup.procs` files a process writes its pid to to join the group (one per hierarchy)."""
        return [str(path / "cgroup.procs") for _, path in self.dirs]

    def _counter(self, controller: str, name: str, key: str) -> int:
        path = self._dir(controller)
        if path is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for line in (path / name).read_text().splitlines():
                field, _, value = line.partition(" ")
                if field == key:
                    return int(value)
        return 0

    def breach(self) -> str | None:
        """The limit key the group went past ("memoryMb", "processes"), or None."""
        events = "memory.events" if self.version == 2 else "memory.oom_control"
        if self._counter("memory", events, "oom_kill") > 0:
            return "memoryMb"
        if self._counter("pids", "pids.events", "max") > 0:
            return "processes"
        return None

    def pids(self) -> set[int]:
        """Every process in the group now."""
        found: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(pid) for pid in Path(procs).read_text().split())
        return found

    def remove(self) -> None:
        """Kill every process of the group (until none is left, so nothing forks away) and remove it."""
        deadline = time.monotonic() + 5
        while (alive := self.pids()) and time.monotonic() < deadline:
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)
        for _, path in self.dirs:
            for _ in range(500):  # a killed process leaves its group a moment after the signal
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.002)
