"""`make bench SIZE=…`: the large size a user asks for, refused with a reason when it is not a size or does not fit."""

from __future__ import annotations

import pytest

from bench.run import (
    DISK_BYTES_PER_TRIAL,
    SizeMeasured,
    disk_problem,
    export_size,
    history,
    sizes_of,
    trials_of,
)


@pytest.mark.parametrize(
    ("size", "trials"),
    [
        ("1M", 1_000_000),
        ("10M", 10_000_000),
        ("500k", 500_000),
        ("2.5M", 2_500_000),
        ("20000", 20_000),
        ("10_000_000", 10_000_000),
    ],
)
def test_sizes_read_as_trials(size, trials):
    assert trials_of(size) == trials


@pytest.mark.parametrize(
    ("size", "says"),
    [
        ("ten", "must be a number of trials"),
        ("1G", "must be a number"),
        ("10k", "more than the small size"),
        ("-1M", "more than the small size"),
    ],
)
def test_sizes_that_are_not_refused_with_a_reason(size, says):
    with pytest.raises(SystemExit) as refused:
        trials_of(size)
    assert says in str(refused.value) and repr(size) in str(refused.value)


def test_a_size_the_disk_cannot_hold_is_refused_before_anything_is_generated(tmp_path):
    assert disk_problem(tmp_path, 1_000) is None
    problem = disk_problem(tmp_path, 10**15 // DISK_BYTES_PER_TRIAL)
    assert problem is not None
    assert "1,000,000 GB of disk" in problem and "GB are free at" in problem and str(tmp_path) in problem


@pytest.mark.parametrize(
    ("large", "sizes"),
    [
        (1_000_000, [10_000, 1_000_000]),
        (500_000, [10_000, 500_000]),
        (10_000_000, [10_000, 1_000_000, 10_000_000]),
        (2_500_000, [10_000, 1_000_000, 2_500_000]),
    ],
)
def test_a_size_past_1m_is_measured_beside_1m(large, sizes):
    assert sizes_of(large) == sizes
    assert export_size(large) in sizes and export_size(large) == min(large, 1_000_000)  # the export's rounds: at 1M


def test_the_history_says_how_fast_each_size_was_generated():
    def grown(trials: int, seconds: float) -> SizeMeasured:
        return SizeMeasured(trials, seconds, None, {}, {}, {}, {}, {}, {})  # type: ignore[arg-type]

    said = history([grown(10_080, 2.0), grown(1_000_080, 300.0), grown(10_000_080, 1_800.0)])

    assert said == (
        "10,080 trials (10,080 generated in 2.0 s, 5,040 trials/s), "
        "then 1,000,080 trials (990,000 generated in 300.0 s, 3,300 trials/s), "
        "then 10,000,080 trials (9,000,000 generated in 1800.0 s, 5,000 trials/s)"
    )
