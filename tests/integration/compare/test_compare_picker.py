"""The compare picker: distinct default sides, menus that follow the environment (htmx and a plain submit), and
every refusal drawn in place with the picker (422, or 404 for a side this organization has not), never a bare
400 page that htmx would swallow."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import finish_runs, make_catalog
from tests.helpers import attr, one, parse, texts

EXPERT = {"kind": "scripted", "skill": 0.9}
FRAGMENT = {"HX-Request": "true"}  # an htmx swap of a region (not a boosted navigation)


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def selected(html: str, side: str) -> str | None:
    """The value the side's menu starts from (None when it asks for a choice)."""
    option = one(html, f"select#pick-{side}").select_one("option[selected]")
    value = attr(option, "value") if option is not None else None
    return value or None


def test_one_version_defaults_to_its_two_newest_runs_never_itself_twice(page, database, member):
    shop = make_catalog(database, member.org.id, EXPERT, 2, config_name="expert")
    older, newer = finish_runs(database, shop, 2)
    html = page.get("/compare").text
    assert (selected(html, "a"), selected(html, "b")) == (str(older), str(newer))
    # Following the defaults compares two different runs.
    answer = page.get(f"/compare?a={older}&b={newer}")
    assert answer.status_code == 200 and one(answer.text, "p#verdict-pass-at-1")


def test_one_version_with_one_run_leaves_side_a_to_choose(page, database, member):
    shop = make_catalog(database, member.org.id, EXPERT, 2, config_name="expert")
    finish_runs(database, shop, 1)
    html = page.get("/compare").text
    assert (selected(html, "a"), selected(html, "b")) == (None, str(shop.version_id))
    assert one(html, "select#pick-a option[selected]").get_text() == "Choose side A"


def test_two_versions_default_to_the_older_as_a_and_the_newest_as_b(page, database, member):
    v1 = make_catalog(database, member.org.id, EXPERT, 2, params={"skus": 4}, config_name="expert")
    v2 = make_catalog(database, member.org.id, EXPERT, 2, params={"skus": 5}, config_name="expert-2")
    html = page.get("/compare").text
    assert (selected(html, "a"), selected(html, "b")) == (str(v1.version_id), str(v2.version_id))


def test_the_menus_follow_the_environment_with_htmx_and_without(page, database, member):
    shop = make_catalog(database, member.org.id, EXPERT, 2, config_name="expert")
    desk = make_catalog(database, member.org.id, EXPERT, 2, environment="support-desk", config_name="desk")
    whole = page.get("/compare").text
    environment = one(whole, "form#compare-environment")
    # With JavaScript a change of the environment swaps the sides' menus; without, its button reloads the picker.
    assert (attr(environment, "hx-get"), attr(environment, "hx-trigger")) == ("/compare", "change")
    assert attr(environment, "hx-target") == "#compare-sides"
    assert one(environment, "button[type=submit]").get_text() == "Show its versions and runs"
    swapped = page.get(f"/compare?environmentId={desk.environment_id}", headers=FRAGMENT)
    assert swapped.status_code == 200
    fragment = parse(swapped.text)
    assert fragment.select_one("h1") is None and one(fragment, "div#compare-sides form#compare-picker")
    assert selected(swapped.text, "b") == str(desk.version_id)
    assert str(shop.version_id) not in swapped.text
    plain = page.get(f"/compare?environmentId={desk.environment_id}").text
    assert one(plain, "h1").get_text() == "Compare" and selected(plain, "b") == str(desk.version_id)
    assert attr(one(plain, f'#environmentId option[value="{desk.environment_id}"]'), "selected") == ""


def refusal(answer) -> str:
    """The refusal drawn in the picker (role=alert), which the named menu's aria-describedby points at."""
    return one(answer.text, "form#compare-picker[data-swap-refusals] #compare-refusal[role=alert]").get_text()


@pytest.mark.bad_input
def test_a_equal_to_b_is_refused_in_place(page, database, member):
    shop = make_catalog(database, member.org.id, EXPERT, 2, config_name="expert")
    run, _ = finish_runs(database, shop, 2)
    version = shop.version_id
    answer = page.get(f"/compare?a={version}&aEvaluatorConfigId=&b={version}&bEvaluatorConfigId=")
    assert answer.status_code == 422
    assert refusal(answer).startswith("A and B are the same version: choose two different sides")
    assert (selected(answer.text, "a"), selected(answer.text, "b")) == (str(version), str(version))
    assert attr(one(answer.text, "select#pick-b"), "aria-invalid") == "true"
    assert not parse(answer.text).select("p#verdict-pass-at-1")  # no comparison of a side with itself
    same_run = page.get(f"/compare?a={run}&b={run}")
    assert same_run.status_code == 422 and refusal(same_run).startswith("A and B are the same run")
    api = page.get(f"/api/v1/compare?a={version}&b={version}")
    assert api.status_code == 400 and api.json["error"] == "invalid b"
    # One version under two different evaluators is two sides.
    other = make_catalog(database, member.org.id, EXPERT, 2, config_name="other")
    two = page.get(f"/compare?a={version}&aEvaluatorConfigId={shop.config_id}&b={other.version_id}")
    assert two.status_code == 200


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("a={run}&aEvaluatorConfigId={config}&b={version}", 422, "Side A is a run: an evaluator narrows a version"),
        ("a={version}&b={run}&bEvaluatorConfigId={config}", 422, "Side B is a run: an evaluator narrows a version"),
        ("a={version}", 422, "Choose side B: a version, a run or a dataset run."),
        ("b={version}", 422, "Choose side A: a version, a run or a dataset run."),
        ("a={version}&b=nope", 422, "Choose side B from its menu"),
        ("a={version}&b={version}&bEvaluatorConfigId=nope", 422, "Choose the evaluator of side B from its menu."),
        ("a={version}&b={unknown}", 404, "Side B names nothing in this organization"),
    ],
)
def test_every_refusal_is_drawn_in_place_with_the_picker(page, database, member, query, status, says):
    shop = make_catalog(database, member.org.id, EXPERT, 2, config_name="expert")
    run, _ = finish_runs(database, shop, 2)
    url = "/compare?" + query.format(run=run, version=shop.version_id, config=shop.config_id, unknown=uuid.uuid4())
    for headers in ({}, {"HX-Request": "true", "HX-Boosted": "true"}):  # a plain submit, and htmx's boosted one
        answer = page.get(url, headers=headers)
        assert answer.status_code == status
        assert refusal(answer).startswith(says)
        assert one(answer.text, "h1").get_text() == "Compare"
        assert texts(answer.text, "#compare-picker button[type=submit]") == ["Compare"]


def test_an_unknown_side_keeps_the_menus_of_the_known_ones_environment(page, database, member):
    make_catalog(database, member.org.id, EXPERT, 2, config_name="expert")
    desk = make_catalog(database, member.org.id, EXPERT, 2, environment="support-desk", config_name="desk")
    answer = page.get(f"/compare?a={desk.version_id}&b={uuid.uuid4()}")
    assert answer.status_code == 404
    assert selected(answer.text, "a") == str(desk.version_id)
    assert attr(one(answer.text, f'#environmentId option[value="{desk.environment_id}"]'), "selected") == ""
