"""Settings area: the organization's members; owners add, remove and change roles."""

import uuid

from flask import Blueprint, abort, flash, g, request, url_for

from blueprints.auth import require_role
from blueprints.htmx import redirect_after_write, render
from db import request_session
from models.accounts import ROLES, AccountError, Organization, add_member, change_role, list_members, remove_member

bp = Blueprint("settings", __name__, url_prefix="/settings")


def _page(status: int = 200, error: str | None = None, form=None):
    return render(
        "settings/members.html",
        status=status,
        members=list_members(request_session()),
        roles=ROLES,
        can_manage=g.membership.role == "owner",
        error=error,
        form=form or {},
    )


@bp.get("/members")
def members():
    """Who belongs to the organization and with which role (everyone may look; owners may change it)."""
    return _page()


def _write(action, success: str, form=None):
    """Run an owner's change; a refused change re-renders the page with the reason (422) and writes nothing."""
    require_role("owner")
    session = request_session()
    try:
        action(session)
    except AccountError as error:
        session.rollback()
        return _page(422, str(error), form)
    except LookupError as error:
        abort(404, description=str(error))
    session.commit()
    flash(success)
    return redirect_after_write(url_for("settings.members"))


@bp.post("/members")
def add():
    """Add a member by email (creating the account when a password is given)."""
    form = request.form
    email = form.get("email", "").strip()
    if not email:
        require_role("owner")
        return _page(422, "Enter the new member's email.", form)
    org = request_session().get_one(Organization, g.org_id)
    return _write(
        lambda s: add_member(s, org, email, form.get("role", ""), form.get("password") or None),
        f"Added {email} as {form.get('role')}.",
        form,
    )


@bp.post("/members/<uuid:membership_id>/role")
def set_role(membership_id: uuid.UUID):
    """Change a member's role."""
    role = request.form.get("role", "")
    return _write(lambda s: change_role(s, membership_id, role), f"Role changed to {role}.")


@bp.post("/members/<uuid:membership_id>/remove")
def remove(membership_id: uuid.UUID):
    """Remove a member from the organization."""
    return _write(lambda s: remove_member(s, membership_id), "Member removed.")
