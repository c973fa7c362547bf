"""Account API: who is calling, in which organization, with which role."""

from __future__ import annotations

from flask import g, jsonify
from flask_login import current_user

from blueprints.api import bp
from blueprints.api.contract import Reply, operation
from blueprints.api.schemas import Me, Membership


@bp.get("/me")
@operation("me", {200: Reply("The caller", Me)})
def me():
    """Who is logged in, the organization requests are scoped to, and every membership."""
    user = current_user.user
    answer = Me(
        id=user.id,
        email=user.email,
        name=user.name,
        organization_id=g.org_id,
        role=g.membership.role,
        memberships=[
            Membership(organization_id=m.organization_id, organization_name=m.organization_name, role=m.role)
            for m in user.memberships
        ],
    )
    return jsonify(answer.to_json())
