"""Compare: figures equal scipy's on fixed data (one task per side: the exact tests over its trials), a reset pair
read by task (never trial n with trial n), verdicts, charts, errors, tenancy. Many tasks: test_compare_tasks.py."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from bs4 import Tag
from scipy import special, stats

from domain import comparison
from domain.outcome import TrialOutcome
from models import EvaluationRun
from tests.factories import finish_run, make_catalog
from tests.helpers import attr, one, parse, texts
from writes.runs import complete_run, record_trial, reset_run, trial_seed

EXPERT = {"kind": "scripted", "skill": 0.9}
STAGES = ("stage_inventory", "stage_order", "stage_checkout")


def outcome(won: bool, category: str = "wrong_item") -> TrialOutcome:
    """A scored trial that passed every stage (reward 1) or only the first (reward 1/3)."""
    stages = {key: 1.0 if won or i == 0 else 0.0 for i, key in enumerate(STAGES)}
    return TrialOutcome(
        status="succeeded" if won else "failed",
        reward=1.0 if won else round(1 / 3, 6),
        failure_category=None if won else category,
        stages=stages,
        steps=[],
        log="",
        started_at=datetime.now(UTC),
        task="restock and order",
    )


def run_with(database, catalog, wins: list[bool]) -> uuid.UUID:
    """A finished run of len(wins) trials (set by the config's attemptCount) whose trial n won when wins[n-1]."""
    return finish_run(database, catalog, lambda number, seed: outcome(wins[number - 1]))


def reset_with(database, catalog, run_id: uuid.UUID, wins: list[bool], mode: str = "new_workspace") -> uuid.UUID:
    """Reset `run_id` (same world for new_workspace) and record the new run's trials as `wins` says."""
    org = catalog.org_id
    with database.session(org) as session, session.begin():
        new = reset_run(session, session.get_one(EvaluationRun, (org, run_id)), mode)
    for number, won in enumerate(wins, start=1):
        with database.session(org) as session, session.begin():
            run = session.get_one(EvaluationRun, (org, new.id))
            record_trial(session, run, number, trial_seed(run, number), outcome(won))
    with database.session(org) as session, session.begin():
        complete_run(session, session.get_one(EvaluationRun, (org, new.id)))
    return new.id


A_RUNS = [[True, False, False, False], [False, False, True, False], [False, False, False, False]]
B_RUNS = [[True, True, False, True], [True, True, True, False], [True, False, True, True]]


@pytest.fixture
def versions(database, member):
    """Two versions of admin-console with three runs of four trials each: A wins 2 of 12, B 9 of 12."""
    a = make_catalog(database, member.org.id, EXPERT, 4, params={"skus": 4}, config_name="expert")
    b = make_catalog(database, member.org.id, EXPERT, 4, params={"skus": 5}, config_name="expert-2")
    a_runs = [run_with(database, a, wins) for wins in A_RUNS]
    b_runs = [run_with(database, b, wins) for wins in B_RUNS]
    return a, b, a_runs, b_runs


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def close(x, y):
    return x == pytest.approx(y, rel=1e-9, abs=1e-12)


def test_version_figures_equal_scipys_own(page, versions):
    a, b, _, _ = versions
    answer = page.get(f"/api/v1/compare?a={a.version_id}&b={b.version_id}")
    assert answer.status_code == 200, answer.text
    body = answer.json
    assert (body["a"]["trials"], body["a"]["successes"], body["b"]["trials"], body["b"]["successes"]) == (12, 2, 12, 9)
    # pass@1: exact Clopper-Pearson per side, Fisher's exact test between them.
    for side, wins in (("a", 2), ("b", 9)):
        ci = stats.binomtest(wins, 12).proportion_ci(0.95, method="exact")
        assert close(body[side]["passAtK"]["1"]["value"], wins / 12)
        assert close(body[side]["passAtK"]["1"]["ci95"][0], ci.low) and close(
            body[side]["passAtK"]["1"]["ci95"][1], ci.high
        )
    # Every trial has the same task text: each side holds one task, so the tests are the exact ones over its trials.
    test = body["tests"]["passAt1"]
    assert test["method"] == "Fisher's exact test" and body["tests"]["paired"] is False
    assert body["tests"]["unit"] == "trial" and body["tests"]["pairedTasks"] == 0
    assert close(test["pValue"], stats.fisher_exact([[9, 3], [2, 10]]).pvalue)
    assert close(test["difference"], 9 / 12 - 2 / 12)
    # The versions were run by different evaluators ("expert", "expert-2"): the mix is warned, with the counts.
    assert [w["code"] for w in body["warnings"]] == ["evaluator-mix", "one-task", "one-task"]
    assert "A: expert 12, expert-2 0; B: expert 0, expert-2 12" in body["warnings"][0]["message"]
    assert body["a"]["tasks"] == 1 and len(body["tasks"]) == 1 and body["tasks"][0]["text"] == "restock and order"
    # pass@2 over tasks: the unbiased estimator of the one task's 12 attempts; one task gives no interval.
    assert close(body["a"]["passAtK"]["2"]["value"], 1 - special.comb(10, 2) / special.comb(12, 2))
    assert body["a"]["passAtK"]["2"]["ci95"] is None and body["a"]["passAtK"]["2"]["tasks"] == 1
    # Mean reward: t interval per side, Welch's t-test over the one task's trials between them.
    rewards = {
        side: [1.0 if won else round(1 / 3, 6) for wins in runs for won in wins]
        for side, runs in (("a", A_RUNS), ("b", B_RUNS))
    }
    welch = stats.ttest_ind(rewards["b"], rewards["a"], equal_var=False)
    mean_test = body["tests"]["meanReward"]
    assert mean_test["method"] == "Welch's t-test over the trials of one task"
    assert close(mean_test["pValue"], welch.pvalue)
    ci = welch.confidence_interval(0.95)
    assert close(mean_test["ci95"][0], ci.low) and close(mean_test["ci95"][1], ci.high)
    one = stats.ttest_1samp(rewards["a"], 0).confidence_interval(0.95)
    assert close(body["a"]["meanReward"]["ci95"][0], max(0, one.low))
    # Stages in pipeline order, categories as rates per trial.
    assert body["a"]["stageOrder"] == list(STAGES)
    assert body["a"]["stages"]["stage_order"] == {"trials": 12, "passed": 2, "rate": 2 / 12}
    assert body["a"]["failureCategories"]["wrong_item"] == {"trials": 10, "rate": 10 / 12}


def test_significant_verdict_names_the_test(page, versions):
    a, b, _, _ = versions
    html = page.get(f"/compare?a={a.version_id}&b={b.version_id}").text
    p_value = stats.fisher_exact([[9, 3], [2, 10]]).pvalue
    verdict = one(html, "#verdict-pass-at-1").get_text()
    assert "B's pass@1 is higher by 0.58" in verdict
    assert f"p = {p_value:.2f}, Fisher's exact test" in verdict
    assert "exact Clopper-Pearson" in html and "unbiased estimator" in html
    assert "one task, 12 attempts: this says nothing about other tasks" in html


def test_not_significant_verdict_of_one_task_says_it_reads_trials(page, database, member):
    catalog = make_catalog(database, member.org.id, EXPERT, 4, config_name="expert")
    first = run_with(database, catalog, [True, False, False, False])
    second = run_with(database, catalog, [True, True, False, False])
    html = page.get(f"/compare?a={first}&b={second}").text
    assert "No detectable difference in pass@1 at these sample sizes: B - A = +0.25" in html
    verdict = one(html, "#verdict-pass-at-1").get_text()
    assert "Fisher's exact test, over trials: a side holds one task, so this says nothing about other tasks" in verdict
    assert "more trials per side" not in html


def test_reset_pair_is_read_by_task_not_by_trial_number(page, database, member):
    catalog = make_catalog(database, member.org.id, EXPERT, 6, config_name="expert")
    wins_a = [True, False, False, True, False, False]
    wins_b = [True, True, True, False, True, False]
    first = run_with(database, catalog, wins_a)
    second = reset_with(database, catalog, first, wins_b)
    body = page.get(f"/api/v1/compare?a={first}&b={second}").json
    # Both runs attempted one task (the same text) six times: attempts of a task are exchangeable, so trial n of A
    # is no pair of trial n of B; the one task's trials are compared by Fisher's exact test.
    assert body["tests"]["paired"] is False and body["tests"]["unit"] == "trial"
    test = body["tests"]["passAt1"]
    assert test["method"] == "Fisher's exact test"
    assert close(test["pValue"], stats.fisher_exact([[4, 2], [2, 4]]).pvalue)
    assert [(row["a"]["successes"], row["b"]["successes"]) for row in body["tasks"]] == [(2, 4)]
    html = page.get(f"/compare?a={first}&b={second}").text
    assert "Same tasks, paired" not in html and "trial 1" not in html
    row = one(html, "tr.task-shared")
    assert "restock and order" in row.get_text() and "2 of 6" in row.get_text() and "4 of 6" in row.get_text()
    task = body["tasks"][0]["task"]
    assert one(row, f'a[href="/trials?evaluationRunId={second}&task={task}"]')
    # The reset run links to the comparison with the run it resets.
    run_page = page.get(f"/runs/{second}").text
    assert one(run_page, f'a.compare-reset[href="/compare?a={first}&b={second}"]')
    # A new_world reset draws a new world: unpaired.
    other = reset_with(database, catalog, first, wins_b, mode="new_world")
    assert page.get(f"/api/v1/compare?a={first}&b={other}").json["tests"]["paired"] is False


def values(menu: Tag) -> list[str]:
    """The values of a select menu's options."""
    return [attr(option, "value") for option in menu.select("option")]


def test_charts_have_titles_and_axis_labels(page, versions):
    a, b, _, _ = versions
    html = page.get(f"/compare?a={a.version_id}&b={b.version_id}").text
    svgs = parse(html).select("svg")
    titles = [one(svg, "title").get_text() for svg in svgs]
    assert "pass@k with 95% intervals" in titles and "Stage funnel (pipeline order)" in titles
    assert any(t.startswith("Reward histogram, A") for t in titles)
    for svg in svgs:
        assert one(svg, "text.axis-label.x-label") and one(svg, "text.axis-label.y-label")
    assert "k (attempts per task)" in html and "reward (0 to 1)" in html and "pass@k (share of tasks)" in html
    assert one(html, "svg polygon.band.series-b")  # the interval band
    funnel = next(svg for svg in svgs if "Stage funnel" in svg.get_text())
    stages = [str(s) for s in funnel.find_all(string=True) if s in ("inventory", "order", "checkout")]
    assert stages == ["inventory", "order", "checkout"]


def test_evaluator_narrows_a_version_side(page, versions):
    a, b, _, _ = versions
    body = page.get(f"/api/v1/compare?a={a.version_id}&b={b.version_id}&bEvaluatorConfigId={b.config_id}").json
    assert body["b"]["evaluatorConfigId"] == str(b.config_id) and body["b"]["trials"] == 12
    assert "expert-2" in body["b"]["label"]


def test_bad_and_unknown_ids(page, versions):
    a, _, a_runs, _ = versions
    # the page draws the picker again with the refusal (test_compare_picker.py): 422, 404 for an unknown side
    assert page.get(f"/compare?a={a.version_id}").status_code == 422
    assert page.get(f"/compare?a={a.version_id}&b=nope").status_code == 422
    assert page.get(f"/compare?a={a.version_id}&b={uuid.uuid4()}").status_code == 404
    assert page.get(f"/compare?a={a_runs[0]}&b={a_runs[1]}&aEvaluatorConfigId={a.config_id}").status_code == 422
    assert page.get(f"/compare?a={a.version_id}&b={a_runs[0]}&aEvaluatorConfigId={uuid.uuid4()}").status_code == 404
    api = page.get(f"/api/v1/compare?a={a.version_id}")
    assert api.status_code == 400 and api.json["error"] == "missing b"
    assert page.get(f"/api/v1/compare?a={a.version_id}&b=x").json["error"] == "invalid b"
    assert page.get(f"/api/v1/compare?a={a.version_id}&b={uuid.uuid4()}").status_code == 404


def test_compare_with_no_sides_shows_the_picker(page, versions, database, member):
    a, b, a_runs, _ = versions
    desk = make_catalog(database, member.org.id, EXPERT, 4, environment="support-desk", config_name="desk")
    answer = page.get("/compare")
    assert answer.status_code == 200
    html = answer.text
    doc = parse(html)
    environments = one(doc, "select#environmentId").get_text()
    assert "admin-console" in environments and "support-desk" in environments
    # A defaults to the previous version, B to the newest, of the environment shown (admin-console comes first).
    for side, version_id in (("a", a.version_id), ("b", b.version_id)):
        menu = one(doc, f'select#pick-{side}[name="{side}"][required]')
        assert one(menu, f'option[value="{version_id}"][selected]')
        assert str(a_runs[0]) in values(menu) and str(desk.version_id) not in values(menu)
    evaluators = [attr(o, "value") for o in one(html, 'select#pick-a-evaluator[name="aEvaluatorConfigId"]')("option")]
    assert str(a.config_id) in evaluators and str(b.config_id) in evaluators
    # Another environment narrows the version and run menus to its own.
    narrowed = page.get(f"/compare?environmentId={desk.environment_id}").text
    menu = one(narrowed, 'select#pick-a[name="a"][required]')
    assert str(desk.version_id) in values(menu) and str(a.version_id) not in values(menu)
    # The form's answer is the comparison (an empty evaluator menu narrows nothing).
    picked = page.get(f"/compare?a={a.version_id}&aEvaluatorConfigId=&b={b.version_id}&bEvaluatorConfigId=")
    assert picked.status_code == 200 and one(picked.text, "p#verdict-pass-at-1")


def test_checkboxes_redirect_to_the_pair(page, versions):
    _, _, a_runs, b_runs = versions
    answer = page.get(f"/compare?id={a_runs[0]}&id={b_runs[0]}")
    assert answer.status_code == 303 and f"a={a_runs[0]}" in answer.location and f"b={b_runs[0]}" in answer.location
    # Ticked in either order, the older run is A.
    answer = page.get(f"/compare?id={b_runs[0]}&id={a_runs[0]}")
    assert answer.status_code == 303 and f"a={a_runs[0]}" in answer.location and f"b={b_runs[0]}" in answer.location
    assert page.get(f"/compare?id={a_runs[0]}").status_code == 400


def test_another_organizations_ids_are_not_found(client, auth, database, versions, make_member):
    a, b, a_runs, _ = versions
    stranger = make_member("sam@globex.test", "Globex Research")
    auth.login(stranger.email)
    assert client.get(f"/compare?a={a.version_id}&b={b.version_id}").status_code == 404
    assert client.get(f"/compare?a={a_runs[0]}&b={a_runs[1]}").status_code == 404
    assert client.get(f"/api/v1/compare?a={a.version_id}&b={b.version_id}").status_code == 404


def test_page_titles_and_lists_name_runs(page, versions):
    a, _, a_runs, _ = versions
    run_page = page.get(f"/runs/{a_runs[1]}").text
    assert one(run_page, "head > title").get_text() == "admin-console v1 · expert · #2 · AgentForge"
    environment = page.get(f"/environments/{a.environment_id}").text
    assert "admin-console v1 · expert · #3" in environment
    assert (
        one(environment, 'form.compare-picker input[type="checkbox"][name="id"]') and "Compare selected" in environment
    )
    assert one(environment, 'a[href^="/compare?a="]')  # version vs previous version


def test_capability_gap_matrix_of_rates_with_links(page, versions, database, member):
    a, b, _, _ = versions
    desk = make_catalog(database, member.org.id, EXPERT, 4, environment="support-desk", config_name="desk")
    html = page.get("/capability-gap").text
    doc = parse(html)
    matrix = one(doc, "table.matrix")
    cell = one(matrix, f'a[href="/trials?failureCategory=wrong_item&environmentVersionId={a.version_id}"]')
    assert (attr(cell, "title"), cell.get_text()) == ("10 of 12 trials of admin-console v1", "83.3%")
    b_cells = matrix.select(f'a[href$="environmentVersionId={b.version_id}"]')
    b_title = "3 of 12 trials of admin-console v2"
    assert any(attr(c, "title") == b_title and c.get_text().startswith("25.0%") for c in b_cells)
    headers = [th for th in matrix.select("th") if th.contents and th.contents[0] == "admin-console v1"]
    assert [th for th in headers if th.select_one(":scope > div")] and "12 trials" in matrix.get_text()
    # The version menu offers only the chosen environment's versions.
    narrowed = page.get(f"/capability-gap?environmentId={a.environment_id}").text
    menu = one(narrowed, "select#environmentVersionId")
    assert str(a.version_id) in values(menu) and str(desk.version_id) not in values(menu)
    assert str(desk.version_id) in values(one(doc, "select#environmentVersionId"))


def test_partial_rewards_in_pipeline_order(page, versions):
    a, _, _, _ = versions
    fragment = page.get(f"/partial-rewards/versions/{a.version_id}", headers={"HX-Request": "true"}).text
    assert [code for code in texts(fragment, "code") if code.startswith("stage_")] == list(STAGES)
    assert one(fragment, "table.aligned")


@pytest.mark.parametrize(("successes", "trials"), [(0, 8), (3, 8), (8, 8), (517, 1200), (49_000, 50_000)])
def test_wilson_intervals_equal_scipys(successes, trials):
    expected = stats.binomtest(successes, trials).proportion_ci(0.95, method="wilson")
    low, high = comparison.wilson(successes, trials)
    assert close(low, expected.low) and close(high, expected.high)


def test_pass_at_1_of_large_sides_is_compared_by_the_chi_squared_test_and_small_ones_by_fishers():
    large = comparison.unpaired_pass_at_1(1200, 2000, 1300, 2000)
    assert large.method == "Pearson's chi-squared test"
    assert close(large.p_value, stats.chi2_contingency([[1300, 700], [1200, 800]], correction=True).pvalue)
    assert large.p_value == pytest.approx(stats.fisher_exact([[1300, 700], [1200, 800]]).pvalue, rel=0.05)
    small = comparison.unpaired_pass_at_1(600, 1000, 650, 1000)
    assert small.method == "Fisher's exact test"
    assert close(small.p_value, stats.fisher_exact([[650, 350], [600, 400]]).pvalue)
    assert comparison.unpaired_pass_at_1(0, 2000, 0, 3000).p_value == 1.0  # nothing succeeded on either side
