"""queries.kept: a value is computed once per key, the least recently asked for is dropped first, and forget_all
makes the next read of every state compute afresh (as bench.datasets measures a dataset run in progress)."""

from collections.abc import Callable
from typing import Any

from queries.kept import Kept, forget_all


def counting() -> tuple[list, Callable[[Any], Callable[[], Any]]]:
    calls = []

    def compute(value):
        def run():
            calls.append(value)
            return value

        return run

    return calls, compute


def test_a_key_is_computed_once_and_the_least_recent_is_dropped_first():
    calls, compute = counting()
    kept: Kept[int] = Kept(2)
    assert kept.get("a", compute(1)) == 1
    assert kept.get("a", compute(99)) == 1  # the kept value, not a new one
    kept.get("b", compute(2))
    kept.get("a", compute(99))  # "a" asked for again: "b" is now the least recent
    kept.get("c", compute(3))
    assert kept.get("b", compute(4)) == 4
    assert calls == [1, 2, 3, 4]


def test_forget_all_drops_the_values_of_every_kept():
    calls, compute = counting()
    first: Kept[str] = Kept(4)
    second: Kept[str] = Kept(4)
    first.get("state", compute("first"))
    second.get("state", compute("second"))
    forget_all()
    assert first.get("state", compute("first again")) == "first again"
    assert second.get("state", compute("second again")) == "second again"
    assert calls == ["first", "second", "first again", "second again"]


def test_values_weigh_what_they_are_told_and_the_least_recent_go_past_the_size():
    kept: Kept[list[int]] = Kept(10, weigh=len)
    kept.keep("six", [6] * 6)
    kept.keep("three", [3] * 3)
    assert kept.find("six") == [6] * 6  # now "three" is the least recent
    kept.keep("four", [4] * 4)  # 6 + 3 + 4 > 10: "three" goes
    assert kept.find("three") is None
    assert kept.find("six") == [6] * 6 and kept.find("four") == [4] * 4
    kept.keep("twelve", [12] * 12)  # heavier than the size alone: kept, the rest go
    assert [kept.find(key) is not None for key in ("six", "four", "twelve")] == [False, False, True]
