"""Login, logout and organization switching; the guard that makes every other route require a login."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    jsonify,
    redirect,
    request,
    session,
    url_for,
)
from flask_login import LoginManager, UserMixin, current_user, login_user, logout_user
from flask_wtf.csrf import CSRFProtect
from werkzeug.exceptions import MethodNotAllowed, SecurityError

from queries.accounts import SessionUser, load_session_user, load_token_user
from queries.workers import unsandboxed_worker_running
from web.database import get_database, request_session
from web.forms import LoginForm, SwitchOrgForm
from web.htmx import render
from web.urls import safe_redirect_target
from writes.accounts import close_auth_session, log_in, mark_organization_used, reserve_login_attempt
from writes.triage import Reviewer

bp = Blueprint("auth", __name__)
csrf = CSRFProtect()  # checks run from the login guard below, so bearer-token API calls can skip them
login_manager = LoginManager()
login_manager.session_protection = "basic"

F = TypeVar("F", bound=Callable)
LOGIN_FAILED = "Invalid email or password."


def throttled_message(seconds: int) -> str:
    """The same words for every throttled login, whether or not the account exists."""
    minutes = max(1, round(seconds / 60))
    return f"Too many failed logins. Try again in {minutes} minute{'s' if minutes != 1 else ''}."


def public(view: F) -> F:
    """Mark a view as reachable without logging in (the login page, health check)."""
    view.is_public = True  # type: ignore[attr-defined]
    return view


def is_api_request() -> bool:
    """True for requests under /api/, which answer JSON instead of pages."""
    return request.path.startswith("/api/")


ROLE_RANK = {"viewer": 0, "member": 1, "owner": 2}


def require_role(minimum: str) -> None:
    """Abort with 403 unless the user's role in the current organization is at least `minimum`."""
    if ROLE_RANK[g.membership.role] < ROLE_RANK[minimum]:
        abort(403, description=f"This needs the {minimum} role; you are a {g.membership.role} here.")


class LoggedInUser(UserMixin):
    """flask-login's view of a SessionUser: its id is the login session token, not the user id.

    A user authenticated by an API token carries the token's organization in `token_org_id`.
    """

    def __init__(self, user: SessionUser, token_org_id: uuid.UUID | None = None) -> None:
        self.user, self.token_org_id = user, token_org_id

    def get_id(self) -> str:
        """Return the session token flask-login keeps in the cookie."""
        return self.user.session_token


@login_manager.user_loader
def _user_from_cookie(token: str) -> LoggedInUser | None:
    """The session cookie's user; an API request with a bearer token is decided by the token alone."""
    if bearer_token() is not None:
        return None  # flask-login then asks the request loader below
    return _load_user(token)


@login_manager.request_loader
def _user_from_bearer_token(_request) -> LoggedInUser | None:
    """The user of an `Authorization: Bearer` token on an API request, in the token's organization."""
    token = bearer_token()
    if token is None:
        return None
    with get_database().session() as db, db.begin():
        found = load_token_user(db, token)
    return LoggedInUser(found[0], token_org_id=found[1]) if found else None


def _load_user(token: str) -> LoggedInUser | None:
    """Resolve the cookie's session token to a live user (None once logged out or expired)."""
    with get_database().session() as db:
        user = load_session_user(db, token)
    return LoggedInUser(user) if user else None


@login_manager.unauthorized_handler
def _unauthorized():
    """API routes answer 401 JSON; pages redirect to the login page, remembering where the user was going."""
    if is_api_request():
        return jsonify(error="authentication required", detail="log in at /login first"), 401
    response = redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
    if request.headers.get("HX-Request") == "true":
        response.headers["HX-Redirect"] = response.location
    return response


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def bearer_token() -> str | None:
    """The token of an `Authorization: Bearer <token>` header on an API request, if any."""
    header = request.headers.get("Authorization", "")
    if is_api_request() and header[:7].lower() == "bearer ":
        return header[7:].strip()
    return None


def _act_for_bearer_token():
    """Act as the token's user in the token's organization (no CSRF: no cookie is involved); 401 when invalid."""
    if not current_user.is_authenticated:
        return jsonify(error="invalid token", detail="the bearer token is unknown, revoked or expired"), 401
    user, org_id = current_user.user, current_user.token_org_id
    g.org_id, g.user_id, g.membership, g.token_auth = org_id, user.id, user.membership_in(org_id), True
    return None


@bp.before_app_request
def require_login_and_org():
    """Refuse anonymous requests to non-public routes, check CSRF, and fix the organization this request works in.

    A bearer token (API routes only) fixes the organization to the token's.
    Otherwise the session cookie's user is used, in the organization chosen in
    this session or else the one they used last, and the chosen organization
    is re-checked against the user's memberships on every request, so a
    removed membership takes effect at once.
    """
    if isinstance(request.routing_exception, SecurityError):
        raise request.routing_exception  # a Host outside TRUSTED_HOSTS: 400 before anything builds a URL from it
    if isinstance(request.routing_exception, MethodNotAllowed):
        return None  # a known URL with a method it does not take: 405 for everyone, before any login check
    if bearer_token() is not None:
        return _act_for_bearer_token()
    view = current_app.view_functions.get(request.endpoint or "")
    if request.endpoint == "static" or getattr(view, "is_public", False):
        if request.method not in SAFE_METHODS:
            csrf.protect()
        return None
    if not current_user.is_authenticated:
        return login_manager.unauthorized()
    if request.method not in SAFE_METHODS:
        csrf.protect()
    user: SessionUser = current_user.user
    membership = user.membership_in(_session_org_id()) or user.landing_membership()
    if membership is None:
        if request.endpoint == "auth.logout":
            return None
        abort(403, description="Your account is not a member of any organization. Ask an owner to add you.")
    session["org_id"] = str(membership.organization_id)
    g.org_id, g.user_id = membership.organization_id, user.id
    g.membership = membership
    return None


def _session_org_id() -> uuid.UUID | None:
    """Return the organization id the cookie asks for, if it is a well-formed UUID."""
    try:
        return uuid.UUID(session.get("org_id", ""))
    except ValueError:
        return None


@bp.app_context_processor
def _layout_context() -> dict:
    """Give base.html the logged-in user, their memberships and the current organization.

    Only once the login guard has resolved the organization: an error page
    rendered because the user could not be loaded (database down) must not try
    to load the user again.
    """
    membership = g.get("membership")
    if membership is None:
        return {}
    unsandboxed = membership.role == "owner" and unsandboxed_worker_running(request_session())
    return {"session_user": current_user.user, "current_membership": membership, "unsandboxed_worker": unsandboxed}


@bp.route("/login", methods=["GET", "POST"])
@public
def login():
    """Show the login form; on a correct email and password start a fresh session and go on."""
    form = LoginForm(next=request.args.get("next", ""))
    if request.method == "GET":
        if current_user.is_authenticated:
            return redirect(safe_redirect_target(form.next.data))
        return render("auth/login.html", form=form)
    if not form.validate_on_submit():
        return render("auth/login.html", form=form, status=400)
    email, address = form.email.data or "", request.remote_addr
    with get_database().session() as db:
        with db.begin():  # committed at once: concurrent attempts see this one in flight
            attempt = reserve_login_attempt(db, email, address)
        if attempt.id is None:
            response = render("auth/login.html", form=form, error=throttled_message(attempt.retry_after), status=429)
            response.headers["Retry-After"] = str(attempt.retry_after)
            return response
        with db.begin():
            logged_in = log_in(
                db, attempt.id, email, form.password.data or "", address, current_app.permanent_session_lifetime
            )
            token = logged_in[1] if logged_in else None
            if token and current_user.is_authenticated:
                close_auth_session(db, current_user.user.session_token)  # the old session id dies with the renewal
    if token is None:
        return render("auth/login.html", form=form, error=LOGIN_FAILED, status=401)
    session.clear()  # renew: nothing from the anonymous session survives the login
    session.permanent = True
    user = _load_user(token)
    if user is None:  # the session just opened is gone (logged out elsewhere in between)
        return render("auth/login.html", form=form, error=LOGIN_FAILED, status=401)
    login_user(user)
    return redirect(safe_redirect_target(form.next.data), 303)


@bp.post("/logout")
def logout():
    """End the login session server-side (the cookie stops working everywhere) and return to the login page."""
    with get_database().session() as db, db.begin():
        close_auth_session(db, current_user.user.session_token)
    logout_user()
    session.clear()
    flash("You have been logged out.")
    return redirect(url_for("auth.login"), 303)


@bp.post("/orgs/switch")
def switch_org():
    """Work in another organization the user belongs to; any other organization is refused with 403."""
    form = SwitchOrgForm()
    if not form.validate():
        abort(400, description=form.error)
    org_id = form.organization_id.data
    membership = current_user.user.membership_in(org_id)
    if membership is None:
        abort(403, description="You are not a member of that organization.")
    with get_database().session(org_id, current_user.user.id) as db, db.begin():
        mark_organization_used(db, current_user.user.id)  # the next login lands here
    session["org_id"] = str(org_id)
    flash(f"Now working in {membership.organization_name}.")
    return redirect(safe_redirect_target(form.next.data), 303)


def current_reviewer() -> Reviewer:
    """The caller as the author of triage changes: their organization, user id and role there."""
    return Reviewer(g.org_id, g.user_id, g.membership.role)
