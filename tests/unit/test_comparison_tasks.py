"""Task-level statistics: figures equal an independent computation, pairing by task, pass@k over tasks, one-task
sides, power in tasks, wording, and a null simulation whose rejection rate holds at 5% (today's pooled test's not)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from domain import comparison, scoring
from domain import task_stats as ts
from domain import task_verdict as tv


def known(figure: float | None) -> float:
    """A figure the case at hand must have (None is what the domain answers when it cannot say)."""
    assert figure is not None
    return figure


def close(x, y):
    return x == pytest.approx(y, rel=1e-9, abs=1e-12)


def trials_of(spec: dict[str, list[float]]) -> list[tuple[str, bool, float | None]]:
    """Trials from {task: rewards}; a trial succeeded when its reward is 1."""
    return [(task, reward == 1.0, reward) for task, rewards in spec.items() for reward in rewards]


def cr0(groups: list[np.ndarray]) -> tuple[float, float]:
    """The mean over all values and its CR0 standard error, computed from the trials themselves."""
    values = np.concatenate(groups)
    mean = values.mean()
    return float(mean), math.sqrt(sum(np.sum(g - mean) ** 2 for g in groups)) / len(values)


def t_interval(value: float, se: float, df: float) -> tuple[float, float]:
    half = stats.t.ppf(0.975, df) * se
    return max(0.0, value - half), min(1.0, value + half)


# Four tasks attempted 3 to 8 times, rewards partial (1 is a success); one trial of "t4" unscored.
A = {
    "t1": [1.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0, 1.0],
    "t2": [0.0, 0.0, 0.25, 0.0],
    "t3": [1.0, 0.5, 0.0, 1.0, 0.0, 0.0],
    "t4": [0.0, 1.0, 0.75],
}
B = {
    "t1": [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0],
    "t2": [0.0, 1.0, 0.5, 0.0],
    "t3": [1.0, 1.0, 0.0, 1.0, 0.5, 1.0],
    "t4": [1.0, 1.0, 0.0],
}


def test_a_sides_figures_are_the_cr0_standard_error_over_tasks_with_a_t_interval():
    trials = [*trials_of(A), ("t4", False, None)]
    tallies = ts.tally(trials)
    assert tallies["t4"] == ts.TaskTally(4, 1, 3, 1.75, 1.5625)
    wins = [np.asarray([r == 1.0 for r in A[t]] + ([False] if t == "t4" else []), dtype=float) for t in A]
    value, se = cr0(wins)
    figure = ts.pass_at_1(tallies)
    assert (figure.tasks, figure.trials, figure.one_task) == (4, 22, False)
    assert close(figure.value, value) and close(figure.stderr, se)
    assert close(figure.low, t_interval(value, se, 3)[0]) and close(figure.high, t_interval(value, se, 3)[1])
    assert figure.method == ts.PASS_AT_1_METHOD and "CR0" in ts.METHOD and "tasks - 1" in ts.METHOD
    value, se = cr0([np.asarray(A[t]) for t in A])  # the reward reads scored trials only
    reward = ts.mean_reward(tallies)
    assert (reward.tasks, reward.trials) == (4, 21)
    assert close(reward.value, value) and close(reward.stderr, se)
    assert close(reward.low, t_interval(value, se, 3)[0]) and close(reward.high, t_interval(value, se, 3)[1])
    # Clustering widens the interval: the naive standard error over 21 independent rewards is smaller here.
    assert se > np.std(np.concatenate([A[t] for t in A]), ddof=1) / math.sqrt(21)


def test_shared_tasks_are_paired_by_task_with_scipys_paired_t_test():
    a, b = ts.tally(trials_of(A)), ts.tally(trials_of(B))
    for compare, of in ((ts.compare_pass_at_1, lambda r: float(r == 1.0)), (ts.compare_mean_reward, float)):
        means_a = np.asarray([np.mean([of(r) for r in A[t]]) for t in sorted(A)])
        means_b = np.asarray([np.mean([of(r) for r in B[t]]) for t in sorted(B)])
        expected = stats.ttest_rel(means_b, means_a)
        ci = expected.confidence_interval(0.95)
        test = compare(a, b)
        assert (test.method, test.paired_tasks, test.unit, test.only_a, test.only_b) == (
            ts.PAIRED_METHOD,
            4,
            "task",
            (),
            (),
        )
        assert close(test.difference, np.mean(means_b - means_a))
        assert close(test.stderr, np.std(means_b - means_a, ddof=1) / 2)
        assert close(test.p_value, expected.pvalue) and close(test.low, ci.low) and close(test.high, ci.high)
        # Power in shared tasks from the spread of the per-task differences.
        z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
        needed = math.ceil(z**2 * np.var(means_b - means_a, ddof=1) / 0.1**2)
        assert test.power is not None and (test.power.tasks_per_side, test.power.more_tasks_per_side) == (
            needed,
            needed - 4,
        )


def test_tasks_only_one_side_holds_are_listed_not_paired():
    extra_a = {**A, "t5": [1.0, 1.0]}
    extra_b = {**B, "t6": [0.0], "t7": [0.0, 0.0]}
    test = ts.compare_pass_at_1(ts.tally(trials_of(extra_a)), ts.tally(trials_of(extra_b)))
    assert (test.paired_tasks, test.only_a, test.only_b, test.tasks_a, test.tasks_b) == (4, ("t5",), ("t6", "t7"), 5, 6)
    plain = ts.compare_pass_at_1(ts.tally(trials_of(A)), ts.tally(trials_of(B)))
    assert test.p_value == plain.p_value  # the unshared tasks do not enter the paired test
    assert "Not paired: 1 task only A holds and 2 tasks only B holds." in tv.task_verdict(test, "pass@1")
    # Two shared tasks among eight per side are not "the same tasks": the comparison is unpaired.
    many_a = {f"a{i}": [1.0, 0.0] for i in range(6)} | {"s1": [1.0], "s2": [0.0]}
    many_b = {f"b{i}": [1.0, 1.0] for i in range(6)} | {"s1": [1.0], "s2": [1.0]}
    pairing = ts.pairing(ts.tally(trials_of(many_a)), ts.tally(trials_of(many_b)))
    assert pairing.shared == ("s1", "s2") and not pairing.paired and len(pairing.only_a) == 6


def test_different_tasks_are_compared_unpaired_on_the_clustered_standard_errors():
    b = {f"u{i}": rewards for i, rewards in enumerate(B.values())}
    test = ts.compare_mean_reward(ts.tally(trials_of(A)), ts.tally(trials_of(b)))
    mean_a, se_a = cr0([np.asarray(v) for v in A.values()])
    mean_b, se_b = cr0([np.asarray(v) for v in b.values()])
    se = math.sqrt(se_a**2 + se_b**2)
    df = se**4 / (se_a**4 / 3 + se_b**4 / 3)
    assert (test.method, test.paired_tasks, test.unit) == (ts.UNPAIRED_METHOD, 0, "task")
    assert test.only_a == tuple(sorted(A)) and test.only_b == tuple(sorted(b))
    assert close(test.difference, mean_b - mean_a) and close(test.stderr, se) and close(test.df, df)
    assert close(test.p_value, 2 * stats.t.sf(abs(mean_b - mean_a) / se, df))
    assert close(test.low, mean_b - mean_a - stats.t.ppf(0.975, df) * se)
    # Power in tasks: each side's variance per task is its SE² x tasks (the trials' variance x the design effect).
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    needed = math.ceil(z**2 * (se_a**2 * 4 + se_b**2 * 4) / 0.1**2)
    assert test.power is not None and test.power.tasks_per_side == needed
    assert test.power.more_tasks_per_side == needed - 4
    assert f"about {needed - 4} more tasks per side would detect a difference of 0.1" in tv.task_verdict(test, "x")


def test_simpson_per_task_pairing_reverses_what_pooled_trials_say():
    # A tried its easy tasks often and its hard ones rarely; B the other way round. Pooled over trials A looks far
    # better; task by task B is better on every task.
    a = {"easy1": [1.0] * 7 + [0.0], "easy2": [1.0] * 8 + [0.0] * 2, "hard1": [0.0, 0.0], "hard2": [0.0]}
    b = {"easy1": [1.0, 1.0], "easy2": [1.0], "hard1": [1.0] + [0.0] * 7, "hard2": [1.0, 1.0] + [0.0] * 8}
    ta, tb = ts.tally(trials_of(a)), ts.tally(trials_of(b))
    assert known(ts.pass_at_1(ta).value) > known(ts.pass_at_1(tb).value) + 0.3  # 15/21 against 6/21
    test = ts.compare_pass_at_1(ta, tb)
    assert test.paired_tasks == 4 and known(test.difference) > 0
    assert close(test.difference, np.mean([1 - 7 / 8, 1 - 8 / 10, 1 / 8, 2 / 10]))


def test_simpson_by_evaluator_the_pooled_row_comes_with_the_mix_and_per_evaluator_rows_disagree_with_it():
    # B is better than A under the strong evaluator on every task, but B also holds runs of a weak evaluator that
    # A has none of: pooled, B looks worse.
    strong_a = {f"t{i}": ts.TaskTally(8, 5) for i in range(6)}
    strong_b = {f"t{i}": ts.TaskTally(8, 6 + i % 2) for i in range(6)}
    weak_b = {f"t{i}": ts.TaskTally(8, 0) for i in range(6)}
    pooled_b = {k: ts.TaskTally(16, strong_b[k].successes) for k in strong_b}
    per_evaluator = ts.compare_pass_at_1(strong_a, strong_b)
    pooled = ts.compare_pass_at_1(strong_a, pooled_b)
    assert known(per_evaluator.difference) > 0 and per_evaluator.significant
    assert known(pooled.difference) < 0 and known(ts.pass_at_1(pooled_b).value) < known(ts.pass_at_1(strong_a).value)
    warning = tv.evaluator_mix_warning(
        {"strong": sum(t.attempts for t in strong_a.values())},
        {"strong": sum(t.attempts for t in strong_b.values()), "weak": sum(t.attempts for t in weak_b.values())},
    )
    assert warning is not None and "A: strong 48, weak 0; B: strong 48, weak 48" in warning.message


def test_one_task_keeps_its_exact_figures_and_says_so():
    a = ts.tally(trials_of({"only": [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]}))
    b = ts.tally(trials_of({"only": [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]}))
    figure = ts.pass_at_1(a)
    exact = stats.binomtest(2, 8).proportion_ci(0.95, method="exact")
    assert figure.one_task and figure.method == ts.ONE_TASK_PASS_AT_1_METHOD
    assert close(figure.low, exact.low) and close(figure.high, exact.high)
    assert tv.one_task_note(figure) == "one task, 8 attempts: this says nothing about other tasks"
    assert tv.one_task_note(ts.pass_at_1(ts.tally(trials_of(A)))) is None
    test = ts.compare_pass_at_1(a, b)
    assert test.unit == "trial" and test.one_task and test.method == "Fisher's exact test" and test.paired_tasks == 0
    assert close(test.p_value, stats.fisher_exact([[7, 1], [2, 6]]).pvalue)
    reward = ts.compare_mean_reward(a, b)
    welch = stats.ttest_ind(
        [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], equal_var=False
    )
    assert reward.method == ts.ONE_TASK_REWARD_TEST and close(reward.p_value, welch.pvalue)
    assert close(reward.low, welch.confidence_interval(0.95).low)
    assert "a side holds one task, so this says nothing about other tasks" in tv.task_verdict(test, "pass@1")
    assert [w.code for w in tv.task_warnings(a, b)] == ["one-task", "one-task"]
    assert tv.task_warnings(a, b)[0].message == "A holds one task, 8 attempts: this says nothing about other tasks."


def test_pass_at_k_reads_only_tasks_with_enough_attempts():
    tallies = {
        "one": ts.TaskTally(1, 1),
        "four": ts.TaskTally(4, 1),
        "eight": ts.TaskTally(8, 3),
        "eight-too": ts.TaskTally(8, 6),
        "none": ts.TaskTally(0, 0),
    }
    table = ts.pass_at_k(tallies)
    assert sorted(table) == list(range(1, 9))  # no entry for k = 9: no task reaches it

    def unbiased(n, c, k):
        return 1 - math.comb(n - c, k) / math.comb(n, k)

    for k, figure in table.items():
        used = [(n, c) for n, c in ((1, 1), (4, 1), (8, 3), (8, 6)) if n >= k]
        values = [unbiased(n, c, k) for n, c in used]
        assert figure.tasks == len(used) and figure.trials == sum(n for n, _ in used)
        assert close(figure.value, np.mean(values))
        se = np.std(values, ddof=1) / math.sqrt(len(values))
        assert close(figure.stderr, se) and close(figure.high, t_interval(float(np.mean(values)), se, len(used) - 1)[1])
    assert [table[k].tasks for k in (1, 2, 4, 5, 8)] == [4, 3, 3, 2, 2]
    assert set(ts.pass_at_k(tallies, ks=[2, 9, 12])) == {2}
    assert ts.pass_at_k({"solo": ts.TaskTally(3, 1)})[2].stderr is None  # one task: no spread to measure
    assert ts.pass_at_k({}) == {}


def test_pass_at_k_holds_for_tasks_attempted_thousands_of_times():
    from fractions import Fraction

    cases = [(n, c, k) for n in (1, 4, 8, 30) for c in range(n + 1) for k in range(1, n + 1)]
    cases += [(3000, 5, 8), (3000, 2990, 8), (5000, 1, 2), (5000, 4999, 1)]
    for n, c, k in cases:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        got = scoring.unbiased_pass_at_k(np.asarray([c]), np.asarray([n]), k)[0]
        assert got == pytest.approx(float(exact), rel=1e-9, abs=1e-12), (n, c, k)
        if k <= n:  # the scalar form a run's pass@k table uses is the same estimator
            assert scoring.pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9, abs=1e-12), (n, c, k)
    table = ts.pass_at_k({"busy": ts.TaskTally(4000, 37), "rare": ts.TaskTally(3, 1)})
    assert sorted(table) == list(range(1, 9)) and table[8].tasks == 1 and table[3].tasks == 2


def test_wording_has_no_negative_zero_and_untested_deltas_are_neutral():
    assert [tv.signed(x) for x in (-0.001, 0.0, -0.0, 0.004, 0.005001, -0.2)] == [
        "0.00",
        "0.00",
        "0.00",
        "0.00",
        "+0.01",
        "-0.20",
    ]
    significant = comparison.Test("t", -0.3, -0.5, -0.1, 0.01)
    assert tv.delta_tone(-0.3) == "neutral" and tv.delta_tone(-0.3, significant) == "down"
    assert tv.delta_tone(0.3, comparison.Test("t", 0.3, -0.1, 0.7, 0.2)) == "neutral"
    same = {f"t{i}": [1.0, 0.0] for i in range(4)}
    test = ts.compare_pass_at_1(ts.tally(trials_of(same)), ts.tally(trials_of(same)))
    text = tv.task_verdict(test, "pass@1")
    assert (
        "-0.00" not in text
        and "B - A = 0.00" in text
        and "paired t-test over task means, across 4 tasks both sides hold" in text
    )
    a, b = ts.tally(trials_of(A)), ts.tally(trials_of({t: [1.0] * len(v) for t, v in A.items()}))
    found = tv.task_verdict(ts.compare_pass_at_1(a, b), "pass@1")
    assert found.startswith("B's pass@1 is higher by") and ts.PAIRED_METHOD in found
    assert tv.task_verdict(ts.compare_pass_at_1({}, b), "pass@1").startswith("Not enough tasks")


def test_the_task_table_lists_both_sides_tasks_by_key_up_to_its_limit():
    a = {"k3": ts.TaskTally(4, 1), "k1": ts.TaskTally(8, 8), "k0": ts.TaskTally(0, 0)}
    b = {"k1": ts.TaskTally(8, 2), "k2": ts.TaskTally(2, 1)}
    rows, truncated = ts.task_table(a, b)
    assert [r.task for r in rows] == ["k1", "k2", "k3"] and not truncated
    assert [r.difference for r in rows] == [-0.75, None, None] and rows[1].a is None and rows[2].b is None
    rows, truncated = ts.task_table(a, b, limit=2)
    assert [r.task for r in rows] == ["k1", "k2"] and truncated


def test_evaluator_mix_warning_gives_the_counts_per_evaluator_per_side():
    assert tv.evaluator_mix_warning({"expert": 96}, {"expert": 40}) is None
    assert tv.evaluator_mix_warning({"expert": 48, "weak": 48}, {"expert": 50, "weak": 46}) is None
    warning = tv.evaluator_mix_warning({"expert": 96}, {"expert": 96, "weak": 32})
    assert warning is not None and warning.code == "evaluator-mix"
    assert "A: expert 96, weak 0; B: expert 96, weak 32" in warning.message
    assert tv.evaluator_mix_warning({"expert": 90, "weak": 10}, {"expert": 50, "weak": 50}) is not None
    assert tv.evaluator_mix_warning({}, {"expert": 3}) is None


def test_warnings_say_when_attempts_differ():
    even = {f"t{i}": ts.TaskTally(8, 4, 8, 4.0, 4.0) for i in range(3)}
    assert tv.task_warnings(even, even) == []
    uneven = {**even, "t9": ts.TaskTally(4, 1)}
    (warning,) = tv.task_warnings(even, uneven)
    assert warning.code == "attempts-differ" and "B: 4, 8 attempts per task" in warning.message
    with pytest.raises(ValueError):
        ts.TaskTally(3, 4)


def _side(rng: np.random.Generator, difficulty: np.ndarray, prefix: str, attempts: int = 8) -> dict[str, ts.TaskTally]:
    """Tallies of `attempts` trials per task; a trial of task i succeeds with probability difficulty[i] and earns
    reward 1, else a partial reward uniform on [0, 0.6)."""
    won = rng.random((len(difficulty), attempts)) < difficulty[:, np.newaxis]
    rewards = np.where(won, 1.0, rng.uniform(0.0, 0.6, won.shape))
    return {
        f"{prefix}{i}": ts.TaskTally(attempts, int(w.sum()), attempts, float(r.sum()), float((r**2).sum()))
        for i, (w, r) in enumerate(zip(won, rewards, strict=True))
    }


@pytest.mark.slow
def test_null_simulation_rejects_about_five_percent_and_a_real_difference_is_found():
    """1,000 null datasets (tasks differ between sides, difficulty Beta(0.5, 0.5), 12 tasks x 8 attempts per side)
    through compare_pass_at_1; the pooled Fisher test on the same data; 400 paired datasets with a true per-task
    difference of 0.2, and 400 paired ones with none."""
    rng = np.random.default_rng(20261201)
    datasets, rejected, pooled_rejected, reward_rejected = 1_000, 0, 0, 0
    for _ in range(datasets):
        a = _side(rng, rng.beta(0.5, 0.5, 12), "a")
        b = _side(rng, rng.beta(0.5, 0.5, 12), "b")
        test = ts.compare_pass_at_1(a, b)
        assert test.paired_tasks == 0 and test.method == ts.UNPAIRED_METHOD
        rejected += known(test.p_value) < 0.05
        reward_rejected += known(ts.compare_mean_reward(a, b).p_value) < 0.05
        wins_a, wins_b = (sum(t.successes for t in side.values()) for side in (a, b))
        pooled_rejected += known(comparison.unpaired_pass_at_1(wins_a, 96, wins_b, 96).p_value) < 0.05
    paired_sets, found, false_alarms = 400, 0, 0
    for _ in range(paired_sets):
        difficulty = 0.8 * rng.beta(0.5, 0.5, 12)
        a = _side(rng, difficulty, "t")
        test = ts.compare_pass_at_1(a, _side(rng, difficulty + 0.2, "t"))
        assert test.paired_tasks == 12
        found += known(test.p_value) < 0.05 and known(test.difference) > 0
        false_alarms += known(ts.compare_pass_at_1(a, _side(rng, difficulty, "t")).p_value) < 0.05
    rate, pooled, power, paired_null = (
        rejected / datasets,
        pooled_rejected / datasets,
        found / paired_sets,
        false_alarms / paired_sets,
    )
    reward_rate = reward_rejected / datasets
    print(f"\nnull rejection at 5%: pass@1 by task {rate:.3f}, mean reward by task {reward_rate:.3f}")
    print(f"the same null datasets through today's pooled pass@1 test (Fisher over trials): {pooled:.3f}")
    print(
        f"paired by task: power at a per-task difference of 0.2 {power:.3f}, rejection under the null {paired_null:.3f}"
    )
    assert 0.02 <= rate <= 0.09 and 0.02 <= reward_rate <= 0.09
    assert 0.02 <= paired_null <= 0.09
    assert pooled > 0.2  # today's pooled test cries wolf
    assert power > 0.5


def test_thin_sides_answer_without_failing():
    # Paired for pass@1, but A scored only one task: the reward falls back to the exact test over trials.
    a = ts.tally([("t1", True, 1.0), ("t1", False, 0.0), ("t2", False, None), ("t2", True, None)])
    b = ts.tally([("t1", True, 1.0), ("t1", True, 1.0), ("t2", True, 1.0), ("t2", False, 0.0)])
    assert ts.compare_pass_at_1(a, b).paired_tasks == 2
    reward = ts.compare_mean_reward(a, b)
    assert (
        reward.unit == "trial" and reward.method == ts.ONE_TASK_REWARD_TEST and reward.difference == pytest.approx(0.25)
    )
    # Every task alike within each side: no spread for a t-test, so the exact rank test over task means (three
    # tasks against three: p = 2 / C(6, 3) = 0.1, not 0) and no power is sized.
    same_a = {f"a{i}": ts.TaskTally(4, 4, 4, 4.0, 4.0) for i in range(3)}
    same_b = {f"b{i}": ts.TaskTally(4, 0, 4, 0.0, 0.0) for i in range(3)}
    test = ts.compare_pass_at_1(same_a, same_b)
    assert (test.method, test.difference, test.stderr, test.power, test.low) == (ts.RANK_TEST, -1.0, 0.0, None, None)
    assert close(test.p_value, stats.mannwhitneyu([0, 0, 0], [1, 1, 1], method="exact").pvalue) and close(
        test.p_value, 0.1
    )
    # Two shared tasks that each went from 0/1 to 1/1: the exact sign test (p = 0.5); twelve such tasks: p = 2 / 2^12.
    for tasks, expected in ((2, 0.5), (12, 2 / 2**12)):
        lost = {f"t{i}": ts.TaskTally(1, 0, 1, 0.0, 0.0) for i in range(tasks)}
        won = {f"t{i}": ts.TaskTally(1, 1, 1, 1.0, 1.0) for i in range(tasks)}
        test = ts.compare_pass_at_1(lost, won)
        assert (test.method, test.paired_tasks, test.difference) == (ts.SIGN_TEST, tasks, 1.0)
        assert close(test.p_value, expected) and close(test.p_value, stats.binomtest(tasks, tasks).pvalue)
    # One task, every reward alike within a side (thirds, whose sums round): the rank test over its trials.
    third = round(1 / 3, 6)
    one_a = {"t": ts.TaskTally(5, 0, 5, 5 * third, 5 * third**2)}
    one_b = {"t": ts.TaskTally(5, 5, 5, 5.0, 5.0)}
    reward = ts.compare_mean_reward(one_a, one_b)
    assert reward.method == ts.ONE_TASK_RANK_TEST and close(reward.p_value, 2 / math.comb(10, 5))
    itself = ts.compare_pass_at_1(same_a, same_a)
    assert (itself.paired_tasks, itself.difference, itself.p_value) == (3, 0.0, 1.0)
    assert ts.compare_mean_reward(same_a, {}).difference is None
    assert ts.pass_at_1({}).value is None and ts.mean_reward(a).tasks == 1


def test_per_task_columns_give_the_figures_of_the_tallies_they_hold():
    rng = np.random.default_rng(7)
    tallies = {}
    for index in range(40):
        attempts = int(rng.integers(1, 9))
        rewards = rng.choice([0.0, 0.5, 1.0], size=attempts)
        tallies[f"{index:05d}"] = ts.TaskTally(
            attempts, int((rewards == 1).sum()), attempts, float(rewards.sum()), float((rewards**2).sum())
        )
    other = {k: ts.TaskTally(t.attempts, t.attempts - t.successes, t.scored, t.scored - t.reward_sum, 0.0)
             for k, t in tallies.items()}  # fmt: skip
    shuffled = dict(sorted(tallies.items(), key=lambda item: rng.random()))  # columns in any order
    columns = ts.TaskColumns.of(shuffled)
    in_order = dataclasses.replace(ts.TaskColumns.of(tallies), keys_sorted=True)
    for form in (columns, in_order):
        assert ts.pass_at_1(form) == ts.pass_at_1(tallies)
        assert ts.mean_reward(form) == ts.mean_reward(tallies)
        for k, estimate in ts.pass_at_k(tallies).items():
            assert close(known(ts.pass_at_k(form)[k].value), known(estimate.value))
            exact = np.mean(
                [scoring.pass_at_k(t.attempts, t.successes, k) for t in tallies.values() if t.attempts >= k]
            )
            assert close(known(estimate.value), float(exact))
    test = ts.compare_pass_at_1(tallies, other)
    from_columns = ts.compare_pass_at_1(in_order, ts.TaskColumns.of(other))
    assert (test.method, test.paired_tasks, test.shared_tasks) == (from_columns.method, 40, 40)
    assert close(known(from_columns.p_value), known(test.p_value))
    means_a = [t.successes / t.attempts for t in tallies.values()]
    means_b = [t.successes / t.attempts for t in other.values()]
    assert close(known(test.p_value), float(stats.ttest_rel(means_b, means_a).pvalue))


def test_sides_that_share_no_task_are_said_to_be_unpaired_over_different_draws():
    a = {"x": ts.TaskTally(4, 1, 4, 1.0, 1.0), "y": ts.TaskTally(4, 2, 4, 2.0, 2.0)}
    b = {"z": ts.TaskTally(4, 3, 4, 3.0, 3.0), "w": ts.TaskTally(4, 4, 4, 4.0, 4.0)}
    one_each = ({"x": ts.TaskTally(8, 1, 8, 1.0, 1.0)}, {"z": ts.TaskTally(8, 7, 8, 7.0, 7.0)})
    for left, right in ((a, b), one_each):
        for test in (ts.compare_pass_at_1(left, right), ts.compare_mean_reward(left, right)):
            assert test.shared_tasks == 0
            assert "Unpaired, over different draws: the sides share no task" in tv.task_verdict(test, "pass@1")
    shared = ts.compare_pass_at_1(a, {**a, "z": b["z"]})
    assert shared.shared_tasks == 2 and "different draws" not in tv.task_verdict(shared, "pass@1")
