"""The words of a task-level comparison: verdicts, deltas without a negative zero, the one-task note and warnings.

The figures come from domain.task_stats; this module only words them, in the style of domain.comparison.verdict:
the method named, the tasks read, the power counted in tasks, and a delta coloured only when a test is behind it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from domain.comparison import DETECTABLE, Test
from domain.task_stats import TaskEstimate, TaskTally, TaskTest, pass_at_1


def signed(value: float, places: int = 2) -> str:
    """`value` with its sign to `places` decimals, never a negative zero: a figure that rounds to zero is "0.00"."""
    text = f"{value:+.{places}f}"
    return text[1:] if float(text) == 0 else text


def delta_tone(difference: float | None, test: Test | None = None) -> str:
    """How a page colours a B - A delta: "up" or "down" only when a test behind it is significant, else "neutral"."""
    if difference is None or test is None or not test.significant or float(signed(difference)) == 0:
        return "neutral"
    return "up" if difference > 0 else "down"


def one_task_note(estimate: TaskEstimate) -> str | None:
    """For a figure read from one task: "one task, 8 attempts: this says nothing about other tasks"; else None."""
    if not estimate.one_task:
        return None
    return (
        f"one task, {estimate.trials} attempt{'s' if estimate.trials != 1 else ''}: this says nothing about other tasks"
    )


def _p(p_value: float) -> str:
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}" if p_value < 0.01 else f"p = {p_value:.2f}"


def _tasks(count: int) -> str:
    return f"{count} task{'s' if count != 1 else ''}"


def _scope(test: TaskTest) -> str:
    if test.one_task:
        return "over trials: a side holds one task, so this says nothing about other tasks"
    if test.paired_tasks:
        return f"across {_tasks(test.paired_tasks)} both sides hold"
    return f"across {_tasks(test.tasks_a)} on A and {test.tasks_b} on B"


def _unpaired_note(test: TaskTest) -> str:
    if not test.paired_tasks or not (test.only_a or test.only_b):
        return ""
    parts = [
        f"{_tasks(len(keys))} only {side} holds" for side, keys in (("A", test.only_a), ("B", test.only_b)) if keys
    ]
    return f" Not paired: {' and '.join(parts)}."


DIFFERENT_DRAWS = (
    "Unpaired, over different draws: the sides share no task, so B - A mixes the agents' difference with the "
    "difference between their tasks."
)


def task_verdict(test: TaskTest, what: str) -> str:
    """The plain-language verdict on B - A for `what` (e.g. "pass@1"), with the method and the tasks it read; no
    negative zero, and the power in tasks when no difference is detected. Sides that share no task are said to be
    unpaired, over different draws (DIFFERENT_DRAWS)."""
    if test.difference is None or test.p_value is None:
        return f"Not enough tasks with trials on both sides to test {what}."
    interval = (
        f" (95% CI {signed(test.low)} to {signed(test.high)})" if test.low is not None and test.high is not None else ""
    )
    scope, note = _scope(test), _unpaired_note(test)
    if not test.shared_tasks:
        note += f" {DIFFERENT_DRAWS}"
    if test.significant and float(signed(test.difference)) != 0:
        direction = "higher" if test.difference > 0 else "lower"
        return (
            f"B's {what} is {direction} by {abs(test.difference):.2f}{interval}, {_p(test.p_value)}, "
            f"{test.method}, {scope}.{note}"
        )
    more = ""
    if test.power is not None:
        more = (
            f"; about {test.power.more_tasks_per_side} more tasks per side would detect a difference of {DETECTABLE:g}"
            if test.power.more_tasks_per_side
            else f"; these tasks could detect a difference of {DETECTABLE:g}, so any real one is smaller"
        )
    return (
        f"No detectable difference in {what} at these sample sizes: B - A = {signed(test.difference)}{interval}, "
        f"{_p(test.p_value)}, {test.method}, {scope}{more}.{note}"
    )


def different_datasets(dataset_a: str, dataset_b: str) -> str:
    """Why two dataset runs of different datasets get no verdict, in words."""
    return (
        f"No verdict: A ran the dataset {dataset_a} and B the dataset {dataset_b}. Their tasks are different sets, so "
        "a difference would measure the datasets as much as the agents; compare dataset runs of one dataset (the same "
        "version pairs every task)."
    )


@dataclass(frozen=True)
class TaskWarning:
    """A warning the compare page and API show: a stable code and its message."""

    code: str
    message: str


def task_warnings(a: Mapping[str, TaskTally], b: Mapping[str, TaskTally]) -> list[TaskWarning]:
    """The warnings the tallies alone justify: `one-task` (a side holds a single task) and `attempts-differ` (tasks
    were attempted different numbers of times, within a side or between the sides). `evaluator-mix` needs the
    evaluators, which the tallies do not hold: the caller adds it."""
    warnings: list[TaskWarning] = []
    for side, tasks in (("A", a), ("B", b)):
        note = one_task_note(pass_at_1(tasks))
        if note:
            warnings.append(TaskWarning("one-task", f"{side} holds {note}."))
    counts = {side: sorted({t.attempts for t in tasks.values() if t.attempts}) for side, tasks in (("A", a), ("B", b))}
    if len(set(counts["A"]) | set(counts["B"])) > 1:
        described = "; ".join(
            f"{side}: {', '.join(map(str, values))} attempts per task" for side, values in counts.items() if values
        )
        warnings.append(
            TaskWarning("attempts-differ", f"Tasks were attempted different numbers of times ({described}).")
        )
    return warnings


EVALUATOR_MIX_TOLERANCE = 0.05  # shares of a side's trials by evaluator that differ by more than this "differ"


def evaluator_mix_warning(a: Mapping[str, int], b: Mapping[str, int]) -> TaskWarning | None:
    """`evaluator-mix` when the sides' trials by evaluator (label -> trials) differ: an evaluator only one side ran,
    or one whose share of a side's trials differs by more than EVALUATOR_MIX_TOLERANCE; the message gives the
    counts per evaluator per side. None when the mixes agree (or a side has no trial)."""
    total_a, total_b = sum(a.values()), sum(b.values())
    if not total_a or not total_b:
        return None
    labels = sorted({k for k, v in a.items() if v} | {k for k, v in b.items() if v})
    differ = any(
        (a.get(k, 0) == 0) != (b.get(k, 0) == 0)
        or abs(a.get(k, 0) / total_a - b.get(k, 0) / total_b) > EVALUATOR_MIX_TOLERANCE
        for k in labels
    )
    if not differ:
        return None
    counts = "; ".join(
        f"{side}: " + ", ".join(f"{k} {side_counts.get(k, 0)}" for k in labels)
        for side, side_counts in (("A", a), ("B", b))
    )
    return TaskWarning(
        "evaluator-mix",
        f"The sides' evaluator mixes differ (trials per evaluator, {counts}): pooled figures mix evaluators, "
        "compare evaluator by evaluator.",
    )
