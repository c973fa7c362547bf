"""JSON API under /api/v1 (session cookie auth; 401 JSON when anonymous)."""

from flask import Blueprint, g, jsonify
from flask_login import current_user

bp = Blueprint("api", __name__, url_prefix="/api/v1")


@bp.get("/me")
def me():
    """Who is logged in, the organization requests are scoped to, and every membership."""
    user = current_user.user
    return jsonify(
        id=str(user.id),
        email=user.email,
        name=user.name,
        organizationId=str(g.org_id),
        role=g.membership.role,
        memberships=[
            {"organizationId": str(m.organization_id), "organizationName": m.organization_name, "role": m.role}
            for m in user.memberships
        ],
    )
