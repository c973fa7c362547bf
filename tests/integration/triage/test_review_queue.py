"""The review queue: an explorer filter opened as a queue, one trial at a time; a decision (reviewed or excluded,
labels, a human category picked from the organization's) is one request whose answer is the next trial; `u` undoes
the newest decision exactly; `p`/`n` walk the queue whatever was decided; a trial one reviewer has open is skipped
by another's queue for ten minutes and decisions on it from there are refused; another organization's queue, trial
or label answers 404 and writes nothing."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import text

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import (
    api_ids,
    attr,
    error_summary_lines,
    is_fragment,
    is_whole_page,
    one,
    parse,
    table_counts,
    texts,
)

NOVICE = {"kind": "scripted", "skill": 0.3}
FAILED = "reviewState=unreviewed&rewardBand=failed"
HTMX = {"HX-Request": "true"}
UNREVIEWED = ("unreviewed", "", None)


@pytest.fixture
def reviewer(app, database, member) -> ApiClient:
    """ann@acme.test with 24 trials (most failed) and two labels."""
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=8), 3)
    api = ApiClient(app.test_client(), member)
    for name, color in (("flaky-verifier", "red"), ("wrong-customer", "orange")):
        assert api.post("/api/v1/labels", {"name": name, "color": color}).status_code == 201
    return api


def start(api: ApiClient, query: str = FAILED) -> tuple[str, int]:
    """Start a queue over `query` as the explorer's button does; (queue id, the position it opened at)."""
    response = api.client.post(f"/queue?{query}", data={"csrf_token": api.token})
    assert response.status_code == 303, response.text
    found = re.fullmatch(r"/queue/([0-9a-f-]{36})/(\d+)", response.headers["Location"])
    assert found, response.headers["Location"]
    return found.group(1), int(found.group(2))


def shown_trial(html: str) -> str:
    """The id of the trial a queue page shows (its decision form posts to it)."""
    return attr(one(html, "form#decision"), "action").rsplit("/", 1)[1]


def decide(api: ApiClient, queue: str, page: str, decision: str = "reviewed", htmx: bool = True, **fields: Any):
    """Post the page's decision form as the panel would (what it showed, plus `fields`)."""
    form = one(page, "form#decision")
    data: dict[str, Any] = {
        "csrf_token": api.token,
        "decision": decision,
        "shown_label_id": [attr(i, "value") for i in form.select("input[name=shown_label_id]")],
        "label_id": [attr(i, "value") for i in form.select("input[name=label_id][checked]")],
        "shown_category": attr(one(form, "input[name=shown_category]"), "value"),
        "human_category": attr(one(form, "select#human_category option[selected]"), "value"),
        "reason": attr(one(form, "input#reason"), "value"),
        **fields,
    }
    return api.client.post(attr(form, "action"), data=data, headers=HTMX if htmx else {})


def undo(api: ApiClient, queue: str, position: int = 1, htmx: bool = True):
    return api.client.post(
        f"/queue/{queue}/undo", data={"csrf_token": api.token, "position": str(position)}, headers=HTMX if htmx else {}
    )


def triage_rows(database, org_id, trial: str) -> dict[str, Any]:
    """The trial's triage as the database holds it (no review row reads as unreviewed, as every page reads it)."""
    with database.session(org_id) as session:
        review = session.execute(
            text(
                "SELECT coalesce(r.review_state, 'unreviewed'), coalesce(r.reason, ''), r.human_category "
                "FROM evaluation_trials t LEFT JOIN trial_reviews r ON r.evaluation_trial_id = t.id WHERE t.id = :t"
            ),
            {"t": trial},
        ).one()
        labels = session.execute(
            text(
                "SELECT l.name FROM trial_labels tl JOIN labels l ON l.id = tl.label_id "
                "WHERE tl.evaluation_trial_id = :t ORDER BY l.name"
            ),
            {"t": trial},
        ).scalars()
        category = session.execute(
            text("SELECT failure_category FROM evaluation_trials WHERE id = :t"), {"t": trial}
        ).scalar_one()
        return {
            "review": tuple(review),
            "labels": list(labels),
            "category": category,
        }


def summary(page: str) -> str:
    """What the error summary at the top of a refused decision's page says."""
    return " ".join(message for _, message in error_summary_lines(page))


def label_key(page: str, name: str) -> str:
    """The label id whose checkbox carries `name`."""
    for box in parse(page).select("form#decision input[name=label_id]"):
        if name in one(page, f"label[for='{attr(box, 'id')}']").get_text():
            return attr(box, "value")
    raise AssertionError(f"no label {name}")


def test_the_explorer_opens_its_filter_as_a_queue_one_trial_at_a_time(reviewer):
    listed = api_ids(reviewer, FAILED)
    assert len(listed) >= 6
    explorer = reviewer.get(f"/trials?{FAILED}").text
    button = one(explorer, "form.queue-start")
    assert attr(button, "action") == f"/queue?{FAILED}&sort=failed"
    assert "Review these as a queue" in button.get_text()
    assert one(reviewer.get("/environments").text, "form.page-actions[action^='/queue']").get_text().strip() == (
        "Review them as a queue"
    )
    queue, position = start(reviewer, f"{FAILED}&sort=failed")
    assert position == 1
    page = reviewer.get(f"/queue/{queue}/1")
    assert page.status_code == 200 and is_whole_page(page.text)
    assert f"trial 1 of {len(listed)}" in one(page.text, "h1").get_text()
    assert shown_trial(page.text) == listed[0]
    assert "Trials matching reward: failed (reward < 1), review: unreviewed," in one(page.text, ".queue-of").get_text()
    # the labels in the order they were made, numbered; the categories the organization's trials have
    assert [t.split()[0] for t in texts(page.text, "fieldset.queue-labels label")] == ["1", "2"]
    assert "flaky-verifier" in texts(page.text, "fieldset.queue-labels label")[0]
    options = [attr(o, "value") for o in parse(page.text).select("select#human_category option")]
    assert options[0] == "" and options[-1] == "+new" and "gave_up" in options
    # the transcript and stages come before the panel (beside it on a wide screen, under it on a phone)
    assert page.text.index('id="transcript"') < page.text.index('id="decision"')
    assert page.text.index("<h3>Stages</h3>") < page.text.index('id="decision"')


def test_a_viewer_cannot_start_a_queue(app, viewer, reviewer, count_rows):
    api = ApiClient(app.test_client(), viewer)
    assert parse(api.get(f"/trials?{FAILED}").text).select("form.queue-start") == []
    assert api.client.post(f"/queue?{FAILED}", data={"csrf_token": api.token}).status_code == 403
    assert count_rows("review_queues", viewer.org.id) == 0


def test_a_decision_is_one_request_answered_with_the_next_trial(reviewer, database, member, count_rows):
    listed = api_ids(reviewer, FAILED)
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    flaky = label_key(page, "flaky-verifier")
    response = decide(reviewer, queue, page, label_id=[flaky])
    assert response.status_code == 200 and is_fragment(response.text)
    assert response.headers["HX-Push-Url"] == f"/queue/{queue}/2"
    assert shown_trial(response.text) == listed[1]
    assert f"trial 2 of {len(listed)}" in one(response.text, "h1").get_text()
    assert one(response.text, "#queue-said").get_text() == f"Trial 1 of {len(listed)} marked reviewed. (u undoes it.)"
    assert triage_rows(database, member.org.id, listed[0])["review"] == ("reviewed", "", None)
    assert triage_rows(database, member.org.id, listed[0])["labels"] == ["flaky-verifier"]
    assert reviewer.get(f"/api/v1/trials/{listed[0]}").json["reviewState"] == "reviewed"
    actions = count_rows("trial_audit", member.org.id, "evaluation_trial_id = :t", t=listed[0])
    assert actions == 2  # the labels, the review state
    # without JavaScript: a redirect to the next trial, the words flashed there
    plain = decide(reviewer, queue, response.text, htmx=False)
    assert plain.status_code == 303 and plain.headers["Location"] == f"/queue/{queue}/3"
    assert "Trial 2 of" in one(reviewer.get(f"/queue/{queue}/3").text, ".flashes").get_text()


def test_exclude_needs_a_reason_and_the_session_remembers_it(reviewer, database, member, count_rows):
    listed = api_ids(reviewer, FAILED)
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    before = table_counts(count_rows, member.org.id)
    refused = decide(reviewer, queue, page, "excluded", reason="  ")
    assert refused.status_code == 422
    assert summary(refused.text) == "Enter a reason to exclude the trial: what makes it unfit for training."
    assert shown_trial(refused.text) == listed[0]
    assert table_counts(count_rows, member.org.id) == before
    excluded = decide(reviewer, queue, page, "excluded", reason="the verifier crashed")
    assert excluded.status_code == 200 and shown_trial(excluded.text) == listed[1]
    assert triage_rows(database, member.org.id, listed[0])["review"] == ("excluded", "the verifier crashed", None)
    # the next trial's panel offers the same reason: `x` alone excludes it too
    assert attr(one(excluded.text, "input#reason"), "value") == "the verifier crashed"
    again = decide(reviewer, queue, excluded.text, "excluded")
    assert again.status_code == 200
    assert triage_rows(database, member.org.id, listed[1])["review"] == ("excluded", "the verifier crashed", None)


def test_the_human_category_comes_from_the_organizations_or_an_explicit_new_one(reviewer, database, member, count_rows):
    listed = api_ids(reviewer, FAILED)
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    before = table_counts(count_rows, member.org.id)
    typo = decide(reviewer, queue, page, human_category="verifier_crash")
    assert typo.status_code == 422
    said = summary(typo.text)
    assert "'verifier_crash' is not one of the organization's failure categories" in said
    same = decide(reviewer, queue, page, human_category="+new", new_category="Gave_Up")
    assert same.status_code == 422 and "The category 'gave_up' exists" in summary(same.text)
    bad = decide(reviewer, queue, page, human_category="+new", new_category="verifier crash")
    assert bad.status_code == 422
    assert "A new category must be 1 to 64 letters" in summary(bad.text)
    assert table_counts(count_rows, member.org.id) == before
    made = decide(reviewer, queue, page, human_category="+new", new_category="verifier_crash")
    assert made.status_code == 200
    assert triage_rows(database, member.org.id, listed[0])["review"] == ("reviewed", "", "verifier_crash")
    assert triage_rows(database, member.org.id, listed[0])["category"] == "verifier_crash"
    # now one of the organization's categories: the next trial picks it from the list
    assert "verifier_crash" in [attr(o, "value") for o in parse(made.text).select("select#human_category option")]
    picked = decide(reviewer, queue, made.text, human_category="verifier_crash")
    assert picked.status_code == 200
    assert triage_rows(database, member.org.id, listed[1])["category"] == "verifier_crash"


def test_undo_restores_the_trials_triage_exactly(reviewer, database, member, count_rows):
    listed = api_ids(reviewer, FAILED)
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    first = decide(reviewer, queue, page)  # trial 1 reviewed
    found = triage_rows(database, member.org.id, listed[1])
    assert found == {"review": UNREVIEWED, "labels": [], "category": found["category"]}
    flaky, wrong = label_key(first.text, "flaky-verifier"), label_key(first.text, "wrong-customer")
    second = decide(
        reviewer, queue, first.text, "excluded", reason="wrong customer", label_id=[flaky, wrong],
        human_category="+new", new_category="wrong_customer",
    )  # fmt: skip
    assert triage_rows(database, member.org.id, listed[1]) == {
        "review": ("excluded", "wrong customer", "wrong_customer"),
        "labels": ["flaky-verifier", "wrong-customer"],
        "category": "wrong_customer",
    }
    undone = undo(reviewer, queue, 3)
    assert undone.status_code == 200 and undone.headers["HX-Push-Url"] == f"/queue/{queue}/2"
    assert shown_trial(undone.text) == listed[1]
    assert "Undone: trial 2 of" in one(undone.text, "#queue-said").get_text()
    assert triage_rows(database, member.org.id, listed[1]) == found  # unreviewed, no label, the verifier's again
    assert reviewer.get(f"/api/v1/trials/{listed[1]}").json["reviewState"] == "unreviewed"
    assert "Undo your last decision" in one(undone.text, "form#undo").get_text()  # trial 1's is next
    assert second.status_code == 200
    assert undo(reviewer, queue).status_code == 200
    assert triage_rows(database, member.org.id, listed[0])["review"] == UNREVIEWED
    nothing = undo(reviewer, queue)
    assert nothing.status_code == 409 and "Nothing to undo" in summary(nothing.text)


def test_undo_refuses_to_lose_a_change_made_since(reviewer, database, member, count_rows):
    listed = api_ids(reviewer, FAILED)
    queue, _ = start(reviewer)
    decide(reviewer, queue, reviewer.get(f"/queue/{queue}/1").text)
    changed = reviewer.client.post(
        f"/trials/{listed[0]}/review",
        data={"csrf_token": reviewer.token, "review_state": "excluded", "reason": "seen on the trial page"},
    )
    assert changed.status_code == 303
    before = table_counts(count_rows, member.org.id)
    refused = undo(reviewer, queue, 2)
    assert refused.status_code == 409 and "changed after your decision" in refused.text
    assert table_counts(count_rows, member.org.id) == before
    assert triage_rows(database, member.org.id, listed[0])["review"] == ("excluded", "seen on the trial page", None)


def test_p_and_n_walk_the_queue_whatever_was_decided(reviewer):
    listed = api_ids(reviewer, FAILED)
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    assert parse(page).select(".queue-walk a[data-key=p]") == []
    page = decide(reviewer, queue, page).text
    page = decide(reviewer, queue, page).text
    assert shown_trial(page) == listed[2]
    back = attr(one(page, ".queue-walk a[data-key=p]"), "href")
    assert back == f"/queue/{queue}/2"
    previous = reviewer.get(back, headers=HTMX)
    assert is_fragment(previous.text) and shown_trial(previous.text) == listed[1]
    assert one(previous.text, ".queue-now .review-state").get_text() == "reviewed"
    assert attr(one(previous.text, ".queue-walk a[data-key=n]"), "href") == f"/queue/{queue}/3"
    first = reviewer.get(attr(one(previous.text, ".queue-walk a[data-key=p]"), "href"))
    assert shown_trial(first.text) == listed[0]  # decided, and still in the queue
    # resuming goes to the first trial still unreviewed
    resumed = reviewer.get(f"/queue/{queue}")
    assert resumed.status_code == 303 and resumed.headers["Location"] == f"/queue/{queue}/3"


def test_the_queue_ends_and_offers_a_new_one(reviewer, database, member):
    listed = api_ids(reviewer, f"{FAILED}&status=failed")
    queue, _ = start(reviewer, "reviewState=unreviewed&rewardBand=failed&status=failed")
    page = reviewer.get(f"/queue/{queue}/1").text
    for _ in listed[:-1]:
        page = decide(reviewer, queue, page).text
    end = decide(reviewer, queue, page)
    assert end.status_code == 200 and end.headers["HX-Push-Url"] == f"/queue/{queue}/done"
    assert f"{len(listed)} of its {len(listed)} trials are reviewed or excluded" in end.text
    again = urlsplit(attr(one(end.text, "form[action^='/queue?']"), "action"))
    assert parse_qs(again.query) == parse_qs(f"{FAILED}&status=failed&sort=failed")
    assert (
        reviewer.client.post(f"/queue?{FAILED}&status=failed", data={"csrf_token": reviewer.token}).status_code == 303
    )
    assert "No trials match these filters" in reviewer.get("/trials").text


def test_a_trial_one_reviewer_has_open_is_skipped_by_another(app, reviewer, make_member, database, member, count_rows):
    bob = ApiClient(app.test_client(), make_member("bob@acme.test", member.org, "member"))
    listed = api_ids(reviewer, FAILED)
    ann_queue, at = start(reviewer)
    assert at == 1
    reviewer.get(f"/queue/{ann_queue}/1")  # ann has trial 1 open
    bob_queue, at = start(bob)
    assert at == 2  # bob's queue skips it
    assert parse(bob.get(f"/queue/{bob_queue}/2").text).select(".queue-walk a[data-key=p]") == []  # nor p to it
    held = bob.get(f"/queue/{bob_queue}/1")  # opened directly
    assert held.status_code == 200
    assert one(held.text, ".claim-notice").get_text().startswith("Being reviewed by ann@acme.test until")
    assert one(held.text, "#decide-reviewed").has_attr("disabled")
    before = table_counts(count_rows, member.org.id)
    refused = decide(bob, bob_queue, held.text)
    assert refused.status_code == 409 and "being reviewed by ann@acme.test" in summary(refused.text)
    assert table_counts(count_rows, member.org.id) == before
    # bob's trial 2 is skipped by ann's next decision, and by her n
    ann_page = reviewer.get(f"/queue/{ann_queue}/1").text
    assert attr(one(ann_page, ".queue-walk a[data-key=n]"), "href") == f"/queue/{ann_queue}/3"
    ann_next = decide(reviewer, ann_queue, ann_page)
    assert shown_trial(ann_next.text) == listed[2]
    # ten minutes on, the claim lapses: bob may take trial 1 (here: ann's claims moved ten minutes back)
    with database.admin_session(member.org.id) as session, session.begin():
        session.execute(text("UPDATE review_claims SET claimed_until = now() - interval '1 second'"))
    opened = bob.get(f"/queue/{bob_queue}/1").text
    assert parse(opened).select(".claim-notice") == []
    assert decide(bob, bob_queue, opened, "excluded", reason="seen twice").status_code == 200
    assert triage_rows(database, member.org.id, listed[0])["review"] == ("excluded", "seen twice", None)


def test_another_users_or_organizations_queue_trial_or_label_is_404_and_nothing_written(
    app, reviewer, make_member, database, member, count_rows
):
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    own_trial = shown_trial(page)
    other = make_member("eve@globex.test", "Globex", "member")
    finish_runs(database, make_catalog(database, other.org.id, NOVICE, attempt_count=4), 1)
    eve = ApiClient(app.test_client(), other)
    assert eve.post("/api/v1/labels", {"name": "globex-label"}).status_code == 201
    eve_queue, _ = start(eve, "rewardBand=failed")
    eve_page = eve.get(f"/queue/{eve_queue}/1").text
    eve_trial = shown_trial(eve_page)
    eve_label = label_key(eve_page, "globex-label")
    colleague = ApiClient(app.test_client(), make_member("cy@acme.test", member.org, "member"))
    before = table_counts(count_rows, member.org.id), table_counts(count_rows, other.org.id)
    attempts = [
        eve.get(f"/queue/{queue}/1"),  # another organization's queue
        colleague.get(f"/queue/{queue}/1"),  # another member's queue
        decide(eve, queue, page),
        decide(colleague, queue, page),
        undo(eve, queue),
        undo(colleague, queue),
        reviewer.get(f"/queue/{queue}/999"),
    ]
    form = one(page, "form#decision")
    for trial in (eve_trial, "00000000-0000-4000-8000-000000000000"):
        attempts.append(
            reviewer.client.post(
                f"/queue/{queue}/trials/{trial}", data={"csrf_token": reviewer.token, "decision": "reviewed"}
            )
        )
    attempts.append(decide(reviewer, queue, page, label_id=[eve_label]))  # another organization's label
    assert [r.status_code for r in attempts] == [404] * len(attempts)
    assert (table_counts(count_rows, member.org.id), table_counts(count_rows, other.org.id)) == before
    assert triage_rows(database, member.org.id, own_trial)["review"] == UNREVIEWED
    assert attr(form, "action") == f"/queue/{queue}/trials/{own_trial}"


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"decision": "maybe"}, "Choose a decision: one of reviewed, excluded."),
        ({"label_id": ["not-a-uuid"]}, "label_id must be label UUIDs"),
        ({"reason": "x" * 1001, "decision": "excluded"}, "Reason must be at most 1000 characters."),
    ],
)
def test_malformed_decisions_are_refused_and_write_nothing(reviewer, member, count_rows, fields, said):
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    before = table_counts(count_rows, member.org.id)
    response = decide(reviewer, queue, page, **fields)
    assert response.status_code in (400, 422)
    assert said in response.text
    assert table_counts(count_rows, member.org.id) == before


def test_the_trial_page_says_who_holds_the_trial_to_other_members_only(
    app, reviewer, make_member, database, member, count_rows
):
    bob = ApiClient(app.test_client(), make_member("bob@acme.test", member.org, "member"))
    queue, _ = start(reviewer)
    trial = shown_trial(reviewer.get(f"/queue/{queue}/1").text)  # ann has it open
    before = table_counts(count_rows, member.org.id)
    seen = bob.get(f"/trials/{trial}")
    assert seen.status_code == 200
    notice = " ".join(one(seen.text, "#claim-notice").get_text().split())
    until = re.search(r"until (\d\d:\d\d) UTC", notice)
    assert notice.startswith("Being reviewed by ann@acme.test until") and until, notice
    with database.admin_session(member.org.id) as session:
        held_until = session.execute(text("SELECT claimed_until FROM review_claims")).scalar_one()
    assert until.group(1) == f"{held_until:%H:%M}"
    assert parse(reviewer.get(f"/trials/{trial}").text).select("#claim-notice, .claim-notice") == []  # not to ann
    assert table_counts(count_rows, member.org.id) == before  # reading the page claims nothing
    other = shown_trial(reviewer.get(f"/queue/{queue}/2").text)
    assert parse(bob.get(f"/trials/{other}").text).select("#claim-notice")  # each trial she opened is held
    # another organization still sees neither the trial nor its claim
    eve = ApiClient(app.test_client(), make_member("eve@globex.test", "Globex", "member"))
    hidden = eve.get(f"/trials/{trial}")
    assert hidden.status_code == 404 and "ann@acme.test" not in hidden.text
    # the claim lapses: the page no longer says it
    with database.admin_session(member.org.id) as session, session.begin():
        session.execute(text("UPDATE review_claims SET claimed_until = now() - interval '1 second'"))
    assert parse(bob.get(f"/trials/{trial}").text).select("#claim-notice, .claim-notice") == []
