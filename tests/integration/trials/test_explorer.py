"""The trials explorer (/trials) and GET /api/v1/trials: filters against rows counted in SQL, failed-first order,
sorting, chips, the form reflecting the URL, the filtered export, paging, bad parameters and isolation."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from bs4 import NavigableString, Tag
from sqlalchemy import text

import queries.trials
from domain.outcome import TrialOutcome
from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog, record_rewards
from tests.helpers import (
    api_ids,
    attr,
    copied,
    first_element,
    import_ndjson,
    is_fragment,
    is_whole_page,
    line,
    ndjson,
    one,
    parse,
    sql_ids,
    texts,
    trial_links,
)
from tests.worlds import shared_world

NOVICE = {"kind": "scripted", "skill": 0.3}
TRIAL_HREF = re.compile(r"/trials/([0-9a-f-]{36})")


def errored(reward):
    """A trial that ended in an error without a score."""
    now = datetime.now(UTC)
    return TrialOutcome(
        status="error",
        reward=None,
        failure_category="agent_error",
        stages={},
        steps=[],
        log="crashed",
        started_at=now - timedelta(seconds=3),
        finished_at=now,
    )


@shared_world
def shared_explorer(request):
    """Runs of two environments (successes, partial credit, zero rewards), an errored trial and an import, with the
    member who reads them logged in (the module's `api`); built once for the module's read-only tests."""
    database = request.getfixturevalue("database")
    member = request.getfixturevalue("make_member")("ann@acme.test", "Acme RL", "member")
    api = ApiClient(request.getfixturevalue("app").test_client(), member)
    admin = make_catalog(database, member.org.id, NOVICE, attempt_count=8, config_name="novice")
    desk = make_catalog(
        database, member.org.id, NOVICE, attempt_count=4, environment="support-desk", config_name="desk-novice"
    )
    runs = finish_runs(database, admin, 2) + finish_runs(database, desk, 1)
    record_rewards(database, admin, [None], errored)
    assert import_ndjson(api, ndjson(line("x-1", 1, 0.5), line("x-2", 2, None))).status_code == 201
    return {"admin": admin, "desk": desk, "runs": runs, "member": member, "api": api}


@pytest.fixture
def world(shared_explorer):
    return shared_explorer


@pytest.fixture
def member(shared_explorer):
    return shared_explorer["member"]


@pytest.fixture
def api(shared_explorer):
    return shared_explorer["api"]


def page_ids(body: str) -> list[str]:
    """The ids of the trials the page links to (a link's href is /trials/<id>), in order."""
    hrefs = [attr(a, "href") for a in parse(body).select("a[href]")]
    return [match.group(1) for href in hrefs if (match := TRIAL_HREF.fullmatch(urlsplit(href).path))]


# (query string, the same filter in independent SQL over evaluation_trials t)
SINGLE = [
    ("status=failed", "t.status = 'failed'"),
    ("status=error", "t.status = 'error'"),
    ("rewardBand=failed", "t.reward IS NOT NULL AND t.reward < 1"),
    ("rewardBand=recovery", "t.reward > 0 AND t.reward < 1"),
    ("rewardBand=successful", "t.reward = 1"),
    ("rewardBand=unscored", "t.reward IS NULL"),
    ("minReward=0.3", "t.reward >= 0.3"),
    ("maxReward=0.5", "t.reward <= 0.5"),
    ("failureCategory=gave_up", "t.failure_category = 'gave_up'"),
    ("stagePassed=stage_inventory", "(t.metrics ->> 'stage_inventory')::float8 = 1"),
    ("stageFailed=stage_order", "(t.metrics ->> 'stage_order')::float8 < 1"),
    ("source=imported", "t.external_id IS NOT NULL"),
    ("source=worker", "t.external_id IS NULL"),
]


@pytest.mark.parametrize(("query", "where"), SINGLE)
def test_each_filter_lists_exactly_the_trials_sql_selects(api, world, database, member, query, where):
    expected = sql_ids(database, member.org.id, where)
    assert expected, f"the world holds no trial for {query}"
    listed = api_ids(api, query)
    assert len(listed) == len(set(listed)) and set(listed) == expected
    assert set(page_ids(api.get(f"/trials?{query}").text)) == expected


def test_catalog_filters_and_their_combinations(api, world, database, member):
    admin, desk, runs = world["admin"], world["desk"], world["runs"]
    org = member.org.id
    cases: list[tuple[str, str, dict[str, Any]]] = [
        (f"environmentId={desk.environment_id}", "t.environment_version_id = :desk_version", {}),
        (f"environmentVersionId={admin.version_id}", "t.environment_version_id = :admin_version", {}),
        (f"evaluatorConfigId={desk.config_id}", "t.environment_version_id = :desk_version", {}),
        (f"evaluationRunId={runs[0]}", "t.evaluation_run_id = :run", {}),
        (
            f"environmentVersionId={admin.version_id}&rewardBand=failed&stageFailed=stage_checkout",
            "t.environment_version_id = :admin_version AND t.reward < 1 "
            "AND (t.metrics ->> 'stage_checkout')::float8 < 1",
            {},
        ),
        (
            f"evaluationRunId={runs[1]}&status=failed&stagePassed=stage_inventory&stageFailed=stage_order,stage_checkout",
            "t.evaluation_run_id = :run1 AND t.status = 'failed' AND (t.metrics ->> 'stage_inventory')::float8 = 1 "
            "AND (t.metrics ->> 'stage_order')::float8 < 1 AND (t.metrics ->> 'stage_checkout')::float8 < 1",
            {},
        ),
        ("source=imported&rewardBand=unscored", "t.external_id IS NOT NULL AND t.reward IS NULL", {}),
        ("minReward=0.2&maxReward=0.9&status=failed", "t.reward BETWEEN 0.2 AND 0.9 AND t.status = 'failed'", {}),
    ]
    params = {"desk_version": desk.version_id, "admin_version": admin.version_id, "run": runs[0], "run1": runs[1]}
    for query, where, _ in cases:
        expected = sql_ids(database, org, where, **params)
        assert expected, query
        assert set(api_ids(api, query)) == expected, query
        assert set(page_ids(api.get(f"/trials?{query}").text)) == expected, query


def test_time_range_filters_on_when_trials_finished(api, world, database, member):
    with database.session(member.org.id) as session:
        middle = session.execute(
            text("SELECT finished_at FROM evaluation_trials ORDER BY finished_at OFFSET 10 LIMIT 1")
        ).scalar()
    stamp = middle.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    after = sql_ids(database, member.org.id, "t.finished_at >= :m", m=middle)
    before = sql_ids(database, member.org.id, "t.finished_at < :m", m=middle)
    assert after and before
    assert set(api_ids(api, f"finishedAfter={stamp}")) == after
    assert set(api_ids(api, f"finishedBefore={stamp}")) == before
    assert api_ids(api, "finishedAfter=2999-01-01") == []


def ranks(database, org_id, ids: list[str]) -> list[tuple[int, str]]:
    with database.session(org_id) as session:
        rows = dict(
            session.execute(
                text("""SELECT id::text, CASE WHEN reward < 1 THEN 2 WHEN reward IS NULL THEN 1 ELSE 0 END
                        FROM evaluation_trials WHERE id::text = ANY(:ids)"""),
                {"ids": ids},
            ).all()
        )
    return [(rows[i], i) for i in ids]


def test_failed_first_then_newest_across_pages(api, world, database, member, monkeypatch):
    monkeypatch.setattr(queries.trials, "PAGE_SIZE", 4)
    listed = api_ids(api)
    assert len(listed) == len(sql_ids(database, member.org.id, "TRUE"))
    order = ranks(database, member.org.id, listed)
    assert order == sorted(order, key=lambda r: (-r[0], uuid.UUID(r[1]).int * -1))
    assert order[0][0] == 2 and order[-1][0] == 0  # failures first, successes last
    body = api.get("/trials").text
    assert page_ids(body)[: len(listed)] == listed[:4]
    more = one(body, 'nav.pager[aria-label="Trial pages"] a')
    assert more.get_text().startswith("More trials") and "after=" in attr(more, "href")


@pytest.mark.parametrize(
    ("sort", "column"),
    [
        ("reward", "coalesce(reward, -1)"),
        ("-reward", "coalesce(reward, -1)"),
        ("steps", "trial_agent_steps(steps)"),
        ("-duration", "coalesce(finished_at - started_at, '0'::interval)"),
        ("time", "finished_at"),
        ("newest", "id"),
    ],
)
def test_sorting_pages_through_every_trial_in_order(api, world, database, member, monkeypatch, sort, column):
    monkeypatch.setattr(queries.trials, "PAGE_SIZE", 3)
    listed = api_ids(api, f"sort={sort}")
    with database.session(member.org.id) as session:
        direction = "DESC" if sort.startswith("-") or sort == "newest" else "ASC"
        expected = session.execute(
            text(f"SELECT id::text FROM evaluation_trials ORDER BY {column} {direction}, id {direction}")
        ).scalars()
        assert listed == list(expected)


def test_rows_show_environment_run_agent_trial_n_of_n_steps_and_duration(api, world):
    body = api.get(f"/trials?environmentVersionId={world['admin'].version_id}&sort=newest").text
    rows = [tr for tr in parse(body).select("table.trials > tbody > tr") if not tr.has_attr("class")]
    assert rows and "Trial 8 of 8" in trial_links(body)
    columns = texts(body, "table.trials > thead th")

    def cells(name: str) -> list[Any]:
        return [tr("td")[columns.index(name)] for tr in rows]

    environments = {(" ".join(td.get_text().split()), one(td, "a").get_text()) for td in cells("Environment")}
    assert environments == {("admin-console v1", "admin-console")}  # the environment links, then its version
    run = world["runs"][1]
    assert f"novice · run {run.hex[-6:]}" in [td.get_text() for td in cells("Run")]
    assert "scripted" in [td.get_text() for td in cells("Agent")]
    assert "2" in [td.get_text() for td in cells("Steps")]  # two agent steps per trial
    durations = [t.removesuffix(" s") for t in texts(body, "td.num") if t.endswith(" s")]
    assert [d for d in durations if d and set(d) <= set("0123456789.")]
    imported = api.get("/trials?source=imported").text
    assert "imported" in texts(imported, "table.trials td > span.badge")


def test_chips_name_each_filter_and_drop_it(api, world):
    version = world["admin"].version_id
    body = api.get(f"/trials?status=failed&environmentVersionId={version}&stageFailed=stage_order,stage_checkout").text
    chips = {}
    for chip in parse(body).select("li.chip"):
        name, link = chip.contents[0], chip.contents[0].next_sibling
        if isinstance(name, NavigableString) and name.endswith(" ") and isinstance(link, Tag) and link.name == "a":
            chips[name[:-1]] = attr(link, "href")
    assert set(chips) == {"status: failed", "version: admin-console v1", "stage_order failed", "stage_checkout failed"}
    assert chips["status: failed"] == f"/trials?environmentVersionId={version}&stageFailed=stage_order%2Cstage_checkout"
    assert (
        "stageFailed=stage_checkout" in chips["stage_order failed"] and "status=failed" in chips["stage_order failed"]
    )
    dropped = api.get(chips["status: failed"]).text
    labels = [str(chip.contents[0]).strip() for chip in parse(dropped).select("li.chip")]  # the text before its link
    assert "status: failed" not in labels and "version: admin-console v1" in labels
    assert "Clear all filters" in body
    assert "Clear all filters" not in api.get("/trials").text


def test_the_form_shows_the_filters_of_the_url(api, world):
    config = world["desk"].config_id
    form = one(
        api.get(
            f"/trials?status=error&rewardBand=unscored&minReward=0&evaluatorConfigId={config}&stagePassed=stage_x"
            "&finishedAfter=2020-01-01&sort=-steps"
        ).text,
        "form#trial-filters",
    )

    def chosen(name: str) -> list[str]:
        return [attr(o, "value") for o in form.select(f'select[name="{name}"] option[selected]')]

    assert chosen("status") == ["error"] and chosen("rewardBand") == ["unscored"]
    assert chosen("evaluatorConfigId") == [str(config)] and chosen("sort") == ["-steps"]
    reward = one(form, 'input[name="minReward"]')
    assert [attr(reward, a) for a in ("type", "min", "max", "step", "value")] == ["number", "0", "1", "any", "0"]
    stages = one(form, 'input[name="stagePassed"]')
    assert (attr(stages, "list"), attr(stages, "value")) == ("stage-keys", "stage_x")
    assert one(form, "datalist#stage-keys") is not None
    assert attr(one(form, 'input[name="finishedAfter"]'), "value") == "2020-01-01"
    # Every filter of the one declaration has its labelled field, in the declaration's order (the everyday ones
    # first, the rest under "More filters", open because some of them are set); nothing is chosen without a
    # parameter but "any".
    from web.trial_filters import BASIC_FILTERS, TRIAL_FILTERS

    names = [attr(field, "name") for field in form.select("label > input[name], label > select[name]")]
    basic = [f.name for f in TRIAL_FILTERS if f.name in BASIC_FILTERS]
    assert names == [*basic, *(f.name for f in TRIAL_FILTERS if f.name not in BASIC_FILTERS), "sort"]
    more = one(form, "details.more-filters")
    assert attr(more, "open") == "" and "(4 set)" in one(more, "summary").get_text()
    assert "open" not in one(api.get("/trials?status=failed").text, "details.more-filters").attrs
    plain = one(api.get("/trials").text, "form#trial-filters")
    assert {attr(o, "value") for o in plain.select('select:not([name="sort"]) option[selected]')} == {""}


def test_htmx_gets_the_explorer_fragment_and_the_form_pushes_the_url(api, world):
    response = api.get("/trials?status=failed", headers={"HX-Request": "true"})
    assert response.status_code == 200 and "HX-Request" in response.headers["Vary"]
    form = first_element(response.text)
    assert is_fragment(response.text) and form.name == "form" and attr(form, "id") == "trial-filters"
    assert attr(form, "hx-push-url") == "true" and attr(form, "hx-target") == "#explorer"
    restore = api.get("/trials?status=failed", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert is_whole_page(restore.text) and one(restore.text, 'select[name="status"] option[value="failed"][selected]')


def test_empty_states_say_what_to_do(owner_api):  # an organization of its own, with no trials
    assert "No trials yet. Start a run" in owner_api.get("/trials").text
    assert "No trials match these filters" in owner_api.get("/trials?status=error").text


def export_trials(api, database, org_id, query: str) -> list[str]:
    """The trial ids of GET /api/v1/rollouts?kind=all&<query> (rollouts named by run and trial number)."""
    response = api.get(f"/api/v1/rollouts?kind=all&{query}")
    assert response.status_code == 200
    lines = [json.loads(raw) for raw in response.text.splitlines()]
    with database.session(org_id) as session:
        return [
            str(
                session.execute(
                    text("SELECT evaluation_trial_id FROM rollouts WHERE id = :id"), {"id": item["rolloutId"]}
                ).scalar()
            )
            for item in lines
        ]


@pytest.mark.parametrize(
    "query",
    [
        "status=failed",
        "rewardBand=recovery&stagePassed=stage_inventory",
        "failureCategory=gave_up",
        "source=imported",
        "stageFailed=stage_routing",
        "minReward=0.5",
    ],
)
def test_the_filtered_export_holds_exactly_the_listed_scored_trials(api, world, database, member, query):
    listed = api.get(f"/api/v1/trials?{query}").json["trials"]
    scored = {t["id"] for t in listed if t["reward"] is not None}
    exported = export_trials(api, database, member.org.id, query)
    assert scored and len(exported) == len(set(exported)) and set(exported) == scored
    body = api.get(f"/trials?{query}").text
    downloads = [attr(a, "href") for a in parse(body).select("table.export-kinds a[download]")]
    assert any(href.endswith(f"/api/v1/rollouts?kind=all&{query.replace(',', '%2C')}") for href in downloads)
    preference = f"/api/v1/rollouts?kind=preference&{query.replace(',', '%2C')}&format=trl"
    assert any(href.endswith(preference) for href in downloads), downloads
    curls = copied(body, "table.export-kinds")
    assert curls and all(curl.startswith('curl -H "Authorization: Bearer $TOKEN"') for curl in curls)
    assert "create a token" in texts(body, 'a[href="/settings/tokens"]')


def test_filtered_preference_pairs_draw_from_the_filtered_trials(api, world, database, member):
    pairs = [json.loads(raw) for raw in api.get("/api/v1/rollouts?kind=preference&status=failed").text.splitlines()]
    rewards = {p["preferred"]["reward"] for p in pairs} | {p["rejected"]["reward"] for p in pairs}
    assert pairs and all(r < 1 for r in rewards)


@pytest.mark.parametrize(
    "query",
    [
        "status=done",
        "rewardBand=great",
        "minReward=2",
        "maxReward=abc",
        "minReward=%EF%BC%91",  # a fullwidth digit one
        "minReward=nan",
        "stagePassed=inventory",
        "stageFailed=stage_a,,stage_b",
        "environmentId=nope",
        "evaluatorConfigId=12",
        "source=cloud",
        "finishedAfter=yesterday",
        "finishedBefore=2026-13-45",
        "sort=best",
        "after=zz",
        "failureCategory=" + "x" * 65,
        "task=Reconcile",
        "task=" + "a" * 31,
        "task=" + "g" * 32,
    ],
)
def test_bad_parameters_answer_400_with_a_message(api, member, query):
    page = api.get(f"/trials?{query}")
    assert page.status_code == 400
    name = query.split("=")[0]
    assert name in page.text
    answer = api.get(f"/api/v1/trials?{query}")
    assert answer.status_code == 400 and name in answer.json["detail"]
    export = api.get(f"/api/v1/rollouts?{query}")
    assert export.status_code == 400 or name in ("sort", "after")


def test_an_unknown_cursor_is_refused(api, member):
    assert api.get(f"/trials?after={uuid.uuid4()}").status_code == 400
    assert api.get(f"/api/v1/trials?after={uuid.uuid4()}").status_code == 404


def test_another_organizations_ids_give_nothing(api, world, database, make_member):
    other = make_member("eve@evil.test", "Evil Corp", "owner")
    theirs = make_catalog(database, other.org.id, NOVICE, attempt_count=2, config_name="theirs")
    their_run = finish_runs(database, theirs, 1)[0]
    with database.session(other.org.id) as session:
        their_trial = session.execute(text("SELECT id FROM evaluation_trials LIMIT 1")).scalar()
    for query in (
        f"environmentId={theirs.environment_id}",
        f"environmentVersionId={theirs.version_id}",
        f"evaluatorConfigId={theirs.config_id}",
        f"evaluationRunId={their_run}",
    ):
        assert api_ids(api, query) == []
        assert "No trials match these filters" in api.get(f"/trials?{query}").text
        assert api.get(f"/api/v1/rollouts?kind=all&{query}").text == ""
    assert api.get(f"/api/v1/trials?after={their_trial}").status_code == 404
    mine = set(api_ids(api))
    assert mine and str(their_trial) not in mine
