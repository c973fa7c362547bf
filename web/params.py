"""Query-string and form parsing by domain.rules' rules: malformed values answer 400 naming the parameter, never a
500."""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import Any

from flask import abort, request

from domain import rules
from domain.json_depth import loads
from domain.rules import UUID_RULE, Refused, Rule, integer_from, integer_text, text

_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


class NotJsonNumber(ValueError):
    """NaN, Infinity or -Infinity where JSON wants a number."""


class NotText(ValueError):
    """A string holding half of a UTF-16 surrogate pair (JSON can escape one; no UTF-8 text holds it)."""


def strict_json(text: str) -> Any:
    """`text` parsed as JSON; ValueError for what is not JSON, NotJsonNumber for the NaN, Infinity and -Infinity
    that Python's json module reads and writes (no other JSON parser reads them, and jsonb refuses them) and for
    a number too large for a double (which it reads as infinity), TooDeep for nesting deeper than MAX_JSON_DEPTH."""

    def refuse(constant: str) -> Any:
        raise NotJsonNumber(f"{constant} is not a JSON number")

    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):  # 1e999: Python reads it as infinity
            raise NotJsonNumber(f"{number[:40]} is too large a number")
        return value

    parsed = loads(text, parse_constant=refuse, parse_float=finite)
    if _ESCAPED_SURROGATE.search(text):  # a pair is one character once read; a lone half is no text PostgreSQL takes
        try:
            json.dumps(parsed, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise NotText("a lone UTF-16 surrogate (\\ud800-\\udfff without its pair) is not text") from None
    return parsed


def parse_int(value: str) -> int | None:
    """`value` as an integer by domain.rules' query-string reading (ASCII digits, "4.0" is 4), else None."""
    try:
        number = integer_text(value)
    except ValueError:
        return None
    return int(number)


def parse_uuid(value: str) -> uuid.UUID | None:
    """`value` as a UUID by domain.rules' one UUID policy (no urn:uuid:, no braces), else None."""
    try:
        return rules.parse_uuid(value)
    except ValueError:
        return None


def query_value(name: str, rule: Rule) -> Any:
    """The query parameter `name` read by `rule` (None when absent or empty), 400 naming it when refused."""
    value = request.args.get(name, "").strip(" \t")
    if not value:
        return None
    try:
        return rule.apply_text(value)
    except Refused as refused:
        abort(400, description=f"{name} {refused.says}.")


def optional_uuid(name: str) -> uuid.UUID | None:
    """The query parameter `name` as a UUID, None when absent or empty, 400 when malformed."""
    return query_value(name, UUID_RULE)


def query_int(name: str, default: int, low: int, high: int) -> int:
    """The query parameter `name` as an integer in low..high (`default` when absent), 400 otherwise."""
    if request.args.get(name) is None:
        return default
    number = query_value(name, integer_from(low, high))
    if number is None:  # given empty
        abort(400, description=f"{name} {integer_from(low, high).says}, not ''.")
    return int(number)


def page_number() -> int:
    """The `page` query parameter (1 when absent), 400 when it is not a positive integer."""
    return query_int("page", 1, 1, 100_000)


def bounded_text(name: str, value: str, limit: int) -> str:
    """`value` (of the parameter or field `name`) stripped, 400 when longer than `limit` or with a NUL character."""
    try:
        return str(text(limit).apply(value))
    except Refused as refused:
        abort(400, description=f"{name} {refused.says}.")


def query_text(name: str, limit: int) -> str | None:
    """The query parameter `name` stripped, None when absent or empty, 400 when longer than `limit` or with NUL."""
    return bounded_text(name, request.args.get(name, ""), limit) or None


def given_args() -> dict[str, str]:
    """The query parameters that hold a value (a GET form sends its empty fields too), the first of each name."""
    return {name: value for name, value in request.args.items() if value.strip()}
