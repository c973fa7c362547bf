"""Form helpers for templates: `csrf_field()` renders the hidden CSRF input every state-changing form carries."""

from __future__ import annotations

from flask import Flask
from flask_wtf.csrf import generate_csrf
from markupsafe import Markup


def csrf_field() -> Markup:
    """The hidden `csrf_token` input of the session's CSRF token (Flask-WTF checks it on every POST)."""
    return Markup('<input type="hidden" name="csrf_token" value="{}">').format(generate_csrf())


def form_helpers(app: Flask) -> None:
    """Make csrf_field available to every template."""
    app.jinja_env.globals["csrf_field"] = csrf_field
