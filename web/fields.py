"""What every page form shares: the base class, fields that parse as web/params.py does (text, ids, numbers), and
`Follows`, the WTForms validator of a domain.rules rule."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from flask import request
from flask_wtf import FlaskForm
from wtforms import IntegerField, StringField
from wtforms.validators import StopValidation

from domain.rules import Refused, Rule
from web.params import bounded_text, parse_int, parse_uuid


class Follows:
    """A WTForms validator from a domain.rules rule: the posted value read as a query-string value is (the API's
    and the query strings' rule, word for word); `data` becomes what the rule gives, a refusal reads
    "<label> <what the rule says>." (or `message`, when the page has its own sentence for every refusal)."""

    def __init__(self, rule: Rule, label: str, message: str | None = None) -> None:
        self.rule, self.label, self.message = rule, label, message
        # The rule's bounds as the field's flags, for the page's min/max attributes and its label (1 to 8).
        bounds = {"min": rule.schema.get("minimum"), "max": rule.schema.get("maximum")}
        self.field_flags = {flag: value for flag, value in bounds.items() if value is not None}

    def __call__(self, form: Any, field: Any) -> None:
        value = field.raw_data[0] if field.raw_data else field.data
        try:
            field.data = self.rule.apply_text(value) if isinstance(value, str) else self.rule.apply(value)
        except Refused as refused:
            empty = value is None or (isinstance(value, str) and not value.strip())
            raise StopValidation(self.message or rule_in_page_words(self.label, refused.says, empty)) from None


_NOT_VALUE = re.compile(r", not (?:'.*'|\".*\"|None|-?[0-9][0-9.e+-]*|True|False)$", re.DOTALL)
_NOT_TEXT = re.compile(r", not (?:'.*'|\".*\")$", re.DOTALL)  # a text value (a count, "not 10001", says more)
_TEXT = re.compile(r"must be (?:text|an? [a-z ]+) of (1 to|at most) ([0-9]+) characters without NUL")
_WHOLE = re.compile(r"must be an integer from (\S+) to (\S+)")


def _article(words: str) -> str:
    return ("an " if words[:1].lower() in "aeiou" else "a ") + words


def rule_in_page_words(label: str, says: str, empty: bool) -> str:
    """A rule's refusal under the input labelled `label`, in the page's words: not the API's ("Attempt count must be
    an integer from 1 to 8, not '0'" → "Attempt count must be a whole number from 1 to 8."; nothing entered → "Enter
    a name."); the value is in the input already, and NUL is not typed. `says` follows the field's name."""
    words = label if label[1:2].isupper() else label[:1].lower() + label[1:]
    says = _NOT_VALUE.sub("", says.strip())
    text, whole = _TEXT.fullmatch(says), _WHOLE.fullmatch(says)
    if text and not empty:
        return f"{label} must be at most {text.group(2)} characters."
    if text:
        return f"Enter {_article(words)} of 1 to {text.group(2)} characters."
    if whole:
        low, high = whole.groups()
        return f"{'Enter' if empty else label + ' must be'} a whole number from {low} to {high}."
    if says.startswith("must be one of "):
        return f"Choose {_article(words)}: {says.removeprefix('must be ')}."
    if empty:
        return f"Enter {_article(words)}."
    return f"{label} {says}."


class PageForm(FlaskForm):
    """A dashboard form: filled from the posted form fields only; `error` is the message a page shows for it.

    The login guard has already checked the CSRF token of every POST, so the form's own check passes at once.
    """

    class Meta:
        def wrap_formdata(self, form: Any, formdata: Any) -> Any:
            """The posted form fields (a JSON body never fills a page form); none on GET or when given None."""
            return request.form if formdata is not None and form.is_submitted() else None

    @property
    def error(self) -> str | None:
        """The first message of the first field that has one, fields in the order the class declares them."""
        return next((errors[0] for errors in self.errors.values() if errors), None)

    def summary(self, ids: Mapping[str, str | None] | None = None) -> list[tuple[str | None, str]]:
        """Every refused field's first message with the id of its input (the field's own, or `ids[name]` when the
        page names the input otherwise, None for a button's value), fields in the order the class declares them:
        the lines of the page's error summary (templates/macros.html error_summary)."""
        ids = ids or {}
        return [(ids.get(field.name, field.id), field.errors[0]) for field in self if field.errors]


def in_page_words(message: str, field: str) -> str:
    """A write's refusal about one input as the page says it under that input: without the API's leading
    "<field>: " and as a sentence ("name: a label named 'x' already exists" becomes "A label named 'x' already
    exists."); the value refused is in the input already, so a trailing ", not '<text>'" is left out."""
    text = _NOT_TEXT.sub("", message.removeprefix(f"{field}: ").strip())
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else f"{text}."


class BoundedText(StringField):
    """Text stripped of surrounding whitespace ('' when absent). Longer than `limit` characters or with a NUL,
    no page of ours sent it: the request answers 400 with a message (web.params.bounded_text)."""

    def __init__(self, limit: int, validators: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("default", "")
        super().__init__(validators=validators, **kwargs)
        self.limit = limit

    def process_formdata(self, valuelist: list[Any]) -> None:
        """Strip and bound the posted value."""
        self.data = bounded_text(self.name, valuelist[0] if valuelist else "", self.limit)


class UUIDField(StringField):
    """An id chosen in a select (web.params.parse_uuid's forms): `data` is the UUID, None when absent or malformed,
    so DataRequired says which choice is missing."""

    def process_formdata(self, valuelist: list[Any]) -> None:
        """Parse the posted value."""
        self.data = parse_uuid(valuelist[0]) if valuelist else None


class SubmissionKeyField(UUIDField):
    """The hidden key of one rendering of a form that queues a run: a fresh one on every page, kept when the form is
    redrawn with its errors, so one submission never queues two runs (None when a POST carries none)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("default", uuid.uuid4)
        super().__init__(**kwargs)


class WholeNumberField(IntegerField):
    """A whole number in ASCII digits (web.params.parse_int: not "²", "٣" or "1.5"): None when it is not one, so
    Optional() lets a blank field through and NumberRange refuses everything else with the field's message."""

    def process_formdata(self, valuelist: list[Any]) -> None:
        """Parse the posted value."""
        self.data = parse_int(valuelist[0]) if valuelist else None
