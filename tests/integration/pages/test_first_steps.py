"""The first-run checklist on /environments ticks each step once it is done, and goes once all six are; it keeps
each member's progress (at their next login too); run rows and the run page link the compare picker with that run
chosen."""

from __future__ import annotations

from tests.conftest import ApiClient, AuthActions
from tests.factories import finish_runs, make_catalog
from tests.helpers import api_ids, attr, one, parse, texts


def steps(api) -> dict[str, bool]:
    """The checklist's steps: title → done."""
    page = parse(api.get("/environments").text)
    return {one(item, "a").get_text(): "done" in attr(item, "class") for item in page.select(".first-steps li")}


def test_a_new_organization_sees_six_steps_that_tick_themselves(api, database, member):
    assert steps(api) == {
        "Create an environment": False,
        "Create an evaluator": False,
        "Start a run": False,
        "Open a failed trial": False,
        "Compare two runs": False,
        "Make a dataset": False,
    }
    page = parse(api.get("/environments").text)
    assert attr(one(page, ".first-steps a"), "href") == "/environments/new"
    assert "0 of 6 done" in one(page, "#first-steps-heading").get_text()
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=4)
    assert list(steps(api).values()) == [True, True, False, False, False, False]
    runs = finish_runs(database, catalog, 2)
    assert list(steps(api).values()) == [True, True, True, False, False, False]
    succeeded = api_ids(api, "rewardBand=successful")
    if succeeded:  # a succeeded trial is not a failed one
        api.get(f"/trials/{succeeded[0]}")
        assert not steps(api)["Open a failed trial"]
    api.get(f"/trials/{api_ids(api, 'rewardBand=failed')[0]}")
    assert list(steps(api).values()) == [True, True, True, True, False, False]
    version_side = f"/compare?a={catalog.version_id}&b={runs[1]}"
    assert api.get(version_side).status_code == 200 and not steps(api)["Compare two runs"]
    assert api.get(f"/compare?a={runs[0]}&b={runs[1]}").status_code == 200
    assert list(steps(api).values()) == [True, True, True, True, True, False]
    assert api.post("/datasets", data={"name": "shop-50"}).status_code == 303
    assert parse(api.get("/environments").text).select(".first-steps") == []


def test_hiding_the_steps_keeps_them_hidden(api):
    assert steps(api)
    hidden = api.post("/checklist/hide", data={})
    assert hidden.status_code == 303
    assert steps(api) == {}


def test_the_compare_link_of_a_run_chooses_it_and_the_run_before_it(api, database, member):
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.5}, attempt_count=2)
    runs = finish_runs(database, catalog, 3)
    environment = parse(api.get(f"/environments/{catalog.environment_id}").text)
    links = [attr(a, "href") for a in environment.select(".run-compare a")]
    assert f"/compare?environmentId={catalog.environment_id}&with={runs[1]}" in links
    picker = parse(api.get(f"/compare?environmentId={catalog.environment_id}&with={runs[1]}").text)
    assert attr(one(picker, "#pick-b option[selected]"), "value") == str(runs[1])
    assert attr(one(picker, "#pick-a option[selected]"), "value") == str(runs[0])  # the run before it
    run_page = api.get(f"/runs/{runs[2]}").text
    assert "Compare with another run" in texts(run_page, "a")


def test_an_organization_that_already_has_runs_is_not_shown_the_steps(api, database, member):
    finish_runs(database, make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.5}, attempt_count=2))
    assert steps(api) == {}
    assert parse(api.get("/environments").text).select(".first-steps") == []


def test_the_steps_a_member_did_are_remembered_at_the_next_login(api, app, database, member, make_member):
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=4)
    assert steps(api)  # seen while the organization has no run
    runs = finish_runs(database, catalog, 2)
    api.get(f"/trials/{api_ids(api, 'rewardBand=failed')[0]}")
    assert api.get(f"/compare?a={runs[0]}&b={runs[1]}").status_code == 200
    done = {"Open a failed trial": True, "Compare two runs": True, "Make a dataset": False}
    assert {title: steps(api)[title] for title in done} == done
    assert AuthActions(api.client).logout().status_code in (302, 303)
    again = ApiClient(app.test_client(), member)  # a new login, in another browser
    assert {title: steps(again)[title] for title in done} == done
    # The marks are the member's own: a colleague who first comes now, with runs, is not shown the steps.
    colleague = ApiClient(app.test_client(), make_member("cleo@acme.test", member.org))
    assert steps(colleague) == {}


def test_hidden_steps_stay_hidden_at_the_next_login(api, app, member):
    assert steps(api)
    assert api.post("/checklist/hide", data={}).status_code == 303
    assert steps(ApiClient(app.test_client(), member)) == {}
