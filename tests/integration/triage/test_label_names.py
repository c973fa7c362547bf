"""Label names in their normal form (NFKC, no format characters, case-folded) and one label per look: `flaky`, `flaky`
with a zero-width space, `FLAKY` and `fIaky` (capital I, drawn like l) are one label, through the API, the page form
and every lookup by name; look-alikes posted at once make one label; another organization's labels are its own; and
migration 0039 merges the look-alikes a database already holds, moving their trials and auditing each."""

from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import text

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import api_ids, migrate, one, parse, rows, texts

NOVICE = {"kind": "scripted", "skill": 0.3}
ZWSP = "\u200b"


@pytest.fixture
def trials(database, member) -> list[uuid.UUID]:
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=3), 1)
    with database.session(member.org.id) as session:
        return list(session.execute(text("SELECT id FROM evaluation_trials ORDER BY trial_number")).scalars())


def label_names(api: ApiClient) -> list[str]:
    return [label["name"] for label in api.get("/api/v1/labels").json]


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("look_alike", "said"),
    [
        (f"fla{ZWSP}ky", "a label named 'flaky' already exists"),
        ("FLAKY", "a label named 'flaky' already exists"),
        ("\ufb02aky", "a label named 'flaky' already exists"),  # the fl ligature
        ("fIaky", "'fIaky' looks like the label 'flaky', which exists"),
        ("f1aky", "'f1aky' looks like the label 'flaky', which exists"),
        ("fl\u0430ky", "looks like the label 'flaky', which exists"),  # a Cyrillic a
    ],
)
def test_a_look_alike_of_a_label_is_refused_naming_it_and_writes_nothing(api, member, count_rows, look_alike, said):
    assert api.post("/api/v1/labels", {"name": "flaky"}).status_code == 201
    before = count_rows("labels", member.org.id)
    refused = api.post("/api/v1/labels", {"name": look_alike})
    assert refused.status_code == 409 and refused.json["error"] == "name taken"
    assert said in refused.json["detail"]
    page = api.client.post("/settings/labels", data={"csrf_token": api.token, "name": look_alike, "color": "gray"})
    shown = one(page.text, ".error-summary a[href='#label-name']").get_text()  # said as a sentence
    assert page.status_code == 409 and said.removeprefix("a label") in shown
    assert count_rows("labels", member.org.id) == before and label_names(api) == ["flaky"]


def test_a_name_is_kept_and_shown_in_its_normal_form_and_found_by_any_of_its_forms(api, trials):
    made = api.post("/api/v1/labels", {"name": f"Flaky{ZWSP}-Verifier"})
    assert made.status_code == 201 and made.json["name"] == "flaky-verifier"
    form = api.client.post("/settings/labels", data={"csrf_token": api.token, "name": "\uff37rong-Customer"})
    assert form.status_code == 303
    page = api.get("/settings/labels").text
    assert "Label wrong-customer added." in page
    assert texts(page, "#labels tbody th .label-chip") == ["flaky-verifier", "wrong-customer"]
    put = api.client.put(
        f"/api/v1/trials/{trials[0]}/labels",
        json={"labels": [f"FLAKY-verifier{ZWSP}", "WRONG-CUSTOMER"]},
        headers={"X-CSRFToken": api.token},
    )
    assert put.status_code == 200 and put.json == {"labels": ["flaky-verifier", "wrong-customer"]}
    twice = api.client.put(
        f"/api/v1/trials/{trials[1]}/labels",
        json={"labels": ["flaky-verifier", "Flaky-Verifier"]},
        headers={"X-CSRFToken": api.token},
    )
    assert twice.status_code == 422 and "is named twice" in twice.json["detail"]
    bulk = api.client.post(
        "/trials/bulk",
        data={"csrf_token": api.token, "trial_id": str(trials[1]), "action": "label", "label": "Wrong-Customer"},
    )
    assert bulk.status_code == 303
    assert sorted(api_ids(api, f"label=WRONG-customer{ZWSP}")) == sorted(str(t) for t in trials[:2])
    assert api_ids(api, "label=flaky-verifier,wrong-customer") == [str(trials[0])]
    trial_page = api.get(f"/trials/{trials[0]}").text
    assert texts(trial_page, "#trial-labels .label-chip") == ["flaky-verifier", "wrong-customer"]


def test_look_alikes_posted_at_once_make_one_label(app, api, member, make_member):
    names = ["flaky", "FLAKY", f"flaky{ZWSP}", "fIaky", "f1aky", "Flaky", "\ufb02aky", f"{ZWSP}flaky"]
    clients = [api] + [
        ApiClient(app.test_client(), make_member(f"r{i}@acme.test", member.org, "member")) for i in range(1, len(names))
    ]
    start = threading.Barrier(len(names))
    answers: dict[str, int] = {}

    def create(client: ApiClient, name: str) -> None:
        start.wait()
        try:
            answers[name] = client.post("/api/v1/labels", {"name": name}).status_code
        except Exception:  # the test client raises what a server answers 500
            answers[name] = 500

    threads = [threading.Thread(target=create, args=pair) for pair in zip(clients, names, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers.values()) == [201] + [409] * (len(names) - 1), answers
    assert len(label_names(api)) == 1


def test_another_organizations_labels_are_its_own(api, app, make_member):
    globex = ApiClient(app.test_client(), make_member("gus@globex.test", "Globex", "member"))
    assert api.post("/api/v1/labels", {"name": "flaky"}).status_code == 201
    assert globex.post("/api/v1/labels", {"name": "fIaky"}).status_code == 201
    assert globex.post("/api/v1/labels", {"name": "FLAKY"}).status_code == 409
    assert label_names(api) == ["flaky"] and label_names(globex) == ["fiaky"]


def _add_label(database, org_id, name: str, age: int, trial_ids=()) -> None:
    """A label as migration 0038 stored it (its name as written), `age` days old, on these trials."""
    with database.session(org_id) as session, session.begin():
        label_id = session.execute(
            text(
                "INSERT INTO labels (organization_id, id, name, description, created_at) "
                "VALUES (:org, gen_random_uuid(), :name, :name, now() - make_interval(days => :age)) RETURNING id"
            ),
            {"org": org_id, "name": name, "age": age},
        ).scalar_one()
        for trial_id in trial_ids:
            session.execute(
                text(
                    "INSERT INTO trial_labels (organization_id, label_id, failed_rank, evaluation_trial_id) "
                    "SELECT organization_id, :label, trial_failed_rank(reward), id FROM evaluation_trials WHERE id = :t"
                ),
                {"label": label_id, "t": trial_id},
            )


def test_the_migration_merges_look_alike_labels_moving_and_auditing_their_trials(
    api, app, database, database_urls, member, make_member, trials
):
    globex = make_member("gus@globex.test", "Globex", "member")
    migrate(database_urls, database, "0038", downgrade=True)
    try:
        first, second, third = trials
        _add_label(database, member.org.id, "flaky", 30, [first])
        _add_label(database, member.org.id, f"flaky{ZWSP}", 20, [second])
        _add_label(database, member.org.id, "fIaky", 10, [first, third])
        _add_label(database, member.org.id, "Wrong-Customer", 5, [third])
        _add_label(database, globex.org.id, "fIaky", 1)
    finally:
        migrate(database_urls, database, "head")

    listed = {label["name"]: label["trials"] for label in api.get("/api/v1/labels").json}
    assert listed == {"flaky": 3, "wrong-customer": 1}
    page = api.get("/settings/labels").text
    assert texts(page, "#labels tbody th .label-chip") == ["flaky", "wrong-customer"]
    labels_of = {t: api.get(f"/api/v1/trials/{t}").json for t in trials}
    assert [labels_of[t]["labels"] for t in trials] == [["flaky"], ["flaky"], ["flaky", "wrong-customer"]]
    merged = {
        t: [(e["action"], e["before"], e["after"]) for e in labels_of[t]["audit"] if e["action"] == "label_merged"]
        for t in trials
    }
    assert merged == {
        first: [("label_merged", "fIaky", "flaky")],
        second: [("label_merged", f"flaky{ZWSP}", "flaky")],
        third: [("label_merged", "fIaky", "flaky")],
    }
    history = parse(api.get(f"/trials/{second}").text).select("#history tbody tr")
    assert [texts(row, "td")[1:] for row in history] == [["an upgrade", "label merged", '"flaky\\u200b"', '"flaky"']]
    assert rows(database, globex.org.id, "SELECT name, look_alike FROM labels") == [("fiaky", "flaky")]
    again = api.post("/api/v1/labels", {"name": "FIAKY"})
    assert again.status_code == 409 and "'FIAKY' looks like the label 'flaky'" in again.json["detail"]
