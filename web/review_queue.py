"""The review queue's form and what its pages share: a decision as the panel posts it (the labels ticked and the
ones it showed, the category picked and the one it showed), the queue's explorer parameters read back as filters,
and the exclusion reason this browser session last gave (the panel offers it again)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from flask import abort, session
from wtforms import Field

from domain.review_queue import DECISIONS, NEW_CATEGORY, category_choice
from domain.rules import one_of
from domain.triage import HUMAN_CATEGORY, REASON, REASON_CHARS
from queries.filters import TrialFilters
from web.fields import BoundedText, Follows, PageForm, in_page_words
from web.forms import ReasonToExclude
from web.params import parse_uuid
from web.trial_filters import FILTER_PARAMS, TrialListQuery
from web.validation import Invalid, parse
from writes.review_queue import DecisionInput
from writes.triage import UNCHANGED

MOST_LABELS = 200  # label ids one decision may name (a panel shows each label of the set once)


class UUIDListField(Field):
    """Every posted value of the field as a UUID (a ticked checkbox each); a malformed one answers 400."""

    def process_formdata(self, valuelist: list[Any]) -> None:
        """Parse each posted value."""
        if len(valuelist) > MOST_LABELS:
            abort(400, description=f"{self.name}: at most {MOST_LABELS} labels.")
        ids = [parse_uuid(value) for value in valuelist]
        if any(found is None for found in ids):
            abort(400, description=f"{self.name} must be label UUIDs.")
        self.data = [found for found in ids if found is not None]

    def _value(self) -> str:
        return ""


class DecisionForm(PageForm):
    """A decision on the queue's trial: reviewed or excluded (with a reason), the labels ticked (`label_id`) beside
    those the panel showed on (`shown_label_id`), and the human category picked (`human_category`: blank for the
    verifier's, one of the organization's, or NEW_CATEGORY with `new_category`) beside the one it showed
    (`shown_category`). Fields in the panel's order, so its error summary lists them as the panel shows them."""

    decision = BoundedText(20, validators=[Follows(one_of(*DECISIONS), "Decision")])
    label_id = UUIDListField(default=())
    shown_label_id = UUIDListField(default=())
    human_category = BoundedText(200)
    new_category = BoundedText(200)
    shown_category = BoundedText(200)
    reason = BoundedText(REASON_CHARS * 2, validators=[Follows(REASON, "Reason"), ReasonToExclude("decision")])

    def decision_input(self, known_categories: Callable[[], list[str]]) -> DecisionInput | None:
        """The decision as writes.review_queue takes it, or None when the form's rules or its category refuse it:
        every refusal at once, each at its field in the page's words; `known_categories` gives the organization's
        categories (read only when the category changes)."""
        valid = self.validate()
        chosen, shown = self.human_category.data, self.shown_category.data
        category: Any = UNCHANGED
        if chosen == NEW_CATEGORY or chosen != shown:
            picked, refused = category_choice(
                chosen, self.new_category.data, shown, known_categories(), valid=HUMAN_CATEGORY.check
            )
            if refused:  # "<field>: why", the field being human_category or new_category
                field = refused.split(":", 1)[0]
                self[field].errors.append(in_page_words(refused, field))
                return None
            category = picked
        if not valid:
            return None
        ticked, shown_on = set(self.label_id.data or ()), set(self.shown_label_id.data or ())
        return DecisionInput(
            state=self.decision.data,
            reason=self.reason.data,
            add_labels=tuple(sorted(ticked - shown_on)),
            remove_labels=tuple(sorted(shown_on - ticked)),
            human_category=category,
        )


def queue_query(filters: dict[str, str]) -> TrialListQuery:
    """A queue's stored explorer parameters as the explorer reads them (they were checked when it started)."""
    try:
        return parse(TrialListQuery, {k: v for k, v in filters.items() if k in FILTER_PARAMS or k == "sort"})
    except Invalid as error:  # pragma: no cover - a queue is only started from parameters that parse
        abort(400, description=error.detail)


def queue_filters(filters: dict[str, str]) -> TrialFilters:
    """The trial filters a queue was started with."""
    return queue_query(filters).filters()


def _reason_key(org_id: uuid.UUID) -> str:
    return f"queue-reason:{org_id}"


def remembered_reason(org_id: uuid.UUID) -> str:
    """The exclusion reason this browser session last gave in the organization's queues ('' before any)."""
    return str(session.get(_reason_key(org_id), ""))


def remember_reason(org_id: uuid.UUID, reason: str) -> None:
    """Keep the reason an exclusion gave for the session's next ones (the signed session cookie holds it)."""
    session[_reason_key(org_id)] = reason
