"""Sandbox overhead: the extra time per trial to start a command agent under bubblewrap rather than directly.

Runs the same trial (a command agent that finishes at once, in the built-in
admin-console) alternately with AGENTFORGE_SANDBOX=bwrap and =none, and reports
the medians and their difference. `python -m bench.sandbox` measures and
replaces the "Sandbox overhead" section of BENCHMARKS.md; `make bench` runs it
with the rest.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from worker.sandbox import SandboxSettings
from worker.trial import run_trial

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "bench" / "finish_agent.py"
TARGET_MS = 50.0
SECTION = "## Sandbox overhead"


@dataclass(frozen=True)
class SandboxResult:
    """Median milliseconds per trial with and without the sandbox, over `trials` trials each."""

    trials: int
    sandboxed_ms: float
    direct_ms: float

    @property
    def overhead_ms(self) -> float:
        """Median extra milliseconds per trial the sandbox costs."""
        return self.sandboxed_ms - self.direct_ms


def _trial_ms(settings: SandboxSettings) -> float:
    started = time.perf_counter()
    outcome = run_trial(
        {"environment": "admin-console"},
        {"kind": "command", "argv": [sys.executable, str(AGENT)]},
        world_seed=1,
        seed=1,
        max_steps=3,
        timeout_s=30,
        sandbox=settings,
    )
    elapsed = (time.perf_counter() - started) * 1000
    if outcome.failure_category not in (None, "gave_up"):
        raise RuntimeError(f"the benchmark trial failed: {outcome.failure_category}: {outcome.log}")
    return elapsed


def measure(trials: int = 40) -> SandboxResult:
    """Time `trials` trials each way, interleaved so both see the same machine noise."""
    sandboxed, direct = SandboxSettings(mode="bwrap"), SandboxSettings(mode="none")
    problem = sandboxed.problem()
    if problem:
        raise RuntimeError(problem)
    for settings in (sandboxed, direct):  # warm the interpreter's caches
        _trial_ms(settings)
    times: dict[str, list[float]] = {"bwrap": [], "none": []}
    for _ in range(trials):
        for settings in (sandboxed, direct):
            times[settings.mode].append(_trial_ms(settings))
    return SandboxResult(trials, statistics.median(times["bwrap"]), statistics.median(times["none"]))


def section(result: SandboxResult) -> list[str]:
    """The BENCHMARKS.md section for `result`."""
    met = "met" if result.overhead_ms < TARGET_MS else "**not met**"
    return [
        SECTION,
        "",
        f"`python -m bench.sandbox` (also part of `make bench`): {result.trials} trials each way, alternating, of a "
        "command agent that finishes at once in the built-in admin-console; the time is the whole `run_trial` "
        "(start the program, task, answer, score, tear down).",
        "",
        "| | median per trial (ms) |",
        "|---|---|",
        f"| `AGENTFORGE_SANDBOX=bwrap` | {result.sandboxed_ms:.1f} |",
        f"| `AGENTFORGE_SANDBOX=none` | {result.direct_ms:.1f} |",
        f"| overhead (target under {TARGET_MS:.0f} ms) | {result.overhead_ms:.1f} ({met}) |",
        "",
    ]


def replace_section(text: str, lines: list[str]) -> str:
    """`text` with its sandbox section replaced by `lines` (appended when it has none)."""
    block = "\n".join(lines)
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        return pattern.sub(lambda _: block + "\n", text)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def main() -> None:
    """Measure and update BENCHMARKS.md."""
    lines = section(measure())
    path = ROOT / "BENCHMARKS.md"
    path.write_text(replace_section(path.read_text() if path.exists() else "", lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
