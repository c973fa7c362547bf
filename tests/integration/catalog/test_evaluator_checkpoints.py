"""An evaluator configuration may carry the training checkpoint it evaluates and that checkpoint's step: through the
API (shown by its answer and by GET, one and all) and through the evaluator form (its inputs generated from the same
model, a refusal shown in place); a bad checkpoint or step names its field with nothing written; another
organization's configuration answers 404."""

from __future__ import annotations

import pytest

from tests.conftest import ApiClient
from tests.helpers import attr, one, parse
from tests.integration.catalog.test_catalog_forms import evaluator_form, form_post, refusal_at

SCRIPTED = {"kind": "scripted", "skill": 0.5}


def test_checkpoint_and_step_are_kept_and_shown_by_the_api(api):
    made = api.post(
        "/api/v1/evaluator-configs",
        {"name": "ckpt-2000", "attemptCount": 2, "agent": SCRIPTED, "checkpoint": " runs/7/ckpt-2000 ", "step": 2000},
    )
    assert made.status_code == 201, made.json
    assert (made.json["checkpoint"], made.json["step"]) == ("runs/7/ckpt-2000", 2000)
    plain = api.post("/api/v1/evaluator-configs", {"name": "plain", "attemptCount": 2, "agent": SCRIPTED}).json
    assert (plain["checkpoint"], plain["step"]) == (None, None)
    huge = api.post(
        "/api/v1/evaluator-configs", {"name": "huge", "attemptCount": 2, "agent": SCRIPTED, "step": 2**63 - 1}
    )
    assert huge.status_code == 201 and huge.json["step"] == 2**63 - 1

    shown = api.get(f"/api/v1/evaluator-configs/{made.json['id']}")
    assert shown.status_code == 200 and (shown.json["checkpoint"], shown.json["step"]) == ("runs/7/ckpt-2000", 2000)
    listed = {c["name"]: (c["checkpoint"], c["step"]) for c in api.get("/api/v1/evaluator-configs").json}
    assert listed == {"ckpt-2000": ("runs/7/ckpt-2000", 2000), "plain": (None, None), "huge": (None, 2**63 - 1)}
    page = api.get("/evaluators").get_data(as_text=True)
    assert "runs/7/ckpt-2000" in page and "step 2000" in page


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("extra", "error", "detail"),
    [
        ({"step": -1}, "invalid step", "step must be an integer from 0 to 9223372036854775807, not -1"),
        ({"step": "3"}, "invalid step", "not '3'"),
        ({"step": 1.5}, "invalid step", "not 1.5"),
        ({"step": 2**63}, "invalid step", "step must be an integer from 0"),
        ({"checkpoint": "c" * 201}, "invalid checkpoint", "checkpoint must be text of at most 200 characters"),
        ({"checkpoint": 7}, "invalid checkpoint", "checkpoint must be text"),
        ({"checkpoint": "a\x00b"}, "invalid checkpoint", "without NUL"),
    ],
)
def test_a_bad_checkpoint_or_step_names_its_field_and_writes_nothing(api, count_rows, extra, error, detail):
    answer = api.post("/api/v1/evaluator-configs", {"name": "bad", "attemptCount": 2, "agent": SCRIPTED, **extra})
    assert answer.status_code == 400, answer.json
    assert answer.json["error"] == error and detail in answer.json["detail"], answer.json
    assert count_rows("evaluator_configs", api.org) == 0


def test_the_evaluator_form_takes_checkpoint_and_step(api, count_rows):
    page = parse(api.get("/evaluators/new").get_data(as_text=True))
    assert attr(one(page, "#f-step"), "inputmode") == "numeric" and one(page, "#f-checkpoint")
    assert "from 0 to 9223372036854775807" in one(page, "#f-step-help").get_text()
    refused = form_post(api, "/evaluators/new", evaluator_form("ckpt", checkpoint="runs/7", step="-5"))
    assert refused.status_code == 422
    assert "Step must be a whole number from 0 to 9223372036854775807" in refusal_at(refused.text, "f-step")
    assert count_rows("evaluator_configs", api.org) == 0
    made = form_post(api, "/evaluators/new", evaluator_form("ckpt", checkpoint="runs/7/ckpt-500", step="500"))
    assert made.status_code == 303, made.text
    listed = api.get("/api/v1/evaluator-configs").json
    assert [(c["name"], c["checkpoint"], c["step"]) for c in listed] == [("ckpt", "runs/7/ckpt-500", 500)]


@pytest.mark.leak
def test_another_organizations_evaluator_configuration_is_not_found(api, app, make_member):
    made = api.post("/api/v1/evaluator-configs", {"name": "mine", "attemptCount": 2, "agent": SCRIPTED, "step": 1})
    bob = ApiClient(app.test_client(), make_member("bob@b.test", "Org B"))
    answer = bob.get(f"/api/v1/evaluator-configs/{made.json['id']}")
    assert answer.status_code == 404 and answer.json["detail"] == f"no evaluator configuration {made.json['id']}"
    assert bob.get("/api/v1/evaluator-configs").json == []
