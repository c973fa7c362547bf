"""AgentForge: the application factory (config, database, blueprints, error pages); the CLI lives in cli.py."""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from flask import Flask, Response, jsonify, make_response, request
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DataError, OperationalError
from werkzeug.exceptions import HTTPException, SecurityError

from blueprints import register_blueprints
from blueprints.auth import csrf
from cli import register_commands
from db.migrate import migrate
from db.session import Database
from db.urls import DEFAULT_DATABASE, resolve_urls
from domain.errors import DomainError
from domain.install import instance_folder, shipped_folder
from domain.limits import DEFAULT_MAX_EXPENSIVE_REQUESTS, DEFAULT_MAX_RUNS_PER_ORG, max_trial_timeout_s
from domain.secret_env import create_once, load_secrets_key
from web import database, security
from web.forms import form_helpers
from web.htmx import render
from web.text import duration, visible_control_characters
from web.urls import external_url_helpers, trusted_hosts


def create_app(test_config: dict | None = None) -> Flask:
    """Build the app: config from the environment (or `test_config`), database, blueprints, CSRF, errors."""
    app = Flask(
        __name__,
        instance_path=str(instance_folder()),
        template_folder=str(shipped_folder("templates")),
        static_folder=str(shipped_folder("static")),
    )
    app.config.from_mapping(
        DATABASE_URL=os.environ.get("DATABASE_URL"),
        ADMIN_DATABASE_URL=os.environ.get("ADMIN_DATABASE_URL"),
        AGENTFORGE_DATA_DIR=os.environ.get("AGENTFORGE_DATA_DIR", str(Path(app.instance_path) / "pgdata")),
        AGENTFORGE_DATABASE=os.environ.get("AGENTFORGE_DATABASE", DEFAULT_DATABASE),
        SECRET_KEY=os.environ.get("SECRET_KEY"),
        AGENTFORGE_SECRETS_KEY=os.environ.get("AGENTFORGE_SECRETS_KEY"),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=os.environ.get("SESSION_COOKIE_SECURE", "") == "1",
        PERMANENT_SESSION_LIFETIME=timedelta(days=14),
        WTF_CSRF_TIME_LIMIT=None,
        WTF_CSRF_CHECK_DEFAULT=False,  # the login guard calls csrf.protect() itself (bearer-token calls skip it)
        MIGRATE_ON_START=True,
        AGENTFORGE_MAX_RUNS_PER_ORG=int(os.environ.get("AGENTFORGE_MAX_RUNS_PER_ORG", DEFAULT_MAX_RUNS_PER_ORG)),
        AGENTFORGE_MAX_TRIAL_TIMEOUT_S=max_trial_timeout_s(),
        AGENTFORGE_MAX_EXPENSIVE_REQUESTS=int(
            os.environ.get("AGENTFORGE_MAX_EXPENSIVE_REQUESTS", DEFAULT_MAX_EXPENSIVE_REQUESTS)
        ),
        AGENTFORGE_BASE_URL=os.environ.get("AGENTFORGE_BASE_URL") or None,
        AGENTFORGE_TRUSTED_HOSTS=os.environ.get("AGENTFORGE_TRUSTED_HOSTS") or None,
    )
    if test_config:
        app.config.update(test_config)
    _check_base_url(app.config["AGENTFORGE_BASE_URL"])
    if app.config["AGENTFORGE_MAX_EXPENSIVE_REQUESTS"] < 1:
        raise ValueError(
            "AGENTFORGE_MAX_EXPENSIVE_REQUESTS must be 1 or more (searches, comparisons, exports, task uploads)"
        )
    if app.config.get("TRUSTED_HOSTS") is None:  # an untrusted Host header answers 400 (Flask checks it)
        app.config["TRUSTED_HOSTS"] = trusted_hosts(
            app.config["AGENTFORGE_BASE_URL"], app.config["AGENTFORGE_TRUSTED_HOSTS"]
        )
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = _instance_secret_key(Path(app.instance_path))

    secrets_key = load_secrets_key(app.config["AGENTFORGE_SECRETS_KEY"], Path(app.instance_path))

    urls = resolve_urls(app.config)
    if app.config["MIGRATE_ON_START"] and not app.config["DATABASE_URL"]:
        migrate(urls, secrets_key)  # embedded default: the cluster is ours, bring it to the newest schema
    pool_size = int(os.environ.get("DB_POOL_SIZE", "10"))
    database.init_app(app, Database(urls, pool_size=pool_size, secrets_key=secrets_key))

    app.jinja_env.finalize = visible_control_characters
    app.jinja_env.filters["duration"] = duration
    register_blueprints(app)
    security.init_app(app)
    external_url_helpers(app)
    form_helpers(app)
    csrf.init_app(app)
    _register_error_handlers(app)
    register_commands(app)
    return app


def _check_base_url(base_url: str | None) -> None:
    """Refuse to start with an AGENTFORGE_BASE_URL that is not an absolute http(s) URL without query or fragment."""
    if base_url is None:
        return
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"AGENTFORGE_BASE_URL must look like https://agentforge.example.com, not {base_url!r}")


def _instance_secret_key(instance: Path) -> str:
    """Return the secret key kept in instance/secret_key, creating it once, so sessions survive restarts."""
    return create_once(instance / "secret_key", lambda: secrets.token_hex(32))


def _register_error_handlers(app: Flask) -> None:
    """Errors answer JSON under /api/ and a readable page elsewhere, always with the reason."""

    def respond(status: int, title: str, detail: str):
        if request.path.startswith("/api/"):
            return jsonify(error=title.lower(), detail=detail), status
        return render("error.html", status=status, title=title, detail=detail)

    @app.errorhandler(DomainError)
    def domain_error(error: DomainError):
        """Input the domain refused: its status, and the reason (JSON `{"error", "detail"}` under /api/)."""
        if request.path.startswith("/api/"):
            return jsonify(error=error.error, detail=str(error)), error.status
        return render("error.html", status=error.status, title=error.error.capitalize(), detail=str(error))

    @app.errorhandler(CSRFError)
    def csrf_error(error: CSRFError):
        return respond(400, "CSRF token missing or invalid", f"{error.description} Reload the page and try again.")

    @app.errorhandler(SecurityError)
    def untrusted_host(error: SecurityError):
        """A Host header outside TRUSTED_HOSTS: plain 400 (no URL can be built for it), the host never echoed."""
        return Response(
            "Bad Request: the Host header names a host this server does not serve.\n", 400, mimetype="text/plain"
        )

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        response = make_response(respond(error.code or 500, error.name, error.description or ""))
        for name, value in error.get_headers():  # e.g. Allow on 405
            if name.lower() != "content-type":
                response.headers[name] = value
        return response

    @app.errorhandler(DataError)
    def value_refused(error: DataError):
        """A value PostgreSQL cannot store (a NUL character, an out-of-range number): 400, nothing written."""
        detail = str(error.orig).splitlines()[0] if error.orig else "a value was refused"
        return respond(400, "Bad Request", f"A value was refused: {detail}.")

    @app.errorhandler(OperationalError)
    def database_unavailable(error: OperationalError):
        """503 while PostgreSQL is unreachable; rendered without context processors (they would need the DB)."""
        app.logger.warning("database unavailable: %s", error.orig)
        detail = "The database is unreachable right now. Nothing was changed; retry in a moment."
        if request.path.startswith("/api/"):
            response = make_response(jsonify(error="service unavailable", detail=detail), 503)
        else:
            page = app.jinja_env.get_template("unavailable.html").render(detail=detail, path=request.path)
            response = make_response(page, 503)
        response.headers["Retry-After"] = "5"
        return response
