"""Query-string parsing for pages: malformed values answer 400 with a message, never a 500."""

from __future__ import annotations

import uuid

from flask import abort, request


def optional_uuid(name: str) -> uuid.UUID | None:
    """The query parameter `name` as a UUID, None when absent or empty, 400 when malformed."""
    value = request.args.get(name, "").strip()
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        abort(400, description=f"{name} must be an id (UUID), not {value!r}.")


def page_number() -> int:
    """The `page` query parameter (1 when absent), 400 when it is not a positive integer."""
    value = request.args.get("page", "1")
    if not value.isdigit() or int(value) < 1 or int(value) > 100_000:
        abort(400, description=f"page must be a positive integer, not {value!r}.")
    return int(value)
