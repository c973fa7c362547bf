"""The refusals of the reviewing forms and of the members page, each shown as the error summary of every page form
(the GOV.UK pattern: "There is a problem" at the top, focused, a link to each refused input, whose own message under
it the link repeats), all of one submit at once, in the page's words, with nothing written: the trial page's triage
forms (a label, the review, a note and its edit), each side's forms on the trial diff (htmx swaps the side's body,
the summary inside it), the review queue's decision, the members page's role change and removal (no input holds a
refusal there: a line without a link), and a dataset version's task list (every line that cannot be read)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from sqlalchemy import text

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import (
    attr,
    error_summary_lines,
    error_summary_links,
    is_fragment,
    is_whole_page,
    one,
    parse,
    table_counts,
)
from tests.integration.datasets.test_datasets_api import builtin_version, new_dataset, post_version
from tests.integration.pages.test_form_error_summaries import assert_each_link_names_its_input
from tests.integration.triage.test_review_queue import decide, start
from tests.integration.trials.test_trial_diff import diff_url, record_run, restock

NOVICE = {"kind": "scripted", "skill": 0.3}
HTMX = {"HX-Request": "true"}
NEEDS_A_REASON = "Enter a reason to exclude the trial: what makes it unfit for training."
BAD_CATEGORY = "Human category must be a failure category of 1 to 64 letters, digits, _, . or -."
API_WORDS = ("reason:", "body:", "step:", "new_category:", "human_category:", "must be text", "not ''")


@pytest.fixture
def trial(database, member) -> uuid.UUID:
    """A failed or passed trial of two steps or more, in a run of two."""
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=2), 1)
    with database.session(member.org.id) as session:
        return session.execute(text("SELECT id FROM evaluation_trials ORDER BY trial_number LIMIT 1")).scalar_one()


def posted(api: ApiClient, url: str, count_rows, *, status: int = 422, htmx: bool = False, **fields):
    """POST a form as the browser does (`htmx`: as htmx does): refused with `status`, nothing written."""
    before = table_counts(count_rows, api.org)
    answer = api.client.post(url, data={"csrf_token": api.token, **fields}, headers=HTMX if htmx else {})
    assert answer.status_code == status, answer.text[:500]
    assert table_counts(count_rows, api.org) == before
    return answer


def in_page_words(lines: Sequence[tuple[str | None, str]]) -> None:
    shown = " ".join(message for _, message in lines)
    assert not [words for words in API_WORDS if words in shown], shown


def test_a_refused_review_on_the_trial_page_shows_the_reason_and_the_category_at_once(api, trial, count_rows):
    refused = posted(
        api, f"/trials/{trial}/review", count_rows, review_state="excluded", reason="  ", human_category="no such!"
    )
    assert is_whole_page(refused.text)
    links = error_summary_links(refused.text)
    assert links == [("reason", NEEDS_A_REASON), ("human_category", BAD_CATEGORY)]
    assert_each_link_names_its_input(refused.text, links)
    in_page_words(links)
    page = parse(refused.text)
    assert "open" in one(page, "details#review-edit").attrs  # the refused form is shown, as it was sent
    assert attr(one(page, "#human_category"), "value") == "no such!"
    assert attr(one(page, "input[name=review_state][value=excluded]"), "checked") == ""
    assert one(page, "title").get_text().startswith("Error: ")
    assert page.select("#triage p.error[role=alert]") == []  # the summary, not a bare paragraph


def test_the_trial_pages_note_and_label_forms_say_each_refusal_under_their_input(api, database, trial, count_rows):
    empty = posted(api, f"/trials/{trial}/notes", count_rows, body="  ")
    assert error_summary_links(empty.text) == [("note-body", "Enter a note.")]
    assert "open" in one(empty.text, "details.note-new").attrs
    long = posted(api, f"/trials/{trial}/notes", count_rows, body="x" * 10_001)
    links = error_summary_links(long.text)
    assert links == [("note-body", "A note holds at most 10000 characters, not 10001.")]
    assert_each_link_names_its_input(long.text, links)
    assert one(long.text, "textarea#note-body").get_text() == "x" * 10_001  # kept, to be shortened
    far = posted(api, f"/trials/{trial}/notes", count_rows, body="look", step="99")
    [(target, said)] = error_summary_links(far.text)
    assert target == "note-step" and said.startswith("The trial has ") and said.endswith(" steps, not a step 99.")
    assert_each_link_names_its_input(far.text, [(target, said)])
    label = posted(api, f"/trials/{trial}/labels", count_rows, label_id="not-a-label")
    assert error_summary_links(label.text) == []  # no label yet: no select to link to
    assert error_summary_lines(label.text) == [(None, "Choose a label.")]
    assert api.post("/api/v1/labels", {"name": "flaky"}).status_code == 201
    label = posted(api, f"/trials/{trial}/labels", count_rows, label_id="not-a-label")
    assert error_summary_links(label.text) == [("label_id", "Choose a label.")]
    assert_each_link_names_its_input(label.text, error_summary_links(label.text))

    assert api.client.post(f"/trials/{trial}/notes", data={"csrf_token": api.token, "body": "first"}).status_code == 303
    with database.session(api.org.id) as session:
        note = session.execute(text("SELECT id FROM trial_notes")).scalar_one()
    edited = posted(api, f"/trials/{trial}/notes/{note}", count_rows, body="")
    links = error_summary_links(edited.text)
    assert links == [(f"note-body-{note}", "Enter a note.")]
    assert_each_link_names_its_input(edited.text, links)
    assert "open" in one(one(edited.text, f"#note-{note}"), "details.note-edit").attrs
    assert parse(edited.text).select("details.note-new[open]") == []  # only the refused form is opened


@pytest.fixture
def diff_trials(database, member):
    catalog = make_catalog(database, member.org.id, NOVICE, attempt_count=2)
    return record_run(database, catalog, [restock(4, reward=1.0), restock(5)])


@pytest.mark.parametrize("htmx", [True, False])
def test_a_refused_exclusion_on_the_trial_diff_shows_its_summary_inside_its_side(api, diff_trials, count_rows, htmx):
    a, b = diff_trials
    diff = api.get(diff_url(a, b)).text
    action = attr(one(one(diff, "#review-b-body"), "form:has(#diff-reason-b)"), "action")
    refused = posted(api, action, count_rows, htmx=htmx, review_state="excluded", reason=" ", human_category="")
    assert (is_fragment if htmx else is_whole_page)(refused.text)
    links = error_summary_links(refused.text, "error-summary-b")
    assert links == [("diff-reason-b", NEEDS_A_REASON)]
    assert_each_link_names_its_input(refused.text, links)
    if not htmx:  # the side's body holds it, the other side holds none
        assert one(refused.text, "#review-b-body #error-summary-b")
        assert parse(refused.text).select("#review-a .error-summary") == []
    note = attr(one(one(diff, "#review-a-body"), "form:has(#diff-note-a)"), "action")
    empty = posted(api, note, count_rows, htmx=htmx, body="")
    assert error_summary_links(empty.text, "error-summary-a") == [("diff-note-a", "Enter a note.")]


def test_a_refused_decision_in_the_queue_shows_every_refusal_at_once(app, database, member, count_rows):
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=8), 2)
    reviewer = ApiClient(app.test_client(), member)
    queue, _ = start(reviewer)
    page = reviewer.get(f"/queue/{queue}/1").text
    before = table_counts(count_rows, member.org.id)
    refused = decide(reviewer, queue, page, "excluded", reason=" ", human_category="+new", new_category="gave up")
    assert refused.status_code == 422 and table_counts(count_rows, member.org.id) == before
    links = error_summary_links(refused.text)
    assert links == [
        ("new_category", "A new category must be 1 to 64 letters, digits, _, . or -."),
        ("reason", NEEDS_A_REASON),
    ]
    assert_each_link_names_its_input(refused.text, links)
    in_page_words(links)
    form = one(refused.text, "form#decision")
    assert attr(one(form, "select#human_category option[selected]"), "value") == "+new"  # kept as sent
    assert attr(one(form, "#new_category"), "value") == "gave up"
    assert parse(refused.text).select("#queue-error, p.error[role=alert]") == []
    typo = decide(reviewer, queue, page, human_category="verifier_crash")
    assert typo.status_code == 422
    [(target, said)] = error_summary_links(typo.text)
    assert target == "human_category" and said.startswith("'verifier_crash' is not one of the organization's")
    long = decide(reviewer, queue, page, "excluded", reason="x" * 1001)
    assert error_summary_links(long.text) == [("reason", "Reason must be at most 1000 characters.")]
    assert table_counts(count_rows, member.org.id) == before


def membership_of(database, org_id, email: str) -> uuid.UUID:
    with database.session(org_id) as session:
        return session.execute(
            text("SELECT m.id FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = :e"), {"e": email}
        ).scalar_one()


def test_the_members_pages_refusals_are_its_error_summary(owner_api, member, database, count_rows):
    own = membership_of(database, owner_api.org.id, owner_api.member.email)
    other = membership_of(database, owner_api.org.id, member.email)
    last_owner = "An organization needs at least one owner; make someone else owner first."
    for url in (f"/settings/members/{own}/role", f"/settings/members/{own}/remove"):  # demoted, or removed
        refused = posted(owner_api, url, count_rows, role="viewer", confirm="yes")
        assert error_summary_lines(refused.text) == [(None, last_owner)]
        assert parse(refused.text).select("main p.error[role=alert], .flashes") == []
        assert one(refused.text, "title").get_text().startswith("Error: ")
    role = posted(owner_api, f"/settings/members/{other}/role", count_rows, role="admin")
    links = error_summary_links(role.text)
    assert links == [(f"role-{other}", "Choose a role: one of owner, member, viewer.")]
    assert_each_link_names_its_input(role.text, links)


def test_a_task_list_with_several_bad_lines_names_every_one_at_once(api, count_rows):
    shop = builtin_version(api)["id"]
    dataset = new_dataset(api)
    post_version(api, dataset, {"environmentVersionId": shop, "count": 1})
    draft = f"shop 1\n{shop} 1..3\n{shop} 9..3  # down\n\n{shop} x\n{shop} 4"
    refused = posted(api, f"/datasets/{dataset['id']}/versions", count_rows, action="preview", draft=draft)
    lines = error_summary_lines(refused.text)
    assert [target for target, _ in lines] == ["draft"] * 3
    said = [message for _, message in lines]
    assert said[0].startswith("Line 1: the environment version id must be a UUID")
    assert said[1] == "Line 3: world seeds 9..3 must go up, first..last (1..50)."
    assert said[2].startswith("Line 5: world seed must be an integer from 0 to 2147483647")
    under = " ".join(one(refused.text, "#draft-error").get_text().split())
    assert all(message in under for message in said)
    assert attr(one(refused.text, "#draft"), "aria-invalid") == "true"
    assert one(refused.text, "textarea#draft").get_text() == draft  # the list as it was
    htmx = posted(api, f"/datasets/{dataset['id']}/versions", count_rows, htmx=True, action="save", draft=draft)
    assert is_fragment(htmx.text) and error_summary_lines(htmx.text) == lines


def test_a_readable_task_list_names_every_task_it_refuses_at_once(api, count_rows):
    shop = builtin_version(api)["id"]
    dataset = new_dataset(api)
    stranger = uuid.uuid4()
    draft = f"{shop} 1..3\n{shop} 2\n{stranger} 1\n{shop} 3"
    refused = posted(api, f"/datasets/{dataset['id']}/versions", count_rows, action="preview", draft=draft)
    lines = error_summary_lines(refused.text)
    assert [target for target, _ in lines] == ["draft"] * 3
    said = [message for _, message in lines]
    assert said[0].startswith("Line 2: world seed 2 repeats task 2")
    assert said[1] == f"Line 3: environment version names no environment version of this organization: {stranger}."
    assert said[2].startswith("Line 4: world seed 3 repeats task 3")
    under = " ".join(one(refused.text, "#draft-error").get_text().split())
    assert all(message in under for message in said)
    assert one(refused.text, "textarea#draft").get_text() == draft  # the list as it was
