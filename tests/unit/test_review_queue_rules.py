"""The review queue's category rule: a category comes from the organization's list, or from the explicit "New
category…" choice with a valid name unlike any of the list's; and a trial's triage state as an undo keeps it."""

from __future__ import annotations

import pytest

from domain.review_queue import NEW_CATEGORY, TriageState, category_choice
from domain.triage import HUMAN_CATEGORY

KNOWN = ["gave_up", "wrong_item"]


@pytest.mark.parametrize(
    ("chosen", "new", "shown", "expected"),
    [
        ("", "", "", (None, None)),  # the verifier's
        ("wrong_item", "", "", ("wrong_item", None)),
        ("custom", "", "custom", ("custom", None)),  # the trial's own, not in the list, left as it was
        (NEW_CATEGORY, "verifier_crash", "", ("verifier_crash", None)),
    ],
)
def test_a_category_of_the_list_or_an_explicit_new_one_is_taken(chosen, new, shown, expected):
    assert category_choice(chosen, new, shown, KNOWN, valid=HUMAN_CATEGORY.check) == expected


@pytest.mark.parametrize(
    ("chosen", "new", "said"),
    [
        ("verifier_crash", "", "'verifier_crash' is not one of the organization's failure categories"),
        (NEW_CATEGORY, "", "a new category must be 1 to 64 letters, digits, _, . or -"),
        (NEW_CATEGORY, "two words", "a new category must be 1 to 64 letters, digits, _, . or -, not 'two words'"),
        (NEW_CATEGORY, "Wrong_Item", "the category 'wrong_item' exists; choose it in the list"),
    ],
)
def test_a_typed_slip_never_makes_a_category(chosen, new, said):
    category, refused = category_choice(chosen, new, "", KNOWN, valid=HUMAN_CATEGORY.check)
    assert category is None and refused is not None and said in refused


def test_a_triage_state_round_trips_through_the_undo_list():
    state = TriageState("excluded", "the verifier crashed", "wrong_item", ("0199", "01a2"))
    assert TriageState.from_stored(state.stored()) == state
