"""The export benchmark's ratio: the median of its rounds' own ratios, so one slow stretch of the machine moves
neither the ratio nor the medians it reports."""

from __future__ import annotations

from bench.export import ExportResult, Round, Transfer, summary

MB = 2**20


def round_of(export_s: float, copy_s: float, stored_s: float) -> Round:
    return Round(
        Transfer(1000, 100 * MB, export_s), Transfer(1000, 100 * MB, copy_s), Transfer(1000, 80 * MB, stored_s)
    )


def test_the_ratio_is_the_median_of_the_rounds_own_ratios():
    # MB/s: export 100/e, stored 80/s, so each round's ratio is 1.25 * s / e.
    rounds = [round_of(1.0, 1.0, 0.8), round_of(2.0, 2.0, 1.6), round_of(1.0, 1.0, 0.72), round_of(1.0, 1.0, 0.8)]
    result = ExportResult(rounds, rss_growth_mb=3.0)

    assert result.ratio() == 1.0  # rounds 1.0, 1.0, 0.9, 1.0
    assert result.ratio("copy") == 1.0


def test_a_round_slowed_throughout_does_not_move_the_ratio():
    steady = [round_of(1.0, 1.0, 0.8)] * 4
    noisy = [*steady, round_of(3.0, 3.0, 2.4)]  # everything 3x slower in one round: its ratio is unchanged

    assert ExportResult(noisy, 0.0).ratio() == ExportResult(steady, 0.0).ratio() == 1.0


def test_the_summary_names_the_rounds_and_their_ratios():
    rounds = [round_of(1.0, 1.0, 0.8), round_of(1.0, 1.0, 0.64), round_of(1.0, 1.0, 0.72)]

    text = "\n".join(summary(ExportResult(rounds, rss_growth_mb=4.2)))

    assert "seconds (median of 3)" in text
    assert "**0.90x** that of COPY of the same rollouts" in text
    assert "(0.80, 0.90, 1.00 against the stored steps)" in text
    assert "**4.2 MB**" in text
