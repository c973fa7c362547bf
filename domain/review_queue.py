"""The review queue's rules: how many trials a queue holds, how long a reviewer's claim on a trial lasts, how many
decisions `u` can take back, the decisions a reviewer makes, and what a trial's triage is before and after one
(what an undo restores)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

QUEUE_MOST = 500  # trials a queue holds: the first of its filter's list, in the explorer's order
CLAIM_MINUTES = 10  # a trial a reviewer opened in a queue is skipped by every other reviewer's queue this long
UNDO_MOST = 100  # decisions of a queue that `u` can take back, newest first
LABEL_KEYS = 9  # labels with a number key (1 to 9), in the order they were created
NEW_CATEGORY = "+new"  # the category picker's explicit "New category…" choice (no category starts with "+")

Decision = Literal["reviewed", "excluded"]
DECISIONS: tuple[str, ...] = get_args(Decision)


@dataclass(frozen=True)
class TriageState:
    """One trial's triage as a decision finds and leaves it: its review state, reason and human category (None: the
    verifier's stands), and the ids of its labels (sorted). A trial without a review row reads as unreviewed with
    no reason and no human category, as every page and export reads it."""

    state: str
    reason: str
    category: str | None
    labels: tuple[str, ...]

    def stored(self) -> dict[str, Any]:
        """As kept in a queue's undo list (JSON)."""
        return {
            "state": self.state,
            "reason": self.reason,
            "category": self.category,
            "labels": list(self.labels),
        }

    @classmethod
    def from_stored(cls, value: dict[str, Any]) -> TriageState:
        """What `stored` kept."""
        return cls(
            str(value["state"]),
            str(value["reason"]),
            value["category"],
            tuple(str(label) for label in value["labels"]),
        )


def category_choice(
    chosen: str, new: str, shown: str, known: list[str], *, valid: Any
) -> tuple[str | None, str | None]:
    """The human category a decision sets, from the picker (`chosen`: blank for the verifier's, one of the
    organization's `known` categories, or NEW_CATEGORY with the name typed in `new`) and the value the panel showed
    (`shown`: unchanged when chosen again). Returns (category or None, refusal or None); `valid` checks a new name.
    A category is never made by a typing slip: a name that is not one of `known` needs the explicit choice, and a
    new name that differs from a known one only in case is refused, naming it."""
    if chosen == NEW_CATEGORY:
        if not valid(new):
            return None, (
                "new_category: a new category must be 1 to 64 letters, digits, _, . or -"
                + (f", not {new!r}" if new else "")
            )
        same = next((c for c in known if c.lower() == new.lower()), None)
        if same is not None:
            return None, f"new_category: the category {same!r} exists; choose it in the list instead of a new one"
        return new, None
    if chosen and chosen != shown and chosen not in known:
        return None, (
            f"human_category: {chosen!r} is not one of the organization's failure categories; choose one of the "
            "list, or “New category…” to add one"
        )
    return (chosen or None), None
