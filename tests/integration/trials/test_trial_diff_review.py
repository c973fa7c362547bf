"""The trial diff as a place to decide: two calls of the same tool in one row with the arguments they gave differently
marked (<mark> on the key, <del> A's value, <ins> B's, and words that say which side gave what), and each trial
labelled, noted and excluded from the diff through the trial page's own triage endpoints, answered in place (htmx)
or back on the diff (a plain form); refusals say why and write nothing; viewers get no form and a 403."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import text

from domain.trajectory import tool_step
from tests.conftest import ApiClient
from tests.factories import make_catalog
from tests.helpers import attr, error_summary_links, is_fragment, is_whole_page, one, parse, texts
from tests.integration.trials.test_trial_diff import NOVICE, diff_url, record_run, restock
from web.forms import NEEDS_A_REASON

HTMX = {"HX-Request": "true"}


@pytest.fixture
def trials(database, member):
    """A restock of 4 (rewarded) and one of 5, and the label `flaky` in the organization."""
    catalog = make_catalog(database, member.org.id, NOVICE, attempt_count=2)
    return record_run(database, catalog, [restock(4, reward=1.0), restock(5)])


def sent(api: ApiClient, url: str, *, htmx: bool = True, **fields):
    """A form post as htmx sends it from the diff page, or as a plain form."""
    return api.client.post(url, data={"csrf_token": api.token, **fields}, headers=HTMX if htmx else {})


def submit(api: ApiClient, a, b, side: str, field: str, value: str, *, htmx: bool = True):
    """Fill one of `side`'s forms on the diff page (`field`: label, note or reason, by its id) and send it with its
    hidden fields, as the browser does."""
    doc = parse(api.get(diff_url(a, b)).text)
    form = one(doc, f"#diff-{field}-{side}").find_parent("form")
    assert form is not None
    assert attr(form, "hx-post") == attr(form, "action")
    assert attr(form, "hx-target") == f"#review-{side}-body"
    hidden = {attr(i, "name"): i.get("value", "") for i in form.select('input[type="hidden"]')}
    name = attr(one(form, f"#diff-{field}-{side}"), "name")
    return sent(api, attr(form, "action"), htmx=htmx, **{**hidden, name: value})


def review_row(database, org_id, trial_id) -> tuple | None:
    with database.session(org_id) as session:
        return session.execute(
            text("SELECT review_state, reason FROM trial_reviews WHERE evaluation_trial_id = :t"), {"t": trial_id}
        ).first()


def test_calls_of_one_tool_share_a_row_with_the_differing_arguments_marked(api, trials):
    a, b = trials
    doc = parse(api.get(diff_url(a, b)).text)
    rows = doc.select("ol.diff-rows > li")
    changed = [row for row in rows if "other-arguments" in attr(row, "class")]
    assert len(changed) == 1 and changed[0] is rows[2] and changed[0] is one(doc, "#first-divergence")
    listed = one(changed[0], "dl.argument-changes")
    assert attr(listed, "aria-label") == "Arguments that differ"
    assert texts(listed, "dt mark") == ["quantity"]
    assert texts(listed, "del code") == ["4"] and texts(listed, "ins code") == ["5"]
    said = " ".join(one(listed, "dd").get_text().split())
    assert said == "A A gave 4 B B gave 5"  # the side tags, then the words a screen reader reads
    assert texts(listed, "dd .visually-hidden") == ["A gave", "B gave"]
    assert not any(row.select("dl.argument-changes") for row in rows if row is not changed[0])


def test_a_key_one_side_did_not_give_says_so(api, database, member):
    catalog = make_catalog(database, member.org.id, NOVICE, attempt_count=2)
    given = restock(4)
    other = replace(
        given, steps=[*given.steps[:2], tool_step(3, "restock", {"sku": "SKU-2", "units": 4}, "ok"), given.steps[3]]
    )
    a, b = record_run(database, catalog, [given, other])
    listed = one(parse(api.get(diff_url(a, b)).text), "dl.argument-changes")
    pairs = [" ".join(item.get_text().split()) for item in listed.select(".argument-change")]
    assert pairs == ["quantity A A gave 4 B not given", "units A not given B B gave 4"]


def test_each_trial_is_labelled_noted_and_excluded_from_the_diff_in_place(api, database, member, trials):
    a, b = trials
    assert sent(api, "/settings/labels", htmx=False, name="flaky", color="red").status_code == 303

    labelled = submit(api, a, b, "b", "label", _label(database, member.org.id, "flaky"))
    assert labelled.status_code == 200 and is_fragment(labelled.text) and not is_whole_page(labelled.text)
    panel = parse(labelled.text)
    assert one(panel, "#review-b-said[hx-swap-oob]").get_text() == "Label added."
    assert texts(panel, ".diff-labels .label-chip") == ["flaky"]

    noted = submit(api, a, b, "a", "note", "gave up after the restock")
    assert one(noted.text, "#review-a-said").get_text() == "Note added."
    assert "1 (newest: gave up after the restock)" in " ".join(parse(noted.text).get_text().split())

    excluded = submit(api, a, b, "a", "reason", "the verifier crashed")
    assert one(excluded.text, "#review-a-said").get_text() == "Excluded from training exports."
    assert "left out of training exports: the verifier crashed" in parse(excluded.text).get_text()
    assert parse(excluded.text).select("#diff-reason-a") == []  # excluded: no exclude form left
    assert review_row(database, member.org.id, a) == ("excluded", "the verifier crashed")

    page = parse(api.get(diff_url(a, b)).text)  # and the diff says so on its next load, each on its side
    assert texts(one(page, "#review-b"), ".diff-labels .label-chip") == ["flaky"]
    assert "excluded" in texts(one(page, "#review-a"), ".review-state")
    assert texts(one(page, "#review-a"), ".diff-labels .label-chip") == []
    assert review_row(database, member.org.id, b) is None  # B was labelled, never reviewed


def test_an_exclusion_without_a_reason_is_refused_in_place_and_writes_nothing(api, database, member, trials):
    a, b = trials
    refused = submit(api, a, b, "b", "reason", "  ")
    assert refused.status_code == 422 and is_fragment(refused.text)
    assert error_summary_links(refused.text, "error-summary-b") == [("diff-reason-b", NEEDS_A_REASON)]
    assert one(refused.text, "#review-b-said").get_text() == ""
    assert review_row(database, member.org.id, b) is None


def test_a_plain_form_comes_back_to_the_diff_at_its_side(api, database, member, trials):
    a, b = trials
    answered = submit(api, a, b, "b", "note", "compare with A", htmx=False)
    assert answered.status_code == 303
    assert answered.headers["Location"] == f"/trials/diff?a={a}&b={b}#review-b"
    back = api.get(answered.headers["Location"])
    assert "Note added." in back.text and "1 (newest: compare with A)" in " ".join(back.text.split())
    refused = submit(api, a, b, "a", "reason", "", htmx=False)
    assert refused.status_code == 422 and is_whole_page(refused.text)
    assert error_summary_links(str(one(refused.text, "#review-a")), "error-summary-a") == [
        ("diff-reason-a", NEEDS_A_REASON)
    ]
    assert parse(refused.text).select("#review-b .error-summary, #review-b .error") == []
    assert review_row(database, member.org.id, a) is None


def test_a_viewer_sees_the_reviews_without_forms_and_cannot_post(app, database, trials, make_member, member):
    a, b = trials
    viewer = ApiClient(app.test_client(), make_member("vic@acme.test", member.org, "viewer"))
    page = parse(viewer.get(diff_url(a, b)).text)
    assert len(page.select(".diff-review")) == 2 and page.select(".diff-review form") == []
    url = f"/trials/{a}/notes?diffA={a}&diffB={b}"
    assert sent(viewer, url, body="not mine to write").status_code == 403


def _label(database, org_id, name: str) -> str:
    with database.session(org_id) as session:
        return str(session.execute(text("SELECT id FROM labels WHERE name = :n"), {"n": name}).scalar_one())
