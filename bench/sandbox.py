"""Sandbox overhead: the extra time per trial to start a command agent in its sandbox rather than directly.

Runs the same trial (a command agent that finishes at once, in the built-in
admin-console) three ways, interleaved so each sees the same machine noise:
in a bubblewrap sandbox with a network of its own (a network namespace wired
to slirp4netns) and, as root, a control group of its own; in one without a
network; and bare (the program started directly: no launcher, control group,
namespaces or limits). It reports the medians and the overhead of the first
over the last. `python -m bench.sandbox` measures and replaces the "Sandbox
overhead" section of BENCHMARKS.md; `make bench` runs it with the rest.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from bench.sections import write_section
from worker.sandbox import Launch, SandboxSettings, TrialSandbox
from worker.trial import run_trial

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "bench" / "finish_agent.py"
TARGET_MS = 60.0
SECTION = "## Sandbox overhead"
WAYS = ("networked", "offline", "bare")
BUILTIN = {"environment": "admin-console"}


@dataclass(frozen=True)
class SandboxResult:
    """Median milliseconds per trial each way, over `trials` trials each, and how limits were enforced."""

    trials: int
    networked_ms: float
    offline_ms: float
    bare_ms: float
    limits: str

    @property
    def overhead_ms(self) -> float:
        """Median extra milliseconds per trial a networked sandbox costs over a bare program."""
        return self.networked_ms - self.bare_ms


def _bare_launch(self: TrialSandbox, party: str, argv: list[str], **options) -> Launch:
    """The program as it is, with nothing around it: what a trial costs without any sandbox."""
    from domain.limits import resolve_limits

    return Launch(list(argv), {"PATH": "/usr/bin:/bin"}, None, resolve_limits(None), "/tmp")


def _trial_ms(way: str, settings: SandboxSettings) -> float:
    agent = {"kind": "command", "argv": [sys.executable, str(AGENT)], "network": way == "networked"}
    started = time.perf_counter()
    if way == "bare":
        with mock.patch.object(TrialSandbox, "launch", _bare_launch):
            outcome = run_trial(BUILTIN, agent, world_seed=1, seed=1, max_steps=3, timeout_s=30, sandbox=settings)
    else:
        outcome = run_trial(BUILTIN, agent, world_seed=1, seed=1, max_steps=3, timeout_s=30, sandbox=settings)
    elapsed = (time.perf_counter() - started) * 1000
    if outcome.failure_category not in (None, "gave_up"):
        raise RuntimeError(f"the benchmark trial failed ({way}): {outcome.failure_category}: {outcome.log}")
    return elapsed


def measure(trials: int = 40) -> SandboxResult:
    """Time `trials` trials each way, interleaved so all see the same machine noise."""
    settings = SandboxSettings(mode="bwrap")
    problem = settings.problem(network=True)
    if problem:
        raise RuntimeError(problem)
    for way in WAYS:  # warm the interpreter's caches
        _trial_ms(way, settings)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(trials):
        for way in WAYS:
            times[way].append(_trial_ms(way, settings))
    networked, offline, bare = (statistics.median(times[way]) for way in WAYS)
    return SandboxResult(trials, networked, offline, bare, settings.describe_limits())


def section(result: SandboxResult) -> list[str]:
    """The BENCHMARKS.md section for `result`."""
    met = "met" if result.overhead_ms <= TARGET_MS else "**not met**"
    return [
        SECTION,
        "",
        f"`python -m bench.sandbox` (also part of `make bench`): {result.trials} trials each way, interleaved, of a "
        "command agent that finishes at once in the built-in admin-console; the time is the whole `run_trial` "
        "(start the program, task, answer, score, tear down). Limits here: " + result.limits + ".",
        "",
        "| | median per trial (ms) |",
        "|---|---|",
        f"| sandboxed, with a network of its own (slirp4netns) | {result.networked_ms:.1f} |",
        f"| sandboxed, no network | {result.offline_ms:.1f} |",
        f"| bare program (no launcher, namespaces, control group or limits) | {result.bare_ms:.1f} |",
        f"| overhead of the networked sandbox (target at most {TARGET_MS:.0f} ms) | {result.overhead_ms:.1f} ({met}) |",
        "",
    ]


def main() -> None:
    """Measure and update BENCHMARKS.md."""
    lines = section(measure())
    write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
