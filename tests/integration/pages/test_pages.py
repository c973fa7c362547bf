"""Every dashboard page: full render, htmx fragment, boosted navigation, 404 across orgs, query budgets."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup, NavigableString, Tag
from sqlalchemy import text

from domain.outcome import TrialOutcome
from models import EnvironmentVersion, EvaluationRun, EvaluatorConfig
from queries.runs import run_label_sql
from tests.conftest import AuthActions
from tests.factories import finish_runs, make_catalog, typed_steps
from tests.helpers import (
    attr,
    copied,
    counting_queries,
    found,
    is_fragment,
    is_whole_page,
    one,
    parse,
    texts,
    trial_links,
)
from tests.worlds import shared_world, world_or
from writes.runs import enqueue_run, record_trial

NOVICE = {"kind": "scripted", "skill": 0.3}


@shared_world
def shared_pages(request):
    """Two environments with finished runs (written by the run factory; failures exist), and their member logged in
    on a client of their own; built once for the tests that only read it."""
    database = request.getfixturevalue("database")
    member = request.getfixturevalue("make_member")("ann@acme.test", "Acme RL", "member")
    reader = request.getfixturevalue("app").test_client()
    AuthActions(reader).login(member.email)
    admin = make_catalog(database, member.org.id, NOVICE, attempt_count=8, config_name="novice")
    desk = make_catalog(
        database, member.org.id, NOVICE, attempt_count=4, environment="support-desk", config_name="novice-desk"
    )
    runs = finish_runs(database, admin, 2) + finish_runs(database, desk, 1)
    with database.session(member.org.id) as session:
        trial_id = session.execute(text("SELECT id FROM evaluation_trials ORDER BY id LIMIT 1")).scalar()
    return {"admin": admin, "desk": desk, "run": runs[0], "trial": trial_id, "member": member, "page": reader}


@pytest.fixture
def world(shared_pages):
    return shared_pages


@pytest.fixture
def member(request, make_member):
    """The world's member in a test on the world; else a member of a new, empty Acme RL."""
    return world_or(
        request, "world", "member", lambda: make_member("ann@acme.test", request.getfixturevalue("acme"), "member")
    )


@pytest.fixture
def page(request, client, auth, member):
    """A client logged in as `member`."""

    def logged_in():
        auth.login(member.email)
        return client

    return world_or(request, "world", "page", logged_in)


def page_urls(world) -> dict[str, str]:
    admin = world["admin"]
    return {
        "environments": "/environments",
        "environment": f"/environments/{admin.environment_id}",
        "export": f"/environments/{admin.environment_id}/export",
        "run": f"/runs/{world['run']}",
        "trial": f"/trials/{world['trial']}",
        "trials": "/trials",
        "capability-gap": "/capability-gap",
        "partial-rewards": "/partial-rewards",
        "version-stages": f"/partial-rewards/versions/{admin.version_id}",
        "capability-gap-of-evaluator": f"/capability-gap?evaluatorConfigId={admin.config_id}",
        "partial-rewards-of-evaluator": f"/partial-rewards?evaluatorConfigId={admin.config_id}",
        "version-stages-of-evaluator": (
            f"/partial-rewards/versions/{admin.version_id}?evaluatorConfigId={admin.config_id}"
        ),
    }


FRAGMENTS = {  # page → text its htmx fragment must hold
    "environments": "admin-console",
    "environment": "novice",
    "run": "of 8 trials",
    "trials": "Trial",
    "capability-gap": "failed trials",
    "version-stages": "stage_inventory",
    "capability-gap-of-evaluator": "failed trials of novice",
    "version-stages-of-evaluator": "stage_inventory",
}


PAGES = [
    "environments",
    "environment",
    "export",
    "run",
    "trial",
    "trials",
    "capability-gap",
    "partial-rewards",
    "version-stages",
    "capability-gap-of-evaluator",
    "partial-rewards-of-evaluator",
    "version-stages-of-evaluator",
]


@pytest.mark.parametrize("name", PAGES)
def test_full_page_fragment_and_boosted(page, world, name):
    url = page_urls(world)[name]
    full = page.get(url)
    assert full.status_code == 200, full.text[:500]
    assert is_whole_page(full.text) and one(full.text, 'nav[aria-label="Main"]')
    assert "HX-Request" in full.headers.get("Vary", "")
    boosted = page.get(url, headers={"HX-Request": "true", "HX-Boosted": "true"})
    assert is_whole_page(boosted.text)
    restore = page.get(url, headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert is_whole_page(restore.text)
    if name in FRAGMENTS:
        fragment = page.get(url, headers={"HX-Request": "true"})
        assert fragment.status_code == 200
        assert is_fragment(fragment.text) and parse(fragment.text).select('nav[aria-label="Main"]') == []
        assert FRAGMENTS[name] in fragment.text


@pytest.mark.leak
def test_other_orgs_ids_answer_404_on_every_page(page, world, database, make_member):
    outsider = make_member("eve@globex.test", "Globex Research")
    theirs = make_catalog(database, outsider.org.id, NOVICE, attempt_count=1)
    (their_run,) = finish_runs(database, theirs)
    with database.session(outsider.org.id) as session:
        their_trial = session.execute(text("SELECT id FROM evaluation_trials")).scalar()
    for url in (
        f"/environments/{theirs.environment_id}",
        f"/environments/{theirs.environment_id}/export",
        f"/runs/{their_run}",
        f"/trials/{their_trial}",
        f"/trials/{their_trial}/trajectory.json",
        f"/partial-rewards/versions/{theirs.version_id}",
        f"/environments/{uuid.uuid4()}",
        f"/trials/{uuid.uuid4()}",
    ):
        response = page.get(url)
        assert response.status_code == 404, url
    listing = page.get(f"/trials?environmentVersionId={theirs.version_id}").text
    assert str(their_trial) not in listing and "No trials match" in listing
    assert str(theirs.version_id) not in page.get("/capability-gap").text


@pytest.mark.parametrize(
    "url",
    [
        "/trials?environmentId=nope",
        "/capability-gap?environmentVersionId=12",
        "/environments?page=0",
        "/environments?page=x",
        "/trials?after=zz",
        "/trials?status=nope",
    ],
)
@pytest.mark.bad_input
def test_malformed_query_parameters_answer_400(page, world, url):
    response = page.get(url)
    assert response.status_code == 400 and is_whole_page(response.text)


def test_environments_list_shows_rollup_figures(page, world, database, member):
    text_ = page.get("/environments").text
    with database.session(member.org.id) as session:
        trials, mean = session.execute(
            text("""SELECT count(*), avg(t.reward) FROM evaluation_trials t
            JOIN environment_versions v ON v.id = t.environment_version_id JOIN environments e
            ON e.id = v.environment_id WHERE e.name = 'admin-console'""")
        ).one()
    row = environment_row(text_, "admin-console")
    cells = [td.get_text() for td in row.select(":scope > td.num") if td.find() is None]
    assert cells[:3] == ["2", str(trials), f"{mean:.3f}"]  # runs, trials, mean reward (latest pass@1 names its run)
    titles = texts(row, "title")  # one line per evaluator
    assert titles and any("pass@1 per evaluator, admin-console" in t for t in titles)
    assert len(row.select("circle.dot.series-a")) == 2 and "novice: pass@1" in row.get_text()


def environment_row(body: str, environment: str) -> Tag:
    """The row of /environments whose first cell links to `environment`."""
    found = [tr for tr in parse(body).select("tr") if texts(tr, ":scope > td:first-child > a") == [environment]]
    assert found, f"no row of {environment}"
    return found[0]


def latest_cell(body: str, environment: str) -> str:
    """The text of the Latest pass@1 cell of an environment's row on /environments (tags dropped)."""
    cell = environment_row(body, environment).select(":scope > td.num")[2]
    return " ".join(cell.get_text(" ").split())


def test_latest_pass_at_1_names_its_run_and_keeps_it_when_runs_were_created_together(page, database, member):
    """Runs created in one instant (one transaction) are told apart by id: the figure and the run it names stay
    the same on every visit while nobody runs anything."""
    novice = make_catalog(database, member.org.id, NOVICE, attempt_count=4, config_name="novice")
    expert = make_catalog(
        database, member.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=4, config_name="expert"
    )
    runs = finish_runs(database, novice, 1) + finish_runs(database, expert, 1)
    with database.session(member.org.id) as session, session.begin():
        session.execute(text("UPDATE evaluation_runs SET created_at = '2026-05-01T12:00:00Z'"))
        newest = session.execute(
            text(f"""SELECT {run_label_sql()}, (r.pass_at_k ->> '1')::float8 FROM evaluation_runs r
            JOIN environment_versions v ON v.id = r.environment_version_id
            JOIN environments e ON e.id = v.environment_id JOIN evaluator_configs c ON c.id = r.evaluator_config_id
            WHERE r.id = :id"""),
            {"id": max(runs)},
        ).one()
    expected = f"{newest[1]:.3f} {newest[0]}"
    assert newest[0] == "admin-console v2 · expert · #1"  # the later run (ids grow with time), its evaluator
    assert [latest_cell(page.get("/environments").text, "admin-console") for _ in range(5)] == [expected] * 5
    body = page.get("/environments").text
    hrefs = {attr(element, "href") for element in parse(body).select("[href]")}
    assert f"/runs/{max(runs)}" in hrefs and f"/runs/{min(runs)}" not in hrefs


def test_an_environment_nobody_ran_says_so(page, database, member):
    make_catalog(database, member.org.id, NOVICE)
    assert latest_cell(page.get("/environments").text, "admin-console") == "no completed runs"


def test_trend_charts_draw_each_run_at_its_own_place_in_run_order(page, database, member):
    """Runs created in one instant used to be drawn at one x; now the chart's runs are numbered in run order."""
    novice = make_catalog(database, member.org.id, NOVICE, attempt_count=4, config_name="novice")
    expert = make_catalog(
        database, member.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=4, config_name="expert"
    )
    runs = finish_runs(database, novice, 2) + finish_runs(database, expert, 2)
    with database.session(member.org.id) as session, session.begin():
        session.execute(text("UPDATE evaluation_runs SET created_at = '2026-05-01T12:00:00Z'"))
    for url in ("/environments", f"/environments/{novice.environment_id}"):
        chart = page.get(url).text
        circles = [c for c in parse(chart).select('circle.dot[cx][cy][r="3.5"]') if len(attr(c, "class").split()) > 1]
        dots = [(attr(c, "cx"), one(c, ":scope > title").get_text()) for c in circles]
        placed = {title.split("(run ")[1].split(":")[0]: float(x) for x, title in dots}
        assert sorted(placed) == ["1 of 4", "2 of 4", "3 of 4", "4 of 4"], url
        xs = [placed[f"{n} of 4"] for n in range(1, 5)]
        assert xs == sorted(xs) and len(set(xs)) == 4, url  # four places, left to right in run order
        titles = [title for _, title in dots]
        for number, run in enumerate(sorted(runs), start=1):  # run order: created together, then by id
            with database.session(member.org.id) as session:
                label = session.execute(
                    text(f"""SELECT {run_label_sql()} FROM evaluation_runs r
                    JOIN environment_versions v ON v.id = r.environment_version_id
                    JOIN environments e ON e.id = v.environment_id
                    JOIN evaluator_configs c ON c.id = r.evaluator_config_id WHERE r.id = :id"""),
                    {"id": run},
                ).scalar()
            assert any(f"(run {number} of 4: {label}," in title for title in titles), (url, number, label)
        assert "completed run, oldest to newest" in chart


def test_capability_gap_counts_equal_a_direct_count(page, world, database, member):
    body = page.get("/capability-gap").text
    with database.session(member.org.id) as session:
        direct = dict(
            session.execute(
                text("""SELECT failure_category, count(*) FROM evaluation_trials
            WHERE failure_category IS NOT NULL GROUP BY 1""")
            ).all()
        )
    assert direct, "the novice agent should have failed somewhere"
    shown = {c: n for c, href, n in overall_rows(body) if href == f"/trials?failureCategory={c}"}
    assert {k: int(v) for k, v in shown.items()} == direct
    category, count = next(iter(direct.items()))
    listing = page.get(f"/trials?failureCategory={category}").text
    assert len(parse(listing).select('table.trials a[href^="/trials/"]')) == min(count, 50)


def test_capability_gap_filters_and_empty_state(page, world, database, member):
    desk = world["desk"]
    body = page.get(f"/capability-gap?environmentId={desk.environment_id}", headers={"HX-Request": "true"}).text
    results = shown_after(one(body, "form.filters"))  # the fragment redraws the filter form too (its menu narrows)
    assert is_fragment(body) and "admin-console" not in results
    empty = page.get(f"/capability-gap?environmentVersionId={uuid.uuid4()}").text
    assert "No failed trials for this filter." in empty


@pytest.fixture
def two_evaluators(database, member, world):
    """The world's admin-console version run by a second evaluator too ("closer"): its 4 trials pass every stage
    but trial 2 and 4, which order for the wrong customer (stage_order 0.5, no checkout)."""
    from tests.factories import Catalog, finish_run
    from writes.environments import create_evaluator_config

    admin = world["admin"]
    with database.session(member.org.id) as session, session.begin():
        config = create_evaluator_config(session, member.org.id, "closer", {"kind": "scripted", "skill": 0.9}, 4)
    closer = Catalog(member.org.id, admin.environment_id, admin.version_id, config.id)

    def outcome_for(number, seed):
        wrong = number % 2 == 0
        stages = {"stage_inventory": 1.0, "stage_order": 0.5 if wrong else 1.0, "stage_checkout": 0.0 if wrong else 1.0}
        return TrialOutcome(
            status="failed" if wrong else "succeeded", reward=sum(stages.values()) / 3,
            failure_category="wrong_customer" if wrong else None, stages=stages, steps=[], log="opened",
            started_at=datetime.now(UTC), task="solve",
        )  # fmt: skip

    finish_run(database, closer, outcome_for)
    return closer


def evaluator_trials(database, member, evaluator_id, where: str = "TRUE", **params):
    """(version id, failure category) → trials of the evaluator's runs, counted straight from evaluation_trials."""
    with database.session(member.org.id) as session:
        rows = session.execute(
            text(f"""SELECT t.environment_version_id, t.failure_category, count(*) FROM evaluation_trials t
            JOIN evaluation_runs r ON r.id = t.evaluation_run_id WHERE r.evaluator_config_id = :e AND {where}
            GROUP BY 1, 2"""),
            {"e": evaluator_id, **params},
        ).all()
    return {(version, category): count for version, category, count in rows}


def test_capability_gap_narrows_to_one_evaluator(page, world, database, member, two_evaluators):
    admin, closer = world["admin"], two_evaluators
    pooled = page.get("/capability-gap").text
    assert "wrong_customer" in texts(pooled, "table.gap td")
    assert one(pooled, 'select#evaluatorConfigId option[value=""]').get_text() == "All evaluators"
    body = page.get(f"/capability-gap?evaluatorConfigId={closer.config_id}").text
    assert evaluator_picked(body) == "closer"
    assert "Overall (2 failed trials of closer)" in body
    overall = overall_rows(body)
    assert [(category, int(count)) for category, _, count in overall] == [("wrong_customer", 2)]
    # The novice's categories are gone, and the cell's rate is of the closer's 4 trials of the version.
    assert "gave_up" not in shown_after(one(body, "form.filters"))
    closer_trials = {(admin.version_id, None): 2, (admin.version_id, "wrong_customer"): 2}
    assert evaluator_trials(database, member, closer.config_id) == closer_trials
    assert "50.0%" in texts(body, 'table.matrix a[title="2 of 4 trials of admin-console v1"]')
    # Each count opens exactly the trials behind it: the explorer takes the same evaluator filter.
    link = overall[0][1]
    assert f"evaluatorConfigId={closer.config_id}" in link
    assert len(trial_links(page.get(link).text)) == 2
    # The novice alone: the same categories as a direct count of its trials.
    novice = page.get(f"/capability-gap?evaluatorConfigId={admin.config_id}", headers={"HX-Request": "true"}).text
    shown = {category: count for category, _, count in overall_rows(novice)}
    direct = {c: n for (v, c), n in evaluator_trials(database, member, admin.config_id).items() if c}
    assert {k: int(v) for k, v in shown.items()} == direct and "wrong_customer" not in shown
    # With another filter the evaluator's trials of other versions drop out, and its empty state says so.
    desk = world["desk"]
    empty = page.get(f"/capability-gap?evaluatorConfigId={closer.config_id}&environmentId={desk.environment_id}")
    assert empty.status_code == 200 and "No failed trials for this filter." in empty.text


def test_partial_rewards_narrow_to_one_evaluator_in_the_same_order(page, world, database, member, two_evaluators):
    admin, closer = world["admin"], two_evaluators
    url = f"/partial-rewards/versions/{admin.version_id}?evaluatorConfigId={closer.config_id}"
    fragment = page.get(url, headers={"HX-Request": "true"}).text
    rows = [
        (one(tr, ":scope > td:first-child > code").get_text(), *[td.get_text() for td in nums[:3]])
        for tr in parse(fragment).select("tr")
        if tr.select_one(":scope > td:first-child > code")
        if len(nums := tr.select(":scope > td.num")) >= 3
    ]
    # The closer's 4 trials: inventory passed by 4 (mean 1), order by 2 (mean 0.75), checkout by 2 (mean 0.5); in
    # admin-console's pipeline order, as without the filter.
    assert rows == [
        ("stage_inventory", "4", "4", "1.000"),
        ("stage_order", "4", "2", "0.750"),
        ("stage_checkout", "4", "2", "0.500"),
    ]
    assert stages_shown(page.get(f"/partial-rewards/versions/{admin.version_id}").text) == [r[0] for r in rows]
    failed = attr(one(fragment, 'a[href^="/trials?"][href*="stageFailed=stage_order"]'), "href")
    assert f"evaluatorConfigId={closer.config_id}" in failed
    assert len(trial_links(page.get(failed).text)) == 2
    # The whole page: the select names the evaluator, a version it never ran says so, lazy tables keep the filter.
    listing = page.get(f"/partial-rewards?evaluatorConfigId={closer.config_id}").text
    assert evaluator_picked(listing) == "closer"
    only = [p for p in parse(listing).select("main p") if texts(p, ":scope > strong") == ["closer"]]
    assert [p.get_text() for p in only] == ["Trials of closer only."]
    desk = one(listing, f'section.version-card[id="version-{world["desk"].version_id}"]').get_text()
    assert "No stage metrics from closer on this version." in desk
    import blueprints.insights

    blueprints.insights.EAGER_VERSIONS, eager = 0, blueprints.insights.EAGER_VERSIONS
    try:
        lazy = page.get(f"/partial-rewards?evaluatorConfigId={closer.config_id}").text
    finally:
        blueprints.insights.EAGER_VERSIONS = eager
    waiting = parse(lazy).select("section.version-card div.lazy[hx-get]")
    assert len(waiting) == 2  # both versions, each loading with the filter and linking to it without JavaScript
    for block in waiting:
        urls = [attr(block, "hx-get"), attr(one(block, "a.lazy-fallback, .lazy-fallback a"), "href")]
        assert all(url.endswith(f"?evaluatorConfigId={closer.config_id}") for url in urls), urls


@pytest.mark.leak
def test_another_organizations_evaluator_reveals_nothing(page, world, database, make_member):
    outsider = make_member("eve@globex.test", "Globex Research")
    theirs = make_catalog(database, outsider.org.id, NOVICE, attempt_count=4, config_name="globex-secret-agent")
    finish_runs(database, theirs)
    missing = uuid.uuid4()
    for evaluator in (theirs.config_id, missing):
        for url in (
            f"/capability-gap?evaluatorConfigId={evaluator}",
            f"/capability-gap?evaluatorConfigId={evaluator}&environmentVersionId={theirs.version_id}",
            f"/partial-rewards?evaluatorConfigId={evaluator}",
            f"/partial-rewards/versions/{world['admin'].version_id}?evaluatorConfigId={evaluator}",
        ):
            response = page.get(url)
            assert response.status_code == 404, url
            assert "globex-secret-agent" not in response.text and str(theirs.version_id) not in response.text
            assert "wrong_" not in response.text and "gave_up" not in response.text  # no counts of anyone's
    # Their evaluator is not among the choices either, and the two answers are the same but for the id.
    assert "globex-secret-agent" not in page.get("/capability-gap").text + page.get("/partial-rewards").text
    theirs_said = page.get(f"/capability-gap?evaluatorConfigId={theirs.config_id}").text
    missing_said = page.get(f"/capability-gap?evaluatorConfigId={missing}").text
    assert but_for(theirs_said, str(theirs.config_id)) == but_for(missing_said, str(missing))


def but_for(page_text: str, id_: str) -> str:
    """The page with `id_` and its CSRF token (signed with the second it was made in) written alike."""
    token = found(r'<meta name="csrf-token" content="([^"]+)"', page_text).group(1)
    return page_text.replace(id_, "ID").replace(token, "TOKEN")


def test_capability_gap_empty_state_without_failures(page, member):
    body = page.get("/capability-gap").text
    assert "No failed trials." in body and parse(body).select("table.gap") == []


def test_partial_rewards_list_exactly_the_stage_keys_in_metrics(page, world, database, member):
    admin = world["admin"]
    fragment = page.get(f"/partial-rewards/versions/{admin.version_id}", headers={"HX-Request": "true"}).text
    with database.session(member.org.id) as session:
        keys = (
            session.execute(
                text("""SELECT DISTINCT jsonb_object_keys(metrics) FROM evaluation_trials
            WHERE environment_version_id = :v"""),
                {"v": admin.version_id},
            )
            .scalars()
            .all()
        )
    assert sorted(stage_codes(parse(fragment))) == sorted(keys)
    # Each stage links to the version's trials that did not pass it; the explorer lists exactly those.
    links = [
        (attr(a, "href"), a.get_text().removesuffix(" trials"))
        for a in parse(fragment).select('a[href^="/trials?"]')
        if a.get_text().endswith(" trials") and a.get_text().removesuffix(" trials").isdigit()
    ]
    assert links
    for url, count in links:
        stage_key = parse_qs(urlsplit(url).query)["stageFailed"][0]
        assert stage_key.startswith("stage_")
        with database.session(member.org.id) as session:
            failed = session.execute(
                text("""SELECT count(*) FROM evaluation_trials WHERE environment_version_id = :v
                AND metrics ? :k AND (metrics ->> :k)::float8 < 1"""),
                {"v": admin.version_id, "k": stage_key},
            ).scalar()
        assert int(count) == failed
        listed = page.get(url).text
        assert len(trial_links(listed)) == min(failed, 50)
    # The page itself holds the same tables (it reads without JavaScript): no fragment left to load.
    listing = page.get("/partial-rewards").text
    section = one(listing, f'section[id="version-{admin.version_id}"]')
    assert sorted(stage_codes(section)) == sorted(keys)
    assert parse(listing).select('[hx-trigger="revealed"]') == []


def test_partial_rewards_past_the_first_versions_load_lazily_with_a_link(page, world, monkeypatch):
    import blueprints.insights

    monkeypatch.setattr(blueprints.insights, "EAGER_VERSIONS", 1)
    listing = page.get("/partial-rewards").text
    sections = parse(listing).select('section.version-card[id^="version-"]')
    assert len(sections) == 2
    eager, lazy = sections
    assert eager.select_one("table") and eager.select_one("[hx-get]") is None
    own_page = f"/partial-rewards/versions/{attr(lazy, 'id').removeprefix('version-')}"
    assert one(lazy, f'[hx-get="{own_page}"]') and one(lazy, '[hx-trigger="revealed"]')
    assert lazy.select_one("table") is None
    assert one(lazy, f'a[href="{own_page}"]')  # the fallback without JavaScript: the version's own page
    assert one(page.get(own_page).text, "table")


def test_a_version_without_metrics_says_so(page, database, member):
    bare = make_catalog(database, member.org.id, NOVICE, attempt_count=1)
    fragment = page.get(f"/partial-rewards/versions/{bare.version_id}", headers={"HX-Request": "true"}).text
    assert "No stage metrics yet" in fragment and parse(fragment).select("table") == []


def test_export_page_lists_the_five_kinds_with_counts_and_curl(page, world, database, member):
    admin = world["admin"]
    body = page.get(f"/environments/{admin.environment_id}/export").text
    downloads = [attr(a, "href") for a in parse(body).select("table.export-kinds a[download]")]
    for kind in ("all", "successful", "failed", "recovery", "preference"):
        assert any(f"kind={kind}&environmentId={admin.environment_id}" in href for href in downloads), kind
    for name in (
        "agentforge-rollouts-all.jsonl",
        "agentforge-rollouts-failed.jsonl",
        "agentforge-preferences.jsonl",
        "agentforge-rollouts-failed.atif.jsonl",
        "agentforge-preferences.trl.jsonl",
    ):
        assert name in body
    curls = copied(body, "table.export-kinds")
    assert any(
        c.startswith('curl -H "Authorization: Bearer $TOKEN" -o agentforge-rollouts-failed.jsonl ') for c in curls
    )
    counts = {
        th.get_text(): td.get_text()
        for th in parse(body).select('th[scope="row"]')
        if th.find() is None
        and th.get_text().replace("_", "").isalnum()
        and isinstance(td := th.find_next_sibling(), Tag)
        and td.name == "td"
        and attr(td, "class") == "num"
        and td.get_text().isdigit()
    }
    assert counts
    for kind, count in counts.items():
        lines = page.get(f"/api/v1/rollouts?kind={kind}&environmentId={admin.environment_id}").get_data(as_text=True)
        assert int(count) == len(lines.splitlines()), kind


def test_run_page_polls_until_finished_and_shows_every_trial(page, world, database, member):
    admin = world["admin"]
    with database.session(member.org.id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (member.org.id, admin.version_id))
        config = session.get_one(EvaluatorConfig, (member.org.id, admin.config_id))
        queued = enqueue_run(session, version, config, 3)
    polling = page.get(f"/runs/{queued.id}", headers={"HX-Request": "true"}).text
    assert one(polling, '#run-live[hx-trigger="every 2s"]') and "0 of 3 trials" in polling
    done = page.get(f"/runs/{world['run']}").text
    assert parse(done).select('[hx-trigger="every 2s"]') == [] and "8 of 8 trials" in done
    assert len(parse(done).select('a[href^="/trials/"]')) == 8
    assert "pass@k of this run" in done and one(done, "svg polyline")
    assert "Reset (new_workspace)" in done and "Reset (new_world)" in done


def test_trial_page_shows_steps_log_stages_and_neighbours(page, world, database, member):
    with database.session(member.org.id) as session:
        second = session.execute(
            text("SELECT id FROM evaluation_trials WHERE evaluation_run_id = :r AND trial_number = 2"),
            {"r": world["run"]},
        ).scalar()
    body = page.get(f"/trials/{second}").text
    assert "Trial 2 of 8" in body and one(body, 'nav.pager a[rel="prev"]') and one(body, 'nav.pager a[rel="next"]')
    assert "opened admin-console" in body and "stage_inventory" in body
    assert "trial-2-trajectory.json" in body


def stage_codes(node: BeautifulSoup | Tag) -> list[str]:
    """The stage keys written as code on a page (a stage table's rows), in order."""
    return [code for code in texts(node, "code") if code.startswith("stage_")]


def overall_rows(body: str) -> list[tuple[str, str, str]]:
    """The capability gap's overall table: each failure category, the link of its count, and the count."""
    return [
        (one(tr, ":scope > td:first-child").get_text(), attr(link, "href"), link.get_text())
        for tr in parse(body).select("table.gap tbody tr")
        if (link := tr.select_one(":scope > td.num > a")) is not None
    ]


def stages_shown(body: str) -> list[str]:
    """The stage keys a page names (column headers or stage-table rows), in the order they first appear."""
    return stage_names(parse(body).select("code, th"))


def stage_names(elements: Iterable[Tag]) -> list[str]:
    """The stage keys the elements (code and th) name, in the order they first appear."""
    named = [
        element.get_text()
        for element in elements
        if len(element.contents) == 1 and isinstance(element.contents[0], NavigableString)
    ]
    return list(dict.fromkeys(key for key in named if key.startswith("stage_")))


def evaluator_picked(body: str) -> str:
    """The evaluator the filter form's menu has selected."""
    return one(body, "select#evaluatorConfigId option[selected]").get_text()


def shown_after(element: Tag) -> str:
    """Everything the page holds after `element` ends: the text and attribute values of what follows, one a line."""
    inside = {id(node) for node in element.descendants}
    following = [node for node in element.next_elements if id(node) not in inside]
    strings = [str(node) for node in following if isinstance(node, NavigableString)]
    values = [attr(node, name) for node in following if isinstance(node, Tag) for name in node.attrs]
    return "\n".join(strings + values)


def test_run_trial_and_partial_rewards_pages_show_stages_in_pipeline_order(page, world):
    admin = world["admin"]
    pipeline = ["stage_inventory", "stage_order", "stage_checkout"]  # admin-console's own order, not alphabetical
    assert stages_shown(page.get(f"/runs/{world['run']}").text) == pipeline
    assert stages_shown(page.get(f"/trials/{world['trial']}").text) == pipeline
    assert stages_shown(page.get(f"/partial-rewards/versions/{admin.version_id}").text) == pipeline


def test_an_mcp_versions_stages_keep_one_order_on_every_page(page, database, member):
    """An MCP verifier declares no order: every page orders its stages by the whole version's pass counts, so a
    trial that passed only the last stage still lists them as its run and the partial rewards page do."""
    from tests.factories import Catalog, finish_run
    from writes.environments import create_environment, create_environment_version, create_evaluator_config

    with database.session(member.org.id) as session, session.begin():
        env = create_environment(session, member.org.id, "mcp-shop", "over MCP")
        spec = {"kind": "mcp", "command": ["python3", "server.py"], "verifier": {"tool": "score"}}
        version = create_environment_version(session, env, spec)
        config = create_evaluator_config(session, member.org.id, "mcp-agent", NOVICE, 4)
        catalog = Catalog(member.org.id, env.id, version.id, config.id)
    fetch_build = ("stage_fetch", "stage_build")
    passes = {1: ("stage_fetch",), 2: fetch_build, 3: fetch_build, 4: ("stage_answer",)}

    def outcome_for(number, seed):
        stages = {key: 1.0 if key in passes[number] else 0.0 for key in ("stage_answer", "stage_build", "stage_fetch")}
        return TrialOutcome(
            status="failed", reward=sum(stages.values()) / 3, failure_category="gave_up", stages=stages,
            steps=[], log="opened", started_at=datetime.now(UTC), task="solve",
        )  # fmt: skip

    run = finish_run(database, catalog, outcome_for)
    with database.session(member.org.id) as session:
        last = session.execute(
            text("SELECT id FROM evaluation_trials WHERE evaluation_run_id = :r AND trial_number = 4"), {"r": run}
        ).scalar()
    pipeline = ["stage_fetch", "stage_build", "stage_answer"]  # passed by 3, 2 and 1 trials
    assert stages_shown(page.get(f"/partial-rewards/versions/{catalog.version_id}").text) == pipeline
    assert stages_shown(page.get(f"/runs/{run}").text) == pipeline
    assert stages_shown(page.get(f"/trials/{last}").text) == pipeline


def test_compare_orders_an_mcp_versions_stages_as_the_version_does(page, database, member):
    """A run whose own pass counts would order the stages differently still lists them in its version's order on
    compare (with a version, an evaluator or another run on the other side)."""
    from tests.factories import Catalog, finish_run
    from writes.environments import create_environment, create_environment_version, create_evaluator_config

    with database.session(member.org.id) as session, session.begin():
        env = create_environment(session, member.org.id, "mcp-order", "over MCP")
        spec = {"kind": "mcp", "command": ["python3", "server.py"], "verifier": {"tool": "score"}}
        version = create_environment_version(session, env, spec)
        config = create_evaluator_config(session, member.org.id, "mcp-agent", NOVICE, 4)
        catalog = Catalog(member.org.id, env.id, version.id, config.id)
    keys = ("stage_answer", "stage_build", "stage_fetch")

    def run_passing(passes):
        def outcome_for(number, seed):
            stages = {key: 1.0 if key in passes.get(number, ()) else 0.0 for key in keys}
            return TrialOutcome(
                status="failed", reward=sum(stages.values()) / 3, failure_category="gave_up", stages=stages,
                steps=[], log="opened", started_at=datetime.now(UTC), task="solve",
            )  # fmt: skip

        return finish_run(database, catalog, outcome_for)

    fetch_build = ("stage_fetch", "stage_build")
    first = run_passing({1: fetch_build, 2: fetch_build, 3: fetch_build, 4: ("stage_fetch",)})
    answers = run_passing({1: ("stage_answer",), 2: ("stage_answer",)})  # its own counts: answer 2, the others 0
    pipeline = ["stage_fetch", "stage_build", "stage_answer"]  # the version's: passed by 4, 3 and 2 trials
    assert stages_shown(page.get(f"/runs/{answers}").text) == pipeline
    for query in (f"a={answers}&b={first}", f"a={answers}&b={catalog.version_id}"):
        body = page.get(f"/compare?{query}").text
        (heading,) = [h2 for h2 in parse(body).select("h2") if h2.get_text() == "Stages (pipeline order)"]
        assert stage_names(e for e in heading.find_all_next(["code", "th"]) if isinstance(e, Tag)) == pipeline, query


def test_hostile_text_is_escaped_and_long_observations_fold(page, database, member):
    catalog = make_catalog(database, member.org.id, NOVICE, attempt_count=1)
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>\x07'
    long_observation = "line\n" * 200
    steps = [
        {"step": 1, "tool": "list<b>", "command": hostile, "observation": hostile},
        {"step": 2, "tool": "list", "command": "list", "observation": long_observation},
    ]
    outcome = TrialOutcome(
        status="failed",
        reward=0.0,
        failure_category="gave_up",
        stages={"stage_x": 0.0},
        steps=typed_steps(steps),
        log="log " + hostile,
        started_at=datetime.now(UTC),
        task="task " + hostile,
    )
    with database.session(member.org.id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (member.org.id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (member.org.id, catalog.config_id))
        run = enqueue_run(session, version, config, 1)
        trial = record_trial(session, session.get_one(EvaluationRun, (member.org.id, run.id)), 1, 1, outcome)
    body = page.get(f"/trials/{trial.id}").text
    assert "<script>alert" not in body and "<img src=x" not in body and "<b>" not in body  # no live markup, raw
    assert hostile.replace("\x07", "\u2407") in texts(body, "pre.command")  # shown as text, the bell as a symbol
    assert "Show 192 more lines (960 characters)" in texts(body, "details.fold > summary")  # 8 lines shown


def test_pages_issue_a_fixed_number_of_queries_whatever_the_history(page, world, database, member):
    """No query per row: growing the history leaves every page's statement count unchanged."""
    urls = page_urls(world)

    def budget() -> dict[str, int]:
        counts = {}
        for name, url in urls.items():
            with counting_queries(database) as statements:
                assert page.get(url).status_code == 200
            counts[name] = len(statements)
        return counts

    budget()  # a first visit may keep one of the member's checklist marks (web.checklist.reached), once
    before = budget()
    finish_runs(database, world["admin"], 3)
    finish_runs(database, world["desk"], 2)
    extra = make_catalog(
        database, member.org.id, NOVICE, attempt_count=2, environment="support-desk", config_name="third"
    )
    finish_runs(database, extra, 1)
    after = budget()
    print("statements per page:", after)
    assert after == before
    assert max(after.values()) <= 8, after


def test_artifact_download_link_matches_the_stored_document(page, world, database, member):
    body = page.get(f"/trials/{world['trial']}").text
    name = "admin-console-v1-run-1-trial-1-trajectory.json"  # environment, version, the run's #n, the trial
    page_html = parse(body)
    link = attr(one(page_html, f'a[download="{name}"]'), "href")
    assert re.fullmatch(r"/trials/[0-9a-f-]+/trajectory\.json", link)
    response = page.get(link)
    assert response.headers["Content-Disposition"] == f'attachment; filename="{name}"'
    assert json.loads(response.data)["schemaVersion"] == 1
    stored = one(page_html, 'a[href^="/api/v1/artifacts/"][hx-boost="false"]')
    assert stored.get_text() == "trial-1-trajectory.json"
    artifact = page.get(attr(stored, "href"))  # the artifact keeps the seed's name
    assert artifact.headers["Content-Disposition"] == "attachment; filename=trial-1-trajectory.json"
    assert artifact.data == response.data
