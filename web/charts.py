"""Chart geometry for the server-rendered SVG charts: axes, ticks, gridlines, lines, bands and bars.

The numbers are the page's real figures; this module only maps them to coordinates. `templates/charts.html`
draws any Chart (title, axis labels with units, gridlines, tick labels, legend) with one macro.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from queries.environments import TrendPoint

LEFT, RIGHT, TOP, BOTTOM = 52, 12, 30, 44  # margins around the plotting area, room for 12 px labels
TICK_FONT_PX = 12  # tick labels are drawn at least this size (app.css: .chart .tick); margins leave room for them
SERIES = ("series-a", "series-b", "series-c", "series-d", "series-e", "series-f")


@dataclass(frozen=True)
class Mark:
    """A drawn shape: a polyline/polygon (points) or a rectangle (x, y, w, h), with its class and hover title."""

    kind: str  # line | band | rect | dot
    css: str
    points: str = ""
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0
    title: str = ""


@dataclass(frozen=True)
class Chart:
    """A chart ready to draw."""

    title: str
    x_label: str
    y_label: str
    width: int
    height: int
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    marks: list[Mark]
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css, name)
    css: str = "chart"
    left: int = LEFT  # margin left of the plotting area (wider when the y tick labels are words)
    right: int = RIGHT  # margin right of it (wider when the last x tick label is long)

    @property
    def plot(self) -> tuple[float, float, float, float]:
        """(left, top, right, bottom) of the plotting area."""
        return self.left, TOP, self.width - self.right, self.height - BOTTOM


class _Frame:
    """Maps data to pixels inside a chart's plotting area."""

    def __init__(self, width: int, height: int, x_range: tuple[float, float], y_range: tuple[float, float],
                 right: int = RIGHT):  # fmt: skip
        self.width, self.height, self.right = width, height, right
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range

    def x(self, value: float) -> float:
        span = (self.x1 - self.x0) or 1
        return round(LEFT + (value - self.x0) / span * (self.width - LEFT - self.right), 1)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1
        return round(self.height - BOTTOM - (value - self.y0) / span * (self.height - TOP - BOTTOM), 1)

    def share_ticks(self) -> list[tuple[float, str]]:
        return [(self.y(v / 4), f"{v / 4:.2f}") for v in range(5)]


def pass_at_k_chart(title: str, sides: list[tuple[str, dict[int, tuple[float | None, float | None, float | None]]]],
                    width: int = 420, height: int = 240) -> Chart:  # fmt: skip
    """pass@k against k for each side, with its 95% interval as a band."""
    ks = sorted({k for _, table in sides for k in table}) or [1]
    frame = _Frame(width, height, (min(ks), max(ks) if len(ks) > 1 else min(ks) + 1), (0.0, 1.0))
    marks, legend = [], []
    for index, (name, table) in enumerate(sides):
        css = SERIES[index % len(SERIES)]
        legend.append((css, name))
        points = [(k, v) for k, (v, _, _) in sorted(table.items()) if v is not None]
        bounded = [(k, lo, hi) for k, (_, lo, hi) in sorted(table.items()) if lo is not None and hi is not None]
        if bounded:
            upper = [f"{frame.x(k)},{frame.y(hi)}" for k, _, hi in bounded]
            lower = [f"{frame.x(k)},{frame.y(lo)}" for k, lo, _ in reversed(bounded)]
            marks.append(Mark("band", css, " ".join(upper + lower), title=f"{name}: 95% interval"))
        if len(points) > 1:
            marks.append(Mark("line", css, " ".join(f"{frame.x(k)},{frame.y(v)}" for k, v in points)))
        for k, v in points:
            low, high = table[k][1], table[k][2]
            ci = f" (95% CI {low:.2f}-{high:.2f})" if low is not None and high is not None else ""
            marks.append(Mark("dot", css, x=frame.x(k), y=frame.y(v), title=f"{name}: pass@{k} = {v:.3f}{ci}"))
    return Chart(
        title, "k (attempts per task)", "pass@k (share of tasks)", width, height,
        [(frame.x(k), str(k)) for k in ks], frame.share_ticks(), marks, legend,
    )  # fmt: skip


def histogram_chart(title: str, counts: list[int], css: str = "series-a", width: int = 300,
                    height: int = 200, unit: str = "trials") -> Chart:  # fmt: skip
    """Trials (or another `unit`: a dataset run's tasks by their mean reward) per reward bin over [0, 1]."""
    bins = len(counts) or 1
    top = max(max(counts, default=0), 1)
    frame = _Frame(width, height, (0.0, 1.0), (0.0, float(top)))
    marks = []
    for index, count in enumerate(counts):
        x0, x1 = frame.x(index / bins), frame.x((index + 1) / bins)
        y = frame.y(count)
        low, high = index / bins, (index + 1) / bins
        closing = "]" if index == bins - 1 else ")"
        marks.append(Mark("rect", css, x=x0 + 1, y=y, w=max(x1 - x0 - 2, 1), h=frame.y(0) - y,
                          title=f"reward [{low:.1f}, {high:.1f}{closing}: {count} {unit}"))  # fmt: skip
    step = max(1, round(top / 4))
    y_ticks = [(frame.y(v), str(v)) for v in range(0, top + 1, step)]
    x_ticks = [(frame.x(v / 5), f"{v / 5:.1f}") for v in range(6)]
    return Chart(title, "reward (0 to 1)", unit, width, height, x_ticks, y_ticks, marks)


def funnel_chart(title: str, stages: list[str], sides: list[tuple[str, list[float | None]]], width: int = 420,
                 height: int | None = None) -> Chart:  # fmt: skip
    """Each stage's pass rate in pipeline order, one bar per side, stages top to bottom."""
    rows = max(len(stages), 1)
    band = 14 * max(len(sides), 1) + 10
    height = height or TOP + BOTTOM + rows * band
    marks, legend = [], []
    # The stage names, right-aligned left of the bars, clear of the rotated y-axis label (about 24 px).
    names = max((len(stage.removeprefix("stage_")) for stage in stages), default=0)
    left = min(max(130, 32 + round(0.6 * TICK_FONT_PX * names)), width // 2)
    scale = (width - left - RIGHT) / 1.0
    for index, (name, rates) in enumerate(sides):
        css = SERIES[index % len(SERIES)]
        legend.append((css, name))
        for row, (stage, rate) in enumerate(zip(stages, rates, strict=True)):
            if rate is None:
                continue
            y = TOP + row * band + 5 + index * 14
            marks.append(Mark("rect", css, x=left, y=y, w=round(max(rate * scale, 1), 1), h=12,
                              title=f"{name}: {stage} passed by {100 * rate:.1f}% of trials"))  # fmt: skip
    chart = Chart(
        title, "share of trials that passed the stage", "stage (pipeline order)", width, height,
        [(round(left + v / 4 * scale, 1), f"{v * 25}%") for v in range(5)],
        [(TOP + row * band + band / 2, stage.removeprefix("stage_")) for row, stage in enumerate(stages)],
        marks, legend, css="chart funnel", left=left,
    )  # fmt: skip
    return chart


def trend_chart(title: str, series: list[tuple[str, list[TrendPoint]]], width: int = 420,
                height: int = 220) -> Chart:  # fmt: skip
    """pass@1 of completed runs in run order, one line per evaluator: the chart's runs of every line numbered 1..N
    by creation (runs created in one instant by id), each drawn at its own x, so no two runs share a place."""
    order = sorted({point.order for _, points in series for point in points})
    place = {key: number for number, key in enumerate(order, start=1)}
    x_range = (1.0, float(len(order))) if len(order) > 1 else (0.0, 2.0)  # a single run in the middle
    frame = _Frame(width, height, x_range, (0.0, 1.0))
    marks, legend = [], []
    for index, (name, points) in enumerate(series):
        css = SERIES[index % len(SERIES)]
        legend.append((css, name))
        coordinates = [
            (frame.x(place[p.order]), frame.y(p.pass_at_1), p) for p in sorted(points, key=lambda p: p.order)
        ]
        if len(coordinates) > 1:
            marks.append(Mark("line", css, " ".join(f"{x},{y}" for x, y, _ in coordinates)))
        for x, y, point in coordinates:
            where = f"run {place[point.order]} of {len(order)}: {point.label}, {point.created_at:%Y-%m-%d %H:%M}"
            marks.append(Mark("dot", css, x=x, y=y, title=f"{name}: pass@1 {point.pass_at_1:.2f} ({where})"))
    numbers = sorted({1, (len(order) + 1) // 2, len(order)}) if order else [1]
    ticks = [(frame.x(number), str(number)) for number in numbers]
    return Chart(title, "completed run, oldest to newest", "pass@1 (share of trials)", width, height, ticks,
                 frame.share_ticks(), marks, legend)  # fmt: skip


def pass_at_1_trend_chart(environment: str, trend: dict[str, list[TrendPoint]], width: int = 420,
                          height: int = 220) -> Chart:  # fmt: skip
    """An environment's pass@1 trend, one line per evaluator (never a mix of agents)."""
    return trend_chart(f"pass@1 per evaluator, {environment}", sorted(trend.items()), width, height)


def _step_label(step: float) -> str:
    """A training step on an axis: 500, 12k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(step) >= size:
            return f"{step / size:.3g}{suffix}"
    return f"{step:.3g}"


def _step_ticks(low: float, high: float, most: int = 5) -> list[float]:
    """At most `most` round steps (1, 2 or 5 times a power of ten apart) covering low..high."""
    span = high - low
    if span <= 0:
        return [low]
    raw = span / (most - 1)
    power = 10 ** math.floor(math.log10(raw))
    gap = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / gap) * gap
    return [first + i * gap for i in range(most + 1) if first + i * gap <= high + 1e-9 * gap]


def checkpoint_chart(title: str, points: list[tuple[int, str, float | None, float | None, float | None]],
                     width: int = 420, height: int = 240) -> Chart:  # fmt: skip
    """pass@1 against the training step, one point per checkpoint (step, name, pass@1, low, high) in step order,
    with its 95% interval as a band (and a bar at each point)."""
    steps = [float(step) for step, *_ in points] or [0.0]
    low_step, high_step = min(steps), max(steps)
    x_range = (low_step, high_step) if high_step > low_step else (low_step - 1, low_step + 1)
    frame = _Frame(width, height, x_range, (0.0, 1.0))
    css, marks = SERIES[0], []
    bounded = [(step, lo, hi) for step, _, _, lo, hi in points if lo is not None and hi is not None]
    if len(bounded) > 1:
        upper = [f"{frame.x(step)},{frame.y(hi)}" for step, _, hi in bounded]
        lower = [f"{frame.x(step)},{frame.y(lo)}" for step, lo, _ in reversed(bounded)]
        marks.append(Mark("band", css, " ".join(upper + lower), title="pass@1: 95% interval"))
    for at, bottom, top in bounded:  # the interval of each point as a bar
        marks.append(Mark("line", css, f"{frame.x(at)},{frame.y(bottom)} {frame.x(at)},{frame.y(top)}"))
    valued = [(step, name, value, lo, hi) for step, name, value, lo, hi in points if value is not None]
    if len(valued) > 1:
        marks.append(Mark("line", css, " ".join(f"{frame.x(s)},{frame.y(v or 0)}" for s, _, v, _, _ in valued)))
    for step, name, value, lo, hi in valued:
        assert value is not None
        ci = f" (95% CI {lo:.2f}-{hi:.2f})" if lo is not None and hi is not None else ""
        marks.append(Mark("dot", css, x=frame.x(step), y=frame.y(value), title=f"{name}, step {step}: pass@1 = "
                          f"{value:.3f}{ci}"))  # fmt: skip
    ticks = _step_ticks(*x_range) if high_step > low_step else [low_step]
    return Chart(title, "training step", "pass@1 (share of trials)", width, height,
                 [(frame.x(t), _step_label(t)) for t in ticks], frame.share_ticks(), marks)  # fmt: skip
