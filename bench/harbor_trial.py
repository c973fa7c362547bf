"""Harbor task trial overhead: the time of one trial of a Harbor task whose /app is built, in its sandbox with a disk
of its own (as root), from the copy of /app to the verifier's reward.

The task is the fixture `greet` (COPY, ENV and RUN in its Dockerfile) and the agent the oracle (its solve.sh), so
the time is the worker's own: a party and its disk, the copy of the built /app onto it (bounded: worker.files), the
oracle's one `bash` call, the tests copied in and run, the reward read back, the teardown. The build runs once,
before the timed trials. `python -m bench.harbor_trial` measures and replaces the "Harbor task trial" section of
BENCHMARKS.md; `make bench` runs it with the rest. `python -m bench.harbor_trial --against DIR` times this checkout
and the one at DIR (which must have this file) in turns, five trials each way per turn, so both see the same
machine noise, and writes the section with both medians (how a change moved the trial's time).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench.sections import write_section

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "fixtures" / "harbor_tasks" / "greet"
SECTION = "## Harbor task trial"


@dataclass(frozen=True)
class HarborTrialResult:
    """Median milliseconds per trial over `trials` trials, and how files were held."""

    trials: int
    median_ms: float
    p90_ms: float
    files: str


def trial_times(trials: int) -> list[float]:
    """Milliseconds of each of `trials` oracle trials of the task, its /app built before the first (not timed)."""
    from domain.harbor_task import read_task_archive, task_spec
    from importers.harbor_task import folder_archive
    from worker.harbor_tasks import store_tree
    from worker.sandbox import SandboxSettings
    from worker.trial import run_trial

    tree = read_task_archive(folder_archive(TASK))
    spec = task_spec(tree, TASK.name)
    with tempfile.TemporaryDirectory(prefix="bench-harbor-") as state:
        settings = replace(SandboxSettings.from_environ(), state_dir=state)
        store_tree(settings, spec["treeSha256"], tree.canonical_tar())
        times = []
        for _ in range(trials + 1):  # the first builds /app
            started = time.perf_counter()
            outcome = run_trial(
                spec, {"kind": "oracle"}, world_seed=1, seed=1, max_steps=3, timeout_s=60, sandbox=settings
            )
            times.append((time.perf_counter() - started) * 1000)
            if outcome.status != "succeeded":
                raise RuntimeError(f"the benchmark trial failed: {outcome.failure_category}: {outcome.log}")
    return times[1:]


def _result(times: list[float]) -> HarborTrialResult:
    from worker.sandbox import SandboxSettings

    ordered = sorted(times)
    files = SandboxSettings.from_environ().describe_limits().rpartition("files: ")[2] or "as the worker holds them"
    return HarborTrialResult(len(ordered), statistics.median(ordered), ordered[int(len(ordered) * 0.9) - 1], files)


def measure(trials: int = 30) -> HarborTrialResult:
    """Time `trials` trials of the task."""
    return _result(trial_times(trials))


def against(other: Path, turns: int = 12, per_turn: int = 5) -> tuple[list[float], list[float]]:
    """The ms of each trial here and in the checkout `other`, timed in turns."""
    here: list[float] = []
    there: list[float] = []
    for _ in range(turns):
        for times, checkout in ((here, ROOT), (there, other)):
            argv = [sys.executable, "-m", "bench.harbor_trial", "--times", str(per_turn)]
            done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, check=True)
            times += json.loads(done.stdout.strip().splitlines()[-1])
    return here, there


def section(result: HarborTrialResult, other: tuple[str, float] | None = None) -> list[str]:
    """The BENCHMARKS.md section for `result` (and `other`: a checkout timed in turns with it, and its median)."""
    compared = []
    if other is not None:
        where, median = other
        compared = [
            f"| median at `{where}`, timed in turns with this checkout's | {median:.1f} "
            f"({result.median_ms / median:.2f}x) |"
        ]
    return [
        SECTION,
        "",
        f"`python -m bench.harbor_trial` (also part of `make bench`): {result.trials} oracle trials of the Harbor task "
        "fixture `greet`, its /app built once before them; the time is the whole `run_trial` (a disk for the "
        "environment's side, the bounded copy of the built /app onto it, the oracle's call, the tests copied in and "
        f"run, the reward read back, the teardown). Files here: {result.files}.",
        "",
        "| | ms per trial |",
        "|---|---|",
        f"| median | {result.median_ms:.1f} |",
        f"| p90 | {result.p90_ms:.1f} |",
        *compared,
        "",
    ]


def main(args: list[str]) -> None:
    """Measure and update BENCHMARKS.md (or: `--times N` prints N trials' times; `--against DIR` compares)."""
    if args[:1] == ["--times"]:
        print(json.dumps(trial_times(int(args[1]))))
        return
    if args[:1] == ["--against"]:
        other = Path(args[1]).resolve()
        here, there = against(other)
        commit = subprocess.run(
            ["git", "-C", str(other), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        lines = section(_result(here), (commit.stdout.strip() or args[1], statistics.median(there)))
    else:
        lines = section(measure())
    write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
