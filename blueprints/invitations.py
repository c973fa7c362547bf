"""Invitation links: a new person sets their own password and joins; an existing user logs in and accepts."""

from __future__ import annotations

from flask import Blueprint, abort, current_app, flash, redirect, request, session, url_for
from flask_login import current_user, login_user

from blueprints.auth import _load_user, public
from queries.invitations import InvitationOffer, find_invitation
from web.database import get_database
from web.forms import NewAccountForm
from web.htmx import render
from writes.accounts import AccountError, log_in, reserve_login_attempt
from writes.invitations import AccountExists, accept_as_logged_in, accept_with_new_account

bp = Blueprint("invitations", __name__, url_prefix="/invitations")
DEAD_LINK = (
    "This invitation link is unknown, already used, revoked or expired. Ask the organization's owner for a new one."
)


def _offer(token: str) -> InvitationOffer:
    """The pending invitation behind the link, or 404 with the same words for every dead link."""
    with get_database().session() as db, db.begin():
        offer = find_invitation(db, token)
    if offer is None:
        abort(404, description=DEAD_LINK)
    return offer


def _page(
    offer: InvitationOffer, token: str, status: int = 200, error: str | None = None, form: NewAccountForm | None = None
):
    user = current_user.user if current_user.is_authenticated else None
    return render(
        "invitations/accept.html",
        status=status,
        offer=offer,
        token=token,
        logged_in_email=user.email if user else None,
        error=error,
        form=form or NewAccountForm(formdata=None),
    )


def _land_in(org_id, organization_name: str, *, took_over: bool = False):
    """Work in the organization just joined and go to its environments."""
    session["org_id"] = str(org_id)
    flash(f"Welcome to {organization_name}.")
    if took_over:
        flash("The account is yours alone now: its earlier sessions and API tokens ended.")
    return redirect(url_for("environments.index"), 303)


@bp.get("/<token>")
@public
def show(token: str):
    """Which organization invites whom with which role; how to accept (set a password, or log in first)."""
    return _page(_offer(token), token)


@bp.post("/<token>/accept")
@public
def accept(token: str):
    """Accept as the logged-in user, whose email the invitation must name."""
    offer = _offer(token)
    if not current_user.is_authenticated:
        return redirect(url_for("auth.login", next=url_for("invitations.show", token=token)), 303)
    with get_database().session() as db, db.begin():
        org_id = accept_as_logged_in(db, token, current_user.user.session_token)
    if org_id is None:
        return _page(offer, token, 403, f"This invitation is for {offer.email}; log out and log in with that account.")
    return _land_in(org_id, offer.organization_name)


@bp.post("/<token>")
@public
def create_account(token: str):
    """A new person sets their own password: the account is created, joins the organization and is logged in.

    For an email whose account is unproven (made through another organization's link), the link's holder takes it
    over with this password (see accept_with_new_account)."""
    offer = _offer(token)
    form = NewAccountForm()
    if not form.validate():
        return _page(offer, token, 422, form=form)
    password = form.password.data
    with get_database().session() as db, db.begin():
        try:
            email = accept_with_new_account(db, token, password, form.name.data)
        except AccountExists as error:
            return _page(offer, token, 422, str(error))
        except AccountError as error:  # the password's rule (the form checked it too)
            form.password.errors.append(f"{str(error).capitalize()}.")
            return _page(offer, token, 422, form=form)
        if email is None:
            abort(404, description=DEAD_LINK)
        attempt = reserve_login_attempt(db, email, request.remote_addr)  # the throttle still counts this login
        lifetime = current_app.permanent_session_lifetime
        logged_in = log_in(db, attempt.id, email, password, request.remote_addr, lifetime) if attempt.id else None
    session.clear()
    session.permanent = True
    if logged_in and (user := _load_user(logged_in[1])):
        login_user(user)
    return _land_in(offer.organization_id, offer.organization_name, took_over=offer.account == "unproven")
