"""Response hardening: security headers on every response and the request size limit.

The Content-Security-Policy allows no inline script at all: htmx loads from
/static and is configured by a <meta> tag (no eval, no indicator styles), and
charts are SVG attributes, not inline styles.
"""

from __future__ import annotations

from flask import Flask, Response, abort, request

from domain.harbor_dataset import MAX_DATASET_UPLOAD_BYTES
from domain.harbor_task import MAX_TASK_UPLOAD_BYTES

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# The headers of every download of an organization's trials (exports, trajectories, artifacts): never cached.
PRIVATE = {"X-Privacy-Class": "PRIVATE", "Cache-Control": "no-store"}
MAX_REQUEST_BYTES = 1024 * 1024  # JSON bodies and forms; larger requests answer 413
# Endpoints that take more: a Harbor task's folder (domain.harbor_task.MAX_TASK_UPLOAD_BYTES) and a folder of them
# (domain.harbor_dataset.MAX_DATASET_UPLOAD_BYTES).
LARGER_BODIES = {
    "api.upload_harbor_task": MAX_TASK_UPLOAD_BYTES,
    "api.upload_harbor_dataset": MAX_DATASET_UPLOAD_BYTES,
}


def init_app(app: Flask) -> None:
    """Add the headers to every response and cap request bodies."""
    if app.config.get("MAX_CONTENT_LENGTH") is None:  # Flask's default is no limit
        app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES

    def refuse_oversized_bodies() -> None:
        limit = LARGER_BODIES.get(request.endpoint or "", app.config["MAX_CONTENT_LENGTH"])
        request.max_content_length = limit  # also for a body sent without Content-Length (chunked)
        if request.content_length is not None and request.content_length > limit:
            abort(413, description=f"Request bodies are limited to {limit // 1024} KiB.")

    # First of every request's functions: the login guard's CSRF check reads the form, which opens the body's stream
    # with the limit in force then (a session's upload past 1 MiB answered 413 when this ran after it).
    app.before_request_funcs.setdefault(None, []).insert(0, refuse_oversized_bodies)

    @app.after_request
    def add_security_headers(response: Response) -> Response:
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response
