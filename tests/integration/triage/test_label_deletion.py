"""Deleting a label: every trial it was on says so in its history (`label deleted`, before: the label, after: none),
on the trial page and in the API; and a deletion racing many reviewers who put the label on trials answers no 500 to
anyone: each reviewer's change lands before the deletion (and is then audited by it) or answers 4xx saying the label
no longer exists."""

from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import text

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import parse, rows, texts

NOVICE = {"kind": "scripted", "skill": 0.3}
ROUNDS = 4  # deletions, each raced by APPLIERS requests
APPLIERS = 34


@pytest.fixture
def trials(database, member) -> list[uuid.UUID]:
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=6), 3)
    with database.session(member.org.id) as session:
        return list(session.execute(text("SELECT id FROM evaluation_trials ORDER BY id")).scalars())


def form_post(api: ApiClient, url: str, **fields):
    return api.client.post(url, data={"csrf_token": api.token, **fields})


def label_id(database, org_id, name: str) -> str:
    return str(rows(database, org_id, "SELECT id FROM labels WHERE name = :n", n=name)[0][0])


def test_a_deleted_label_leaves_an_entry_in_each_of_its_trials_history(api, database, member, trials):
    assert api.post("/api/v1/labels", {"name": "flaky"}).status_code == 201
    assert api.post("/api/v1/labels", {"name": "wrong-customer"}).status_code == 201
    flaky = label_id(database, member.org.id, "flaky")
    for trial in trials[:2]:
        assert form_post(api, f"/trials/{trial}/labels", label_id=flaky).status_code == 303
    assert form_post(api, f"/trials/{trials[0]}/labels", label_id=label_id(database, member.org.id, "wrong-customer"))
    deleted = form_post(api, f"/settings/labels/{flaky}/delete")
    assert deleted.status_code == 303 and "Label flaky deleted." in api.get("/settings/labels").text

    for trial in trials[:2]:
        page = parse(api.get(f"/trials/{trial}").text)
        newest = [td.get_text() for td in page.select("#history tbody tr")[0].select("td")]
        assert newest[1:] == ["ann@acme.test", "label deleted", '"flaky"', "—"]
        audit = api.get(f"/api/v1/trials/{trial}").json["audit"]
        assert {k: audit[0][k] for k in ("actor", "action", "before", "after")} == {
            "actor": "ann@acme.test",
            "action": "label_deleted",
            "before": "flaky",
            "after": None,
        }
    assert texts(parse(api.get(f"/trials/{trials[0]}").text), "#trial-labels .label-chip") == ["wrong-customer"]
    untouched = api.get(f"/api/v1/trials/{trials[2]}").json["audit"]
    assert [entry["action"] for entry in untouched] == []


Answer = tuple[str, int, str, uuid.UUID]  # who (a label's name, or "delete"), status, what it said, the trial


def apply_label(reviewer: ApiClient, door: int, name: str, label: str, trial: uuid.UUID) -> Answer:
    """Put the label on the trial through one of the three doors that do; a refusal in a bulk action (a flash on
    the list it goes back to) counts as 422."""
    if door == 0:  # the page's picker, by id
        answer = form_post(reviewer, f"/trials/{trial}/labels", label_id=label)
        return name, answer.status_code, answer.text, trial
    if door == 1:  # the API, by name
        headers = {"X-CSRFToken": reviewer.token}
        answer = reviewer.client.put(f"/api/v1/trials/{trial}/labels", json={"labels": [name]}, headers=headers)
        return name, answer.status_code, answer.json.get("detail", "") if answer.is_json else answer.text, trial
    answer = form_post(reviewer, "/trials/bulk", trial_id=str(trial), action="label", label=name)
    said = reviewer.get(answer.headers["Location"]).text if answer.status_code == 303 else answer.text
    return name, 422 if "Nothing changed" in said else answer.status_code, said, trial


def race(api: ApiClient, reviewers: list[ApiClient], trials: list[uuid.UUID], name: str, label: str) -> list[Answer]:
    """APPLIERS requests putting the label on trials and one deleting it, all let go at once."""
    start = threading.Barrier(APPLIERS + 1)
    answers: list[Answer] = []

    def apply(number: int) -> None:
        trial = trials[number % len(trials)]
        start.wait()
        try:
            answers.append(apply_label(reviewers[number % len(reviewers)], number % 3, name, label, trial))
        except Exception as error:  # the test client raises what a server answers 500
            answers.append((name, 500, repr(error), trial))

    def delete() -> None:
        start.wait()
        answers.append(("delete", form_post(api, f"/settings/labels/{label}/delete").status_code, "", trials[0]))

    threads = [threading.Thread(target=apply, args=(n,)) for n in range(APPLIERS)]
    threads.append(threading.Thread(target=delete))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


DELETED_FROM = (
    "SELECT evaluation_trial_id FROM trial_audit WHERE action = 'label_deleted' AND before = to_jsonb(CAST(:n AS text))"
)


def test_many_reviewers_putting_a_label_on_trials_while_it_is_deleted_get_no_500(
    app, api, database, member, make_member, trials
):
    reviewers = [api] + [
        ApiClient(app.test_client(), make_member(f"r{i}@acme.test", member.org, "member")) for i in range(1, 6)
    ]
    answers: list[Answer] = []
    audited: dict[str, set[uuid.UUID]] = {}
    for round_number in range(ROUNDS):
        name = f"flaky-{round_number}"
        assert api.post("/api/v1/labels", {"name": name}).status_code == 201
        label = label_id(database, member.org.id, name)
        # One change surely before the deletion and one surely after it, whatever the race's order on a busy machine.
        answers.append(apply_label(api, 0, name, label, trials[-1]))
        answers += race(api, reviewers, trials, name, label)
        answers.append(apply_label(api, 1, name, label, trials[-1]))
        audited[name] = {row[0] for row in rows(database, member.org.id, DELETED_FROM, n=name)}

    assert [(name, said) for name, status, said, _ in answers if status >= 500] == []
    assert len(answers) == ROUNDS * (APPLIERS + 3)
    assert [a for a in answers if a[0] == "delete" and a[1] != 303] == []
    for name, status, said, _trial in answers:
        if 400 <= status < 500:
            assert status in (404, 422) and "no longer exists" in said, (status, said)
        elif name != "delete":
            assert status in (200, 303), (status, said)
    refused = [a for a in answers if 400 <= a[1] < 500]
    assert refused and len(refused) < ROUNDS * (APPLIERS + 2)  # the change after each deletion, not every change
    # A reviewer whose change landed put the label on a trial before the deletion: that trial's history says so.
    for name, trials_of_round in audited.items():
        landed = {trial for n, status, _, trial in answers if n == name and status in (200, 303)}
        assert landed <= trials_of_round, name
    assert rows(database, member.org.id, "SELECT count(*) FROM labels")[0][0] == 0
    assert rows(database, member.org.id, "SELECT count(*) FROM trial_labels")[0][0] == 0
