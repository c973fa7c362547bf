"""Every page form that refuses input (422, or 409 for a taken name) shows all its refusals at once: an error
summary at the top (the GOV.UK pattern) linking to each refused input, whose own message (aria-describedby) it
repeats, in the page's words, and nothing is written."""

from __future__ import annotations

import pytest

from tests.conftest import csrf_token_from
from tests.factories import make_catalog
from tests.helpers import attr, error_summary_links, invitation_link, one, parse, table_counts, texts
from tests.integration.datasets.test_dataset_runs import NOVICE, dataset_version, evaluator

API_WORDS = ("must be text", "without NUL", "not ''", "attemptCount", "an integer", "role must")


def assert_each_link_names_its_input(html: str, links: list[tuple[str, str]]) -> None:
    """Every link leads to an input marked invalid and described by its own message, which the link repeats."""
    page = parse(html)
    for target, text in links:
        element = one(page, f"#{target}")
        assert element.name in ("input", "select", "textarea"), element
        assert attr(element, "aria-invalid") == "true"
        assert f"{target}-error" in attr(element, "aria-describedby").split()
        assert one(page, f"#{target}-error").get_text().removeprefix("Error:").strip() == text
    shown = " ".join(text for _, text in links)
    assert not [words for words in API_WORDS if words in shown], shown


def refused(api, url: str, data: dict, count_rows, status: int = 422) -> list[tuple[str, str]]:
    """POST the form as a browser does and as htmx does: both refused with `status`, nothing written; the summary's
    links (checked against their inputs)."""
    before = table_counts(count_rows, api.org)
    for headers in ({}, {"HX-Request": "true"}):
        answer = api.post(url, data=data, headers=headers)
        assert answer.status_code == status, answer.text[:500]
        assert table_counts(count_rows, api.org) == before
    links = error_summary_links(answer.text)
    assert_each_link_names_its_input(answer.text, links)
    return links


def fields_of(html: str, form_selector: str) -> dict[str, str]:
    """The named inputs of one form of a page with their values (selects: the selected option)."""
    form = one(html, form_selector)
    values = {attr(i, "name"): str(i.get("value", "")) for i in form.select("input[name]")}
    for select in form.select("select[name]"):
        chosen = select.select_one("option[selected]")
        values[attr(select, "name")] = str(chosen.get("value", "")) if chosen else ""
    return values


def test_the_start_run_form_shows_every_refusal_at_once(api, database, count_rows):
    catalog = make_catalog(database, api.org.id, {"kind": "scripted"}, attempt_count=1)
    url = f"/environments/{catalog.environment_id}/runs"
    page = api.get(f"/environments/{catalog.environment_id}").text
    assert parse(page).select(".error-summary, [aria-invalid]") == []
    data = {**fields_of(page, "#start-run form"), "environment_version_id": "", "evaluator_config_id": ""}
    links = refused(api, url, {**data, "attempt_count": "0"}, count_rows)
    assert links == [
        ("environment_version_id", "Choose an environment version."),
        ("evaluator_config_id", "Choose an evaluator configuration."),
        ("attempt_count", "Attempt count must be a whole number from 1 to 8."),
    ]


def test_the_dataset_run_start_form_shows_every_refusal_at_once(api, count_rows):
    dataset_version(api, count=2)
    evaluator(api, "novice", NOVICE)
    page = api.get("/dataset-runs").text
    data = {**fields_of(page, "#start-dataset-run form"), "dataset_version_id": "nope", "attempt_count": "two"}
    links = refused(api, "/dataset-runs", {**data, "evaluator_config_id": ""}, count_rows)
    assert links == [
        ("dataset_version_id", "Choose a dataset version."),
        ("evaluator_config_id", "Choose an evaluator configuration."),
        ("attempt_count", "Attempt count must be a whole number from 1 to 8."),
    ]


def test_the_new_dataset_form_shows_every_refusal_at_once_and_a_taken_name(api, count_rows):
    links = refused(api, "/datasets", {"name": "", "description": "x" * 2001}, count_rows)
    assert links == [
        ("dataset-name", "Enter a name of 1 to 200 characters."),
        ("dataset-description", "Description must be at most 2000 characters."),
    ]
    assert api.post("/datasets", data={"name": "shop-50", "description": ""}).status_code == 303
    taken = refused(api, "/datasets", {"name": "shop-50", "description": ""}, count_rows)
    assert taken == [("dataset-name", "A dataset named 'shop-50' already exists; choose another name.")]


def test_the_label_form_shows_every_refusal_at_once_and_a_taken_name(api, count_rows):
    links = refused(api, "/settings/labels", {"name": "", "color": "plaid", "description": "x" * 600}, count_rows)
    assert links == [
        ("label-name", "Enter a name."),
        ("label-color", "Choose a colour: one of gray, red, orange, yellow, green, teal, blue, purple, pink."),
        ("label-description", "Description must be at most 500 characters."),
    ]
    assert api.post("/settings/labels", data={"name": "flaky", "color": "red", "description": ""}).status_code == 303
    taken = refused(api, "/settings/labels", {"name": "FLAKY", "color": "red", "description": ""}, count_rows, 409)
    assert [target for target, _ in taken] == ["label-name"]
    assert taken[0][1].startswith("A label named 'flaky' already exists")


def test_the_invitation_form_shows_every_refusal_at_once(owner_api, count_rows):
    links = refused(owner_api, "/settings/members", {"email": "", "role": "admin"}, count_rows)
    assert links[0] == ("email", "Enter the new member's email.")
    assert [target for target, _ in links] == ["email", "role"]
    assert links[1] == ("role", "Choose a role: one of owner, member, viewer.")
    shape = refused(owner_api, "/settings/members", {"email": "not an email", "role": "member"}, count_rows)
    assert shape == [("email", "Enter the new member's email address, like name@example.com, not 'not an email'.")]


def test_the_new_account_form_of_an_invitation_shows_every_refusal_at_once(app, owner_api, count_rows):
    invited = owner_api.post("/settings/members", data={"email": "new@acme.test", "role": "member"})
    link = invitation_link(invited.text)
    stranger = app.test_client()
    page = stranger.get(link).text
    assert parse(page).select(".error-summary, [aria-invalid]") == []
    data = {"csrf_token": csrf_token_from(page), "name": "Nia", "password": "short", "password_confirmation": "other"}
    before = table_counts(count_rows, owner_api.org), count_rows("users")
    answer = stranger.post(link, data=data)
    assert answer.status_code == 422
    assert (table_counts(count_rows, owner_api.org), count_rows("users")) == before
    links = error_summary_links(answer.text)
    assert links == [
        ("password", "Password must be at least 8 characters."),
        ("password_confirmation", "The two passwords differ."),
    ]
    assert_each_link_names_its_input(answer.text, links)
    assert attr(one(answer.text, "#name"), "value") == "Nia"


def test_the_token_form_refuses_a_name_in_place(api, count_rows):
    links = refused(api, "/settings/tokens", {"name": "x" * 201}, count_rows)
    assert links == [("name", "Give the token a name of 1 to 200 characters.")]
    assert attr(one(api.post("/settings/tokens", data={"name": "x" * 201}).text, "#name"), "value") == "x" * 201


@pytest.mark.parametrize("url", ["/datasets", "/dataset-runs", "/settings/labels", "/settings/tokens"])
def test_a_form_without_refusals_shows_no_summary(api, url):
    page = api.get(url).text
    assert parse(page).select(".error-summary, [aria-invalid]") == []
    assert "Error:" not in " ".join(texts(page, "title"))
