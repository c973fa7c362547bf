"""htmx helpers: render a whole page, or only one named block of it when htmx asks for a fragment."""

from __future__ import annotations

from flask import Response, make_response, redirect, render_template, request
from jinja2_fragments.flask import render_block


def wants_fragment() -> bool:
    """True for an htmx request that swaps a region (not a boosted navigation or a history restore)."""
    headers = request.headers
    return (
        headers.get("HX-Request") == "true"
        and headers.get("HX-Boosted") != "true"
        and headers.get("HX-History-Restore-Request") != "true"
    )


def render(template: str, block: str | None = None, status: int = 200, **context: object) -> Response:
    """Render `template` as a full page, or just `block` for an htmx fragment request; vary on HX-Request."""
    if block is not None and wants_fragment():
        body = render_block(template, block, **context)
    else:
        body = render_template(template, **context)
    response = make_response(body, status)
    response.vary.add("HX-Request")
    return response


def redirect_after_write(location: str) -> Response:
    """After a successful write: 303 for a plain form; for any htmx request (boosted or not) an HX-Redirect,
    so the browser loads the new page whole and its URL lands in the history."""
    if request.headers.get("HX-Request") == "true":
        response = make_response("", 204)
        response.headers["HX-Redirect"] = location
        return response
    return make_response(redirect(location, 303))
