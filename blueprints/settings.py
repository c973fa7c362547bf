"""Settings area: the organization's members and invitations (owners manage them) and API tokens."""

import uuid

from flask import Blueprint, abort, flash, g, request, url_for
from flask_login import current_user

from blueprints.auth import require_role
from domain.vocabulary import ROLES
from queries.accounts import list_members
from queries.invitations import list_pending_invitations
from queries.tokens import list_org_tokens, list_tokens
from web.database import request_session
from web.fields import PageForm, in_page_words
from web.forms import InviteForm, RoleForm, TokenForm
from web.htmx import redirect_after_write, render
from web.urls import external_url
from writes.accounts import AccountError, change_role, remove_member
from writes.invitations import invite, revoke_invitation
from writes.tokens import create_token, revoke_token

bp = Blueprint("settings", __name__, url_prefix="/settings")


def _page(
    status: int = 200,
    refusals: list[tuple[str | None, str]] | None = None,
    form: InviteForm | None = None,
    invitation_link: str | None = None,
):
    """The members page; `refusals` a refused role change's or removal's lines of the error summary at its top
    (the invitation form's own summary is drawn above that form, from `form`)."""
    can_manage = g.membership.role == "owner"
    members = list_members(request_session())
    return render(
        "settings/members.html",
        status=status,
        members=members,
        owners=sum(1 for m in members if m.role == "owner"),
        me=current_user.user.id,
        invitations=list_pending_invitations(request_session()) if can_manage else [],
        roles=ROLES,
        can_manage=can_manage,
        refusals=refusals or [],
        form=form or InviteForm(formdata=None),
        invitation_link=invitation_link,
    )


@bp.get("/members")
def members():
    """Who belongs to the organization and with which role (everyone may look; owners may change it)."""
    return _page()


def _write(action, success: str, form: PageForm | None = None, ids: dict[str, str | None] | None = None):
    """Run an owner's change; invalid input or a refused change (the last owner demoted or removed, your own
    membership changed unconfirmed) re-renders the page with the error summary at its top (422; a form's refusal
    linked to its input, `ids`) and writes nothing."""
    require_role("owner")
    if form is not None and not form.validate():
        return _page(422, form.summary(ids))
    session = request_session()
    try:
        action(session)
    except AccountError as error:
        session.rollback()
        return _page(422, [(None, in_page_words(str(error), ""))])
    except LookupError as error:
        abort(404, description=str(error))
    session.commit()
    flash(success)
    return redirect_after_write(url_for("settings.members"))


@bp.post("/members")
def add():
    """Invite someone by email with a role; the page shows the link to send them (same answer for any email)."""
    require_role("owner")
    form = InviteForm()
    if not form.validate():
        return _page(422, form=form)
    email, role = form.email.data, form.role.data
    session = request_session()
    try:
        _, token = invite(session, g.org_id, email, role, current_user.user.id)
    except AccountError:  # the email's shape (the role was checked by the form)
        session.rollback()
        form.email.errors.append(f"Enter the new member's email address, like name@example.com, not {email!r}.")
        return _page(422, form=form)
    session.commit()
    link = external_url("invitations.show", token=token)
    flash(f"Invited {email.lower()} as {role}. Send them the link below; it works once, for 7 days.")
    return _page(201, invitation_link=link)


@bp.post("/invitations/<uuid:invitation_id>/revoke")
def revoke_invitation_view(invitation_id: uuid.UUID):
    """Revoke a pending invitation: its link stops working."""
    require_role("owner")
    session = request_session()
    if not revoke_invitation(session, invitation_id):
        abort(404, description=f"No pending invitation {invitation_id} in this organization.")
    session.commit()
    flash("Invitation revoked.")
    return redirect_after_write(url_for("settings.members"))


@bp.post("/members/<uuid:membership_id>/role")
def set_role(membership_id: uuid.UUID):
    """Change a member's role."""
    form = RoleForm()
    role, me, confirmed = form.role.data, current_user.user.id, _confirmed()
    return _write(
        lambda s: change_role(s, membership_id, role, acting_user_id=me, confirmed=confirmed),
        f"Role changed to {role}.",
        form,
        {"role": f"role-{membership_id}"},
    )


@bp.post("/members/<uuid:membership_id>/remove")
def remove(membership_id: uuid.UUID):
    """Remove a member from the organization (yourself only with the confirmation box ticked)."""
    me, confirmed = current_user.user.id, _confirmed()
    return _write(lambda s: remove_member(s, membership_id, acting_user_id=me, confirmed=confirmed), "Member removed.")


def _confirmed() -> bool:
    """The confirmation box of a change to your own membership (a required checkbox on your own row)."""
    return request.form.get("confirm") == "yes"


def _tokens_page(status: int = 200, new_token: str | None = None, form: TokenForm | None = None):
    is_owner = g.membership.role == "owner"
    return render(
        "settings/tokens.html",
        status=status,
        tokens=list_tokens(request_session(), current_user.user.id),
        org_tokens=list_org_tokens(request_session()) if is_owner else [],
        is_owner=is_owner,
        new_token=new_token,
        form=form or TokenForm(formdata=None),
    )


@bp.get("/tokens")
def tokens():
    """Your API tokens in this organization; owners also see every member's (name, prefix, owner, last use)."""
    return _tokens_page()


@bp.post("/tokens")
def create_token_view():
    """Create a token; it is shown on this page once and never again."""
    form = TokenForm()
    if not form.validate():
        return _tokens_page(422, form=form)
    session = request_session()
    _, token = create_token(session, g.org_id, current_user.user.id, form.name.data)
    session.commit()
    return _tokens_page(201, new_token=token)


@bp.post("/tokens/<uuid:token_id>/revoke")
def revoke(token_id: uuid.UUID):
    """Revoke one of your tokens (owners: any token here): requests carrying it answer 401 from now on."""
    session = request_session()
    whose = None if g.membership.role == "owner" else current_user.user.id
    if not revoke_token(session, whose, token_id):
        abort(404, description=f"No live token {token_id} of yours in this organization.")
    session.commit()
    flash("Token revoked.")
    return redirect_after_write(url_for("settings.tokens"))
