"""The trial diff's alignment (domain/trajectory_diff.py): tool calls paired by a longest common subsequence over
(tool, canonical JSON arguments), messages paired by position between them, the first divergence."""

from __future__ import annotations

import itertools
import random
from functools import cache

import pytest

from domain import trajectory_diff
from domain.trajectory import Step, environment_step, message_step, step, tool_step
from domain.trajectory_diff import AlignedRow, ArgumentChange, align, call_key, common_subsequence


def call(number: int, name: str, **args: object) -> Step:
    return tool_step(number, name, dict(args), f"{name} done")


def shown(rows: tuple[AlignedRow, ...]) -> list[tuple[int | None, int | None, str]]:
    """Each row as (A's step number, B's step number, kind)."""
    return [(r.a.number if r.a else None, r.b.number if r.b else None, r.kind) for r in rows]


def restock_run(quantity: int) -> list[Step]:
    return [
        message_step(1, "Let me look at the stock."),
        call(2, "list_inventory"),
        call(3, "restock", sku="SKU-2", quantity=quantity),
        message_step(4, "Done."),
    ]


def test_identical_trajectories_pair_every_step_and_do_not_diverge():
    diff = align(restock_run(4), restock_run(4))
    assert shown(diff.rows) == [(1, 1, "same"), (2, 2, "same"), (3, 3, "same"), (4, 4, "same")]
    assert diff.first_divergence is None and diff.identical and diff.exact
    assert not any(row.result_differs for row in diff.rows)


def test_empty_trajectories():
    assert align([], []).rows == () and align([], []).first_divergence is None
    only_b = align([], restock_run(4))
    assert shown(only_b.rows) == [(None, n, "only_b") for n in (1, 2, 3, 4)] and only_b.first_divergence == 0
    only_a = align(restock_run(4), [])
    assert [row.kind for row in only_a.rows] == ["only_a"] * 4 and only_a.first_divergence == 0


def test_a_changed_argument_pairs_the_two_calls_in_one_row_and_is_the_first_divergence():
    diff = align(restock_run(4), restock_run(5))
    assert shown(diff.rows) == [(1, 1, "same"), (2, 2, "same"), (3, 3, "other_arguments"), (4, 4, "same")]
    assert diff.first_divergence == 2 and diff.count("other_arguments") == 1
    assert diff.rows[2].arguments == (ArgumentChange(0, ("quantity",), "4", "5"),)


def test_calls_of_one_tool_pair_in_order_and_other_tools_stay_alone():
    a = [call(1, "restock", sku="SKU-1", quantity=1), call(2, "search", q="cable"), call(3, "restock", sku="SKU-2")]
    b = [call(1, "restock", sku="SKU-1", quantity=2), call(2, "restock", sku="SKU-3"), call(3, "checkout")]
    diff = align(a, b)
    assert shown(diff.rows) == [
        (1, 1, "other_arguments"),
        (2, None, "only_a"),
        (3, 2, "other_arguments"),
        (None, 3, "only_b"),
    ]
    assert [row.arguments for row in diff.rows if row.kind == "other_arguments"] == [
        (ArgumentChange(0, ("quantity",), "1", "2"),),
        (ArgumentChange(0, ("sku",), '"SKU-2"', '"SKU-3"'),),
    ]


def test_a_call_made_whole_on_both_sides_is_paired_before_one_of_the_same_tool():
    a = [call(1, "restock", sku="SKU-2", quantity=4), call(2, "restock", sku="SKU-2", quantity=5)]
    b = [call(1, "restock", sku="SKU-2", quantity=5)]
    assert shown(align(a, b).rows) == [(1, None, "only_a"), (2, 1, "same")]


def test_argument_changes_name_keys_one_side_lacks_and_nested_keys():
    a = [tool_step(1, "order", {"customer": "CUST-1", "item": {"sku": "SKU-1", "units": 2}, "note": "rush"}, "ok")]
    b = [tool_step(1, "order", {"customer": "CUST-1", "item": {"sku": "SKU-1", "units": 3}, "gift": True}, "ok")]
    (row,) = align(a, b).rows
    assert row.kind == "other_arguments" and row.arguments == (
        ArgumentChange(0, ("gift",), None, "true"),
        ArgumentChange(0, ("item", "units"), "2", "3"),
        ArgumentChange(0, ("note",), '"rush"', None),
    )


def test_a_step_of_several_calls_pairs_with_one_of_the_same_tools_and_says_which_call_differs():
    calls_a = [{"name": "list_inventory", "arguments": {}}, {"name": "restock", "arguments": {"quantity": 4}}]
    calls_b = [{"name": "list_inventory", "arguments": {}}, {"name": "restock", "arguments": {"quantity": 40}}]
    a = [step(1, source="agent", tool="list_inventory", calls=calls_a)]
    b = [step(1, source="agent", tool="list_inventory", calls=calls_b)]
    (row,) = align(a, b).rows
    assert row.kind == "other_arguments" and row.arguments == (ArgumentChange(1, ("quantity",), "4", "40"),)
    alone = align(a, [step(1, source="agent", tool="restock", calls=calls_b[1:])])
    assert [r.kind for r in alone.rows] == ["only_a", "only_b"]  # other tools in the step: no pair


def test_arguments_that_are_no_object_compare_whole():
    a = [step(1, source="agent", tool="run", calls=[{"name": "run", "arguments": None, "argumentsText": "ls -l"}])]
    b = [step(1, source="agent", tool="run", calls=[{"name": "run", "arguments": {"cmd": "ls"}}])]
    (row,) = align(a, b).rows
    assert row.kind == "other_arguments" and row.arguments == (ArgumentChange(0, (), "null", '{"cmd":"ls"}'),)


def test_an_environment_step_pairs_only_with_the_same_command():
    a = [environment_step(1, "initialize", "{}")]
    b = [environment_step(1, "tools/list", "restock")]
    assert [row.kind for row in align(a, b).rows] == ["only_a", "only_b"]


def test_an_insertion_in_b_stands_alone_and_the_rest_stays_paired():
    a = [call(1, "list_inventory"), call(2, "restock", sku="SKU-2"), call(3, "checkout")]
    b = [call(1, "list_inventory"), call(2, "search", q="SKU"), call(3, "restock", sku="SKU-2"), call(4, "checkout")]
    diff = align(a, b)
    assert shown(diff.rows) == [(1, 1, "same"), (None, 2, "only_b"), (2, 3, "same"), (3, 4, "same")]
    assert diff.first_divergence == 1


def test_a_deletion_from_b_stands_alone_on_a():
    a = [call(1, "list_inventory"), call(2, "restock", sku="SKU-2"), call(3, "checkout")]
    b = [call(1, "list_inventory"), call(2, "checkout")]
    diff = align(a, b)
    assert shown(diff.rows) == [(1, 1, "same"), (2, None, "only_a"), (3, 2, "same")]
    assert diff.first_divergence == 1


def test_arguments_compare_as_canonical_json_whatever_their_key_order():
    a = [tool_step(1, "restock", {"sku": "SKU-2", "quantity": 4}, "ok")]
    b = [tool_step(1, "restock", {"quantity": 4, "sku": "SKU-2"}, "ok")]
    assert call_key(a[0]) == call_key(b[0])
    assert align(a, b).identical
    assert call_key(a[0]) != call_key(tool_step(1, "restock", {"sku": "SKU-2", "quantity": "4"}, "ok"))
    assert call_key(a[0]) != call_key(tool_step(1, "order", {"sku": "SKU-2", "quantity": 4}, "ok"))


def test_the_same_call_with_another_result_is_paired_and_says_so():
    a = [tool_step(1, "list_inventory", {}, "SKU-1 stock=3")]
    b = [tool_step(1, "list_inventory", {}, "SKU-1 stock=0")]
    diff = align(a, b)
    assert shown(diff.rows) == [(1, 1, "same")] and diff.rows[0].result_differs and diff.identical


def test_messages_pair_by_position_between_matched_calls():
    a = [
        message_step(1, "Plan: list, then restock."),
        call(2, "list_inventory"),
        message_step(3, "SKU-2 is out."),
        message_step(4, "Restocking."),
        call(5, "restock", sku="SKU-2"),
    ]
    b = [
        message_step(1, "Plan: list, then restock."),
        call(2, "list_inventory"),
        message_step(3, "SKU-2 is empty."),
        call(4, "restock", sku="SKU-2"),
    ]
    diff = align(a, b)
    assert shown(diff.rows) == [
        (1, 1, "same"),
        (2, 2, "same"),
        (3, 3, "changed"),  # the first message after list_inventory on each side, in other words
        (4, None, "only_a"),  # A's second message there has no counterpart
        (5, 4, "same"),
    ]
    assert diff.first_divergence == 2 and diff.count("changed") == 1


def test_messages_never_pair_across_a_matched_call_and_unmatched_calls_stand_alone_beside_them():
    a = [call(1, "list_inventory"), message_step(2, "hm"), call(3, "restock", sku="A"), call(4, "checkout")]
    b = [call(1, "list_inventory"), call(2, "restock", sku="B"), call(3, "checkout"), message_step(4, "hm")]
    diff = align(a, b)
    assert shown(diff.rows) == [
        (1, 1, "same"),
        (2, None, "only_a"),  # A's message comes before the checkout both made, B's after it
        (3, 2, "other_arguments"),
        (4, 3, "same"),
        (None, 4, "only_b"),
    ]
    c = [call(1, "list_inventory"), message_step(2, "hm"), call(3, "search", q="A"), call(4, "checkout")]
    assert shown(align(c, b).rows) == [
        (1, 1, "same"),
        (2, None, "only_a"),
        (3, None, "only_a"),  # other tools: each call alone on its side
        (None, 2, "only_b"),
        (4, 3, "same"),
        (None, 4, "only_b"),
    ]


def test_environment_steps_align_by_their_command_and_a_multi_call_step_by_all_its_calls():
    handshake = [environment_step(1, "initialize", "server ready"), environment_step(2, "tools/list", "3 tools")]
    two_calls = step(
        3,
        source="agent",
        calls=[
            {"id": "c1", "name": "git_add", "arguments": {"files": ["a"]}},
            {"id": "c2", "name": "git_commit", "arguments": {"message": "m"}},
        ],
        results=[{"callId": "c1", "content": "added"}, {"callId": "c2", "content": "committed"}],
    )
    one_call = tool_step(3, "git_add", {"files": ["a"]}, "added")
    diff = align([*handshake, two_calls], [*handshake, one_call])
    assert shown(diff.rows) == [(1, 1, "same"), (2, 2, "same"), (3, None, "only_a"), (None, 3, "only_b")]
    assert call_key(handshake[0]) != call_key(handshake[1])


def test_seed_shaped_steps_with_unknown_keys_still_get_a_key():
    stored = Step.from_stored({"step": 1, "tool": "bash", "command": "bash ls", "observation": "a"})
    assert call_key(stored) is not None and call_key(message_step(1, "hi")) is None


@cache
def _lcs_length(xs: tuple[int, ...], ys: tuple[int, ...]) -> int:
    if not xs or not ys:
        return 0
    if xs[0] == ys[0]:
        return 1 + _lcs_length(xs[1:], ys[1:])
    return max(_lcs_length(xs[1:], ys), _lcs_length(xs, ys[1:]))


@pytest.mark.parametrize("seed", range(40))
def test_the_pairs_are_a_longest_common_subsequence(seed):
    rng = random.Random(seed)
    xs = [rng.randrange(4) for _ in range(rng.randrange(12))]
    ys = [rng.randrange(4) for _ in range(rng.randrange(12))]
    pairs, exact = common_subsequence(xs, ys)
    assert exact and len(pairs) == _lcs_length(tuple(xs), tuple(ys))
    assert all(xs[i] == ys[j] for i, j in pairs)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in itertools.pairwise(pairs))


def test_a_middle_too_large_to_align_exactly_is_anchored_on_unique_calls(monkeypatch):
    monkeypatch.setattr(trajectory_diff, "EXACT_CELLS", 4)
    xs = [0, 9, 1, 2, 7, 3, 4, 0]
    ys = [0, 8, 1, 3, 2, 7, 4, 0]
    pairs, exact = common_subsequence(xs, ys)
    assert not exact
    assert all(xs[i] == ys[j] for i, j in pairs)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in itertools.pairwise(pairs))
    assert (0, 0) in pairs and (7, 7) in pairs and (2, 2) in pairs  # the common ends and a unique anchor


def test_two_200_step_trials_with_repeated_tools_align_every_step_in_order():
    # How long this takes is measured by bench/trial_diff.py (BENCHMARKS.md), not asserted here.
    rng = random.Random(7)

    def trial() -> list[Step]:
        return [
            message_step(n, f"thinking {n}")
            if n % 5 == 0
            else tool_step(n, f"tool_{rng.randrange(12)}", {"n": rng.randrange(3)}, "ok")
            for n in range(1, 201)
        ]

    a, b = trial(), trial()
    diff = align(a, b)
    assert diff.exact and diff.first_divergence is not None
    assert [row.a for row in diff.rows if row.a] == a and [row.b for row in diff.rows if row.b] == b
