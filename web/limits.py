"""A per-user limit on concurrent expensive requests (searches, comparisons, exports, Harbor task uploads), held
across every web process.

Each such request holds one of its user's AGENTFORGE_MAX_EXPENSIVE_REQUESTS
slots (PostgreSQL advisory locks, see `Database.hold_slot`) while it runs, or
until the stream ends for a streamed export; with every slot held, the request
answers 429 with Retry-After at once, so one member's burst cannot take the
database from everyone else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from flask import current_app, g, request
from werkzeug.exceptions import TooManyRequests

from db.session import HeldSlot
from web.database import get_database

RETRY_AFTER_S = 2
SCOPE = "expensive-request"


def busy_message(limit: int) -> str:
    """The 429's words: how many such requests the user has running and when to try again."""
    running = (
        f"{limit} searches, comparisons, exports or task uploads"
        if limit != 1
        else "a search, comparison, export or task upload"
    )
    return (
        f"You already have {running} running, the most one person may run at once. "
        f"Try again in {RETRY_AFTER_S} seconds, once one has finished."
    )


def expensive(applies: Callable[[], bool] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make a view hold one of the user's slots while it runs (a streamed answer: until the stream ends or the client
    goes); `applies` says whether this request is expensive (a list is, only with a search)."""

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def limited(*args: Any, **kwargs: Any) -> Any:
            if applies is not None and not applies():
                return view(*args, **kwargs)
            limit = current_app.config["AGENTFORGE_MAX_EXPENSIVE_REQUESTS"]
            slot = get_database().hold_slot(SCOPE, g.user_id, limit)
            if slot is None:
                raise TooManyRequests(busy_message(limit), retry_after=RETRY_AFTER_S)
            try:
                response = current_app.make_response(view(*args, **kwargs))
            except BaseException:
                slot.release()
                raise
            if response.is_streamed:  # given back when the last line is out, or when the client goes
                response.response = _releasing(response.response, slot)
                response.call_on_close(slot.release)
            else:
                slot.release()
            return response

        return limited

    return decorate


def _releasing(body: Iterable[Any], slot: HeldSlot) -> Iterator[Any]:
    """The streamed body, giving the slot back once it ends (closing the answer early closes this too)."""
    try:
        yield from body
    finally:
        slot.release()


def searching() -> bool:
    """True when the request carries a full-text search (`q`)."""
    return bool(request.args.get("q", "").strip())
