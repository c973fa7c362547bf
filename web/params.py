"""Query-string and form parsing, one helper per type: malformed values answer 400 with a message, never a 500."""

from __future__ import annotations

import math
import re
import uuid
from typing import Any

from flask import abort, request

from domain.json_depth import loads

_INTEGER = re.compile(r"-?[0-9]{1,12}")  # ASCII digits only: str.isdigit() also accepts "²" and "٣", int() not all


class NotJsonNumber(ValueError):
    """NaN, Infinity or -Infinity where JSON wants a number."""


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

    return loads(text, parse_constant=refuse, parse_float=finite)


def parse_int(value: str) -> int | None:
    """`value` as an integer when it is ASCII digits (optionally after a minus), else None."""
    value = value.strip(" \t")
    return int(value) if _INTEGER.fullmatch(value) else None


def parse_uuid(value: str) -> uuid.UUID | None:
    """`value` as a UUID in its usual 36-character (or 32 hex digit) form, else None."""
    value = value.strip(" \t")
    if not re.fullmatch(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}", value):
        return None
    return uuid.UUID(value)


def optional_uuid(name: str) -> uuid.UUID | None:
    """The query parameter `name` as a UUID, None when absent or empty, 400 when malformed."""
    value = request.args.get(name, "").strip(" \t")
    if not value:
        return None
    parsed = parse_uuid(value)
    if parsed is None:
        abort(400, description=f"{name} must be an id (UUID), not {value!r}.")
    return parsed


def query_int(name: str, default: int, low: int, high: int) -> int:
    """The query parameter `name` as an integer in low..high (`default` when absent), 400 otherwise."""
    value = request.args.get(name)
    if value is None:
        return default
    number = parse_int(value)
    if number is None or not low <= number <= high:
        abort(400, description=f"{name} must be a whole number from {low} to {high}, not {value!r}.")
    return number


def page_number() -> int:
    """The `page` query parameter (1 when absent), 400 when it is not a positive integer."""
    return query_int("page", 1, 1, 100_000)


def bounded_text(name: str, value: str, limit: int) -> str:
    """`value` (of the parameter or field `name`) stripped, 400 when longer than `limit` or with a NUL character."""
    value = value.strip()
    if len(value) > limit or "\x00" in value:
        abort(400, description=f"{name} must be text of at most {limit} characters without NUL.")
    return value


def query_text(name: str, limit: int) -> str | None:
    """The query parameter `name` stripped, None when absent or empty, 400 when longer than `limit` or with NUL."""
    return bounded_text(name, request.args.get(name, ""), limit) or None


def given_args() -> dict[str, str]:
    """The query parameters that hold a value (a GET form sends its empty fields too), the first of each name."""
    return {name: value for name, value in request.args.items() if value.strip()}
