"""Triage of trials: what a reviewer records on a trial (labels, notes, a review state, a human failure category),
the limits of each, and the palette labels are drawn in."""

from __future__ import annotations

import re
from dataclasses import dataclass

from domain.rules import FAILURE_CATEGORY_CHARS, NO_NUL, Rule, normal_name, one_of, text
from domain.vocabulary import LABEL_COLORS, REVIEW_STATES

LABEL_NAME_CHARS = 64
LABEL_DESCRIPTION_CHARS = 500
NOTE_CHARS = 10_000
REASON_CHARS = 1_000


# A label name: 1 to LABEL_NAME_CHARS characters, no control character or comma (the filter's list separator), not
# starting or ending with a space, as written and in its normal form (domain.rules.normal_name, what a label is stored
# and shown as). One pattern for the rule, the JSON schema and the comma-separated filter.
_NAME_CHAR = "[^\\u0000-\\u001f\\u007f-\\u009f,]"
_NAME_EDGE = "[^\\s\\u0000-\\u001f\\u007f-\\u009f,]"
NAME_PATTERN = f"{_NAME_EDGE}(?:{_NAME_CHAR}{{0,{LABEL_NAME_CHARS - 2}}}{_NAME_EDGE})?"
_NAME = re.compile(NAME_PATTERN)


def _label_name(value: object) -> bool:
    return (
        isinstance(value, str)
        and _NAME.fullmatch(value) is not None
        and _NAME.fullmatch(normal_name(value)) is not None
    )


LABEL_NAME = Rule(
    f"must be a name of 1 to {LABEL_NAME_CHARS} characters without control characters or commas, not starting or "
    "ending with a space, also in its normal form (NFKC, without format characters, case-folded)",
    _label_name,
    {"maxLength": LABEL_NAME_CHARS, "pattern": f"^{NAME_PATTERN}$"},
)
LABEL_COLOR = one_of(*LABEL_COLORS)
LABEL_DESCRIPTION = text(LABEL_DESCRIPTION_CHARS, what="a description")
# A note's text: some besides spaces, no NUL. Its length (at most NOTE_CHARS) is a rule of the write, answered 422
# by writes.triage for page and API alike; the schema says the limit.
NOTE_BODY = Rule(
    "must be text with some characters besides spaces, without NUL",
    lambda v: isinstance(v, str) and "\x00" not in v and bool(v.strip()),
    {"maxLength": NOTE_CHARS, "pattern": NO_NUL},
    parse=lambda v: v.strip("\r\n"),
)
REVIEW_STATE = one_of(*REVIEW_STATES)
REASON = text(REASON_CHARS, what="a reason")


def lacks_a_reason(state: str, reason: str) -> bool:
    """Whether a review excludes its trial without a reason (what makes it unfit for training), which no door
    accepts."""
    return state == "excluded" and not reason.strip()


@dataclass(frozen=True)
class Swatch:
    """How a label of one colour is drawn: its chip's background and text, 6:1 or better (WCAG AA asks 4.5:1), the
    same on light and dark pages."""

    background: str
    foreground: str


LABEL_PALETTE = {
    "gray": Swatch("#e5e7eb", "#1f2937"),
    "red": Swatch("#fee2e2", "#991b1b"),
    "orange": Swatch("#ffedd5", "#9a3412"),
    "yellow": Swatch("#fef9c3", "#854d0e"),
    "green": Swatch("#dcfce7", "#166534"),
    "teal": Swatch("#ccfbf1", "#115e59"),
    "blue": Swatch("#dbeafe", "#1e40af"),
    "purple": Swatch("#f3e8ff", "#6b21a8"),
    "pink": Swatch("#fce7f3", "#9d174d"),
}


def effective_category(verifier: str | None, human: str | None) -> str | None:
    """The failure category pages and exports use: a reviewer's, when one was set, else the verifier's."""
    return human or verifier


_HUMAN_CATEGORY = f"[A-Za-z0-9_.-]{{1,{FAILURE_CATEGORY_CHARS}}}"
HUMAN_CATEGORY = Rule(
    f"must be a failure category of 1 to {FAILURE_CATEGORY_CHARS} letters, digits, _, . or -",
    lambda v: isinstance(v, str) and re.fullmatch(_HUMAN_CATEGORY, v) is not None,
    {"pattern": f"^{_HUMAN_CATEGORY}$"},
)


MAX_LABEL_FILTERS = 8


def _label_names(value: object) -> tuple[str, ...]:
    names = tuple(value.split(",")) if isinstance(value, str) else ()
    if not names or len(names) > MAX_LABEL_FILTERS or not all(_label_name(name) for name in names):
        raise ValueError(value)
    return names


LABEL_NAMES = Rule(
    f"must be up to {MAX_LABEL_FILTERS} comma-separated label names",
    parse=_label_names,
    schema={"type": "string", "pattern": f"^{NAME_PATTERN}(?:,{NAME_PATTERN}){{0,{MAX_LABEL_FILTERS - 1}}}$"},
)
