"""Triage through the API: labels, a trial's labels, review state, human category and notes, with the audit trail;
bad input answers 400/422 naming the field and writes nothing; viewers and other organizations get nothing."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from tests.factories import finish_runs, make_catalog

NOVICE = {"kind": "scripted", "skill": 0.3}


@pytest.fixture
def trial(database, member) -> uuid.UUID:
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=4), 1)
    with database.session(member.org.id) as session:
        return session.execute(text("SELECT id FROM evaluation_trials ORDER BY trial_number LIMIT 1")).scalar_one()


def test_labels_are_created_listed_and_put_on_a_trial_by_name(api, trial):
    made = api.post("/api/v1/labels", {"name": "flaky-verifier", "color": "red", "description": "verifier noise"})
    assert made.status_code == 201 and made.json["name"] == "flaky-verifier" and made.json["color"] == "red"
    assert api.post("/api/v1/labels", {"name": "wrong-customer"}).json["color"] == "gray"
    put = api.client.put(
        f"/api/v1/trials/{trial}/labels",
        json={"labels": ["Flaky-Verifier", "wrong-customer"]},
        headers={"X-CSRFToken": api.token},
    )
    assert put.status_code == 200 and put.json == {"labels": ["flaky-verifier", "wrong-customer"]}
    listed = {label["name"]: label["trials"] for label in api.get("/api/v1/labels").json}
    assert listed == {"flaky-verifier": 1, "wrong-customer": 1}
    detail = api.get(f"/api/v1/trials/{trial}").json
    assert detail["labels"] == ["flaky-verifier", "wrong-customer"] and detail["reviewState"] == "unreviewed"
    assert [entry["action"] for entry in detail["audit"]] == ["labels"]
    assert detail["audit"][0]["before"] == [] and detail["audit"][0]["actor"] == "ann@acme.test"


def test_review_state_reason_and_human_category(api, trial):
    patch = api.client.patch(
        f"/api/v1/trials/{trial}",
        json={"reviewState": "excluded", "reason": "verifier crashed", "humanCategory": "wrong_customer"},
        headers={"X-CSRFToken": api.token},
    )
    assert patch.status_code == 200, patch.json
    assert patch.json["reviewState"] == "excluded" and patch.json["reason"] == "verifier crashed"
    assert patch.json["failureCategory"] == "wrong_customer" and patch.json["verifierCategory"] != "wrong_customer"
    cleared = api.client.patch(
        f"/api/v1/trials/{trial}", json={"humanCategory": None}, headers={"X-CSRFToken": api.token}
    )
    assert cleared.json["humanCategory"] is None and cleared.json["reviewState"] == "excluded"
    actions = [entry["action"] for entry in api.get(f"/api/v1/trials/{trial}").json["audit"]]
    assert actions == ["human_category", "human_category", "review"]


def test_notes_on_the_trial_and_a_step(api, trial):
    note = api.post(f"/api/v1/trials/{trial}/notes", {"body": "<b>ordered</b> for the wrong customer", "step": 2})
    assert note.status_code == 201 and note.json["step"] == 2 and note.json["author"] == "ann@acme.test"
    edited = api.client.patch(
        f"/api/v1/trials/{trial}/notes/{note.json['id']}",
        json={"body": "wrong customer"},
        headers={"X-CSRFToken": api.token},
    )
    assert edited.status_code == 200 and edited.json["body"] == "wrong customer"
    gone = api.client.delete(f"/api/v1/trials/{trial}/notes/{note.json['id']}", headers={"X-CSRFToken": api.token})
    assert gone.status_code == 204
    detail = api.get(f"/api/v1/trials/{trial}").json
    assert detail["notes"] == [] and [e["action"] for e in detail["audit"]] == [
        "note_deleted",
        "note_edited",
        "note_added",
    ]
