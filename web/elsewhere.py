"""A trial or run link of another organization the user belongs to: the 404 offers to switch there and open it."""

from __future__ import annotations

import uuid
from typing import NoReturn

from flask import abort, g, request

from queries.accounts import organization_holding
from web.database import request_session
from web.htmx import render


def abort_not_here(kind: str, object_id: uuid.UUID, description: str) -> NoReturn:
    """Answer 404 for a trial or run (`kind`) this organization does not hold; when another organization of the
    user's holds it, the page names that organization and offers "Switch to <organization> and open"."""
    holder = organization_holding(request_session(), kind, object_id)
    if holder is not None and holder.organization_id != g.get("org_id"):
        abort(
            render(
                "error.html",
                status=404,
                title="Not Found",
                detail=f"This {kind} is not in this organization: it belongs to {holder.organization_name}, another "
                "organization you are a member of.",
                switch=holder,
                next_url=request.full_path.rstrip("?"),
            )
        )
    abort(404, description=description)
