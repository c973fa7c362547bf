"""Links built once per page (web.urls.IdLink) are the text url_for gives for each row, whatever the trail."""

from __future__ import annotations

import uuid

import pytest
from flask import Flask, url_for

from models.base import new_id
from web.urls import IdLink

TRAILS = [
    {},
    {"q": '"quota exceeded" -x & y#z /?%', "sort": "-reward"},
    {"q": "Straße İstanbul ΟΔΟΣ", "environmentId": str(uuid.uuid4()), "status": "failed"},
]


@pytest.fixture
def app() -> Flask:
    app = Flask(__name__)
    app.add_url_rule("/trials/<uuid:trial_id>", "show", lambda trial_id: "")
    return app


@pytest.mark.parametrize("trail", TRAILS)
@pytest.mark.parametrize("anchor", [None, "step-3"])
def test_a_link_is_the_url_for_text_of_its_row(app, trail, anchor):
    with app.test_request_context("/"):
        link = IdLink.of("show", "trial_id", **trail)
        for row_id in (uuid.uuid4(), new_id(), uuid.UUID(int=0)):
            assert link(row_id, anchor) == url_for("show", trial_id=row_id, _anchor=anchor, **trail)
