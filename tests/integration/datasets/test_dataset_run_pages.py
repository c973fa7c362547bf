"""The dataset run pages after real worker runs: the page shows the figures the API gives, every task row opening its
trials, the capability gap and partial rewards; it polls while queued and stops when done; the retry button shows
only with errors and retries from the page; the list and its start form (refusals with nothing written, a second
POST of one form going to the first one's dataset run); viewers neither start nor retry; another organization's
dataset run answers 404; a large dataset run shows 200 task rows; the statement count does not grow with the tasks."""

from __future__ import annotations

import re
import uuid

import pytest
from sqlalchemy import text

from tests.conftest import ApiClient, csrf_token_from
from tests.factories import dataset_run_of, make_catalog
from tests.helpers import (
    attr,
    counting_queries,
    found,
    is_fragment,
    is_whole_page,
    one,
    parse,
    table_counts,
    texts,
    trial_links,
    work,
)
from tests.integration.datasets.test_dataset_runs import CRASHES, NOVICE, dataset_version, evaluator, start
from tests.integration.datasets.test_datasets_api import builtin_version, new_dataset
from tests.integration.mcp.test_mcp import faulty

ADMIN_CONSOLE_STAGES = ["stage_inventory", "stage_order", "stage_checkout"]


def cells(row) -> list[str]:
    return [" ".join(cell.get_text().split()) for cell in row.select("td, th")]


def task_rows(body: str) -> list:
    return parse(body).select("table.dataset-run-tasks tbody tr")


def form_fields(body: str) -> dict[str, str]:
    """The start form's hidden fields as the page drew them (CSRF token, submission key)."""
    return {
        "csrf_token": csrf_token_from(body),
        "submission_key": attr(one(body, '#start-dataset-run input[name="submission_key"]'), "value"),
    }


def mark_checkpoint(database, org_id, config_id: str, checkpoint: str, step: int) -> None:
    with database.session(org_id) as session, session.begin():
        session.execute(
            text("UPDATE evaluator_configs SET checkpoint = :c, step = :s WHERE id = :id"),
            {"c": checkpoint, "s": step, "id": config_id},
        )


def test_the_page_after_real_runs_shows_the_apis_figures_and_every_task(api, database):
    version = dataset_version(api, count=3)
    config = evaluator(api, "novice", NOVICE, attempts=4)
    mark_checkpoint(database, api.org.id, config["id"], "ckpt-9", 9000)
    dataset_run = start(api, version, config)
    work(database)
    answer = api.get(f"/api/v1/dataset-runs/{dataset_run['id']}").json
    assert answer["status"] == "completed", answer

    response = api.get(f"/dataset-runs/{dataset_run['id']}")
    assert response.status_code == 200
    body = response.text
    assert texts(body, "h1") == ["novice (checkpoint ckpt-9, step 9000) on shop-50 v1"]
    assert texts(body, "#dataset-run-state") == ["completed"]
    assert texts(body, "#dataset-run-progress") == ["3 of 3 tasks · 12 of 12 trials"]
    assert parse(body).select("[hx-trigger]") == [] and parse(body).select("#dataset-run-meter progress") == []

    # pass@k and mean reward: the API's values with their 95% intervals
    figures = {cells(row)[0]: cells(row)[1] for row in parse(body).select("table.dataset-run-figures tbody tr")}
    assert list(figures) == ["pass@1", "pass@2", "pass@3", "pass@4", "Mean reward"]
    for k, figure in answer["passAtK"].items():
        shown = f"{figure['value']:.2f} [{figure['low']:.2f}, {figure['high']:.2f}] SE {figure['stderr']:.2f}"
        assert figures[f"pass@{k}"] == f"{shown} {figure['tasks']} tasks", (k, figures)
    mean = answer["meanReward"]
    assert figures["Mean reward"].startswith(f"{mean['value']:.3f} [{mean['low']:.3f}, {mean['high']:.3f}]")
    assert "pass@k with 95% intervals" in body  # the chart

    # one row per task, in order, each opening its trials
    rows = task_rows(body)
    assert len(rows) == 3
    for row, task in zip(rows, answer["tasks"], strict=True):
        position, environment, seed, task_text, status, trials, successes, reward, errors, retries = cells(row)
        assert (position, environment, seed, status) == (
            str(task["position"]),
            "admin-console v1",
            str(task["worldSeed"]),
            "completed",
        )
        assert task["task"].startswith(task_text.removesuffix("...")) and task_text
        assert trials == f"4 of 4 trials of task {task['position']}"
        assert (successes, errors, retries) == (str(task["successes"]), "0", "0")
        assert reward == f"{task['meanReward']:.3f}"
        link = attr(one(row, "td:nth-of-type(6) a"), "href")
        assert link == f"/trials?evaluationRunId={task['evaluationRunId']}"
        opened = api.get(link).text  # the explorer lists that task's four trials and no other
        assert len(trial_links(opened)) == 4
        assert attr(one(row, "td:first-child a"), "href") == f"/runs/{task['evaluationRunId']}"

    # the capability gap, most frequent first, and the partial rewards in the world's pipeline order
    gap = [(c[0], int(c[1])) for c in map(cells, parse(body).select("table.dataset-run-gap tbody tr"))]
    assert dict(gap) == answer["failureCategories"]
    assert gap == sorted(gap, key=lambda row: (-row[1], row[0]))  # the most frequent first
    stages = [cells(row) for row in parse(body).select("table.dataset-run-stages tbody tr")]
    assert [s[0] for s in stages] == [key for key in ADMIN_CONSOLE_STAGES if key in answer["stages"]]
    assert {s[0]: (int(s[1]), int(s[2])) for s in stages} == {
        key: (figure["trials"], figure["passed"]) for key, figure in answer["stages"].items()
    }

    # no task ended in errors: no retry button
    assert parse(body).select("form.retry-errors") == [] and "nothing to retry" in body

    # the run page of a task names its dataset run
    first = answer["tasks"][0]
    run_page = api.get(f"/runs/{first['evaluationRunId']}").text
    line = one(run_page, "p.dataset-run-of")
    assert " ".join(line.get_text().split()) == "Task 1 of dataset run novice on shop-50 v1"
    assert attr(one(line, "a"), "href") == f"/dataset-runs/{dataset_run['id']}"


def test_a_run_outside_any_dataset_run_names_none(api):
    version = builtin_version(api)
    config = evaluator(api, "novice", NOVICE, attempts=1)
    run = api.post(
        "/api/v1/evaluation-runs", {"environmentVersionId": version["id"], "evaluatorConfigId": config["id"]}
    )
    assert run.status_code == 202, run.json
    page = api.get(f"/runs/{run.json['id']}")
    assert page.status_code == 200 and parse(page.text).select("p.dataset-run-of") == []
    assert "dataset run" not in page.text


def test_a_queued_dataset_run_polls_and_its_fragment_is_the_live_block(api):
    dataset_run = start(api, dataset_version(api, count=3), evaluator(api, "novice", NOVICE, attempts=3))
    url = f"/dataset-runs/{dataset_run['id']}"
    full = api.get(url).text
    assert is_whole_page(full)
    assert texts(full, "#dataset-run-state") == ["queued"]
    assert texts(full, "#dataset-run-progress") == ["0 of 3 tasks · 0 of 9 trials"]
    assert attr(one(full, "#dataset-run-progress"), "role") == "status"
    live = one(full, "#dataset-run-live")
    assert (attr(live, "hx-get"), attr(live, "hx-trigger")) == (url, "every 2s")
    assert "Queued: one evaluation run per task waits for a worker" in live.get_text()
    assert [cells(row)[4] for row in task_rows(full)] == ["queued"] * 3
    assert [cells(row)[3] for row in task_rows(full)] == ["not started"] * 3

    fragment = api.get(url, headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and is_fragment(fragment.text)
    assert parse(fragment.text).select('nav[aria-label="Main"]') == []
    assert attr(one(fragment.text, "#dataset-run-live"), "hx-trigger") == "every 2s"
    swapped = re.findall(r'<span id="([a-z-]+)" hx-swap-oob="innerHTML">', fragment.text)  # the status line's parts
    assert swapped == ["dataset-run-state", "dataset-run-progress", "dataset-run-meter"]
    assert "0 of 3 tasks · 0 of 9 trials" in fragment.text


def test_a_running_dataset_run_says_how_far_it_got_and_about_how_long_is_left(api, database):
    catalog = make_catalog(database, api.org.id, NOVICE, attempt_count=2)
    dataset_run_id = dataset_run_of(database, catalog, tasks=3, finished=1)
    with database.session(api.org.id) as session, session.begin():  # its first task began ten minutes ago
        session.execute(
            text(
                "UPDATE evaluation_runs SET started_at = now() - interval '10 minutes' "
                "WHERE dataset_run_id = :id AND dataset_position = 1"
            ),
            {"id": dataset_run_id},
        )
    body = api.get(f"/dataset-runs/{dataset_run_id}").text
    assert texts(body, "#dataset-run-state") == ["running"]
    assert texts(body, "#dataset-run-progress") == ["1 of 3 tasks · 2 of 6 trials"]
    assert attr(one(body, "#dataset-run-meter progress"), "value") == "2"
    assert attr(one(body, "#dataset-run-live"), "hx-trigger") == "every 2s"
    now = " ".join(one(body, "p.run-now").get_text().split())
    # 2 trials in 10 minutes, 4 to go: about 20 minutes at that pace
    found(r"^Running: 1 of 3 tasks done, 2 of 6 trials recorded\. About 20 min \d\d s left at the pace so far\.$", now)
    assert [cells(row)[4] for row in task_rows(body)] == ["completed", "queued", "queued"]


def test_the_retry_button_shows_only_with_errors_and_retries_from_the_page(api, database, count_rows):
    version = dataset_version(api, count=3)
    crashed = start(api, version, evaluator(api, "crashes", CRASHES, attempts=2))
    scored = start(api, version, evaluator(api, "novice", NOVICE, attempts=2))
    work(database)

    clean = api.get(f"/dataset-runs/{scored['id']}").text
    assert parse(clean).select("form.retry-errors") == []
    refused = api.post(f"/dataset-runs/{scored['id']}/retry", data={"csrf_token": csrf_token_from(clean)})
    assert refused.status_code == 409 and is_whole_page(refused.text)
    assert "nothing to retry" in refused.text and "Scored failures" in refused.text

    page = api.get(f"/dataset-runs/{crashed['id']}").text
    assert [cells(row)[8] for row in task_rows(page)] == ["2", "2", "2"]  # errors per task
    form = one(page, "form.retry-errors")
    assert attr(form, "method") == "post" and attr(form, "action") == f"/dataset-runs/{crashed['id']}/retry"
    assert texts(form, "button") == ["Retry the 3 tasks that ended in errors"]
    before = table_counts(count_rows, api.org)

    retried = api.post(attr(form, "action"), data={"csrf_token": attr(one(form, 'input[name="csrf_token"]'), "value")})
    assert retried.status_code == 303 and retried.headers["Location"] == f"/dataset-runs/{crashed['id']}"
    after = api.get(retried.headers["Location"]).text
    assert "Queued again 3 tasks that ended in errors" in texts(after, "ul.flashes li")[0]
    assert texts(after, "#dataset-run-state") == ["running"]
    assert attr(one(after, "#dataset-run-live"), "hx-trigger") == "every 2s"
    assert [(cells(row)[4], cells(row)[9]) for row in task_rows(after)] == [("queued", "1")] * 3
    assert parse(after).select("form.retry-errors") == []
    assert count_rows("evaluation_runs", api.org) == before["evaluation_runs"][0] + 3

    again = api.post(f"/dataset-runs/{crashed['id']}/retry", data={"csrf_token": csrf_token_from(after)})
    assert again.status_code == 409 and "nothing to retry" in again.text
    assert count_rows("evaluation_runs", api.org) == before["evaluation_runs"][0] + 3


def test_trials_that_were_never_scored_count_as_errors_and_their_tasks_are_retried(api, database):
    environment = api.post("/api/v1/environments", {"name": "faulty-mcp"}).json
    spec = faulty("nostart")  # an MCP server that exits at once: each trial ends status error, never scored
    mcp = api.post(f"/api/v1/environments/{environment['id']}/versions", {"spec": spec}).json
    dataset = new_dataset(api, "faulty")
    version = api.post(f"/api/v1/datasets/{dataset['id']}/versions", {"environmentVersionId": mcp["id"], "count": 2})
    assert version.status_code == 201, version.json
    dataset_run = start(api, version.json, evaluator(api, "crashes", CRASHES, attempts=2))
    work(database)

    answer = api.get(f"/api/v1/dataset-runs/{dataset_run['id']}").json
    assert [(t["trials"], t["successes"], t["errors"], t["meanReward"]) for t in answer["tasks"]] == [
        (2, 0, 2, None)
    ] * 2
    assert answer["failureCategories"] == {"environment_error": 4} and answer["progress"]["tasksWithErrors"] == 2
    body = api.get(f"/dataset-runs/{dataset_run['id']}").text
    assert [(cells(row)[5], cells(row)[7], cells(row)[8]) for row in task_rows(body)] == [
        (f"2 of 2 trials of task {n}", "—", "2") for n in (1, 2)
    ]
    assert texts(body, "form.retry-errors button") == ["Retry the 2 tasks that ended in errors"]
    assert [cells(row)[:2] for row in parse(body).select("table.dataset-run-gap tbody tr")] == [
        ["environment_error", "4"]
    ]
    retried = api.post(f"/dataset-runs/{dataset_run['id']}/retry", data={"csrf_token": csrf_token_from(body)})
    assert retried.status_code == 303


def test_the_list_and_start_form_start_a_dataset_run_once_per_submitted_form(api, count_rows):
    empty = api.get("/dataset-runs").text
    assert "No dataset runs yet" in texts(empty, "p.empty-state")[-1]
    version = dataset_version(api, count=3)
    config = evaluator(api, "novice", NOVICE, attempts=2)
    page = api.get("/dataset-runs").text
    assert texts(page, "#dataset_version_id option")[1:] == ["shop-50 v1 (3 tasks)"]
    assert texts(page, "#evaluator_config_id option")[1:] == ["novice (attemptCount 2)"]
    fields = {**form_fields(page), "dataset_version_id": version["id"], "evaluator_config_id": config["id"]}

    made = api.post("/dataset-runs", data={**fields, "attempt_count": "3"})
    assert made.status_code == 303, made.text[:500]
    dataset_run_id = made.headers["Location"].removeprefix("/dataset-runs/")
    assert api.get(f"/api/v1/dataset-runs/{dataset_run_id}").json["progress"]["trialsTotal"] == 9
    assert (count_rows("dataset_runs", api.org), count_rows("evaluation_runs", api.org)) == (1, 3)

    twice = api.post("/dataset-runs", data={**fields, "attempt_count": "3"})  # the same form again (a double click)
    assert twice.status_code == 303 and twice.headers["Location"] == made.headers["Location"]
    assert (count_rows("dataset_runs", api.org), count_rows("evaluation_runs", api.org)) == (1, 3)
    assert "This form was already submitted" in api.get(twice.headers["Location"]).text

    listed = api.get("/dataset-runs").text
    rows = parse(listed).select("table.dataset-runs tbody tr")
    assert [cells(row)[:5] for row in rows] == [["novice on shop-50 v1", "shop-50 v1", "novice", "3", "3"]]
    assert attr(one(rows[0], "a"), "href") == f"/dataset-runs/{dataset_run_id}"
    assert parse(listed).select("p.empty-state") == []


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"dataset_version_id": ""}, "dataset_version_id", "Choose a dataset version."),
        ({"dataset_version_id": "nope"}, "dataset_version_id", "Choose a dataset version."),
        ({"dataset_version_id": str(uuid.UUID(int=7))}, "dataset_version_id", "Choose a dataset version of this"),
        ({"evaluator_config_id": ""}, "evaluator_config_id", "Choose an evaluator configuration."),
        ({"evaluator_config_id": str(uuid.UUID(int=7))}, "evaluator_config_id", "Choose an evaluator configuration of"),
        ({"attempt_count": "0"}, "attempt_count", "Attempt count must be"),
        ({"attempt_count": "100000"}, "attempt_count", "Attempt count must be"),
        ({"attempt_count": "two"}, "attempt_count", "Attempt count must be"),
        ({"evaluator_config_id": "imported"}, "evaluator_config_id", "is imported"),
    ],
)
def test_a_refused_start_form_says_why_in_place_and_writes_nothing(api, count_rows, change, field, message):
    version = dataset_version(api, count=2)
    config = evaluator(api, "novice", NOVICE)
    imported = evaluator(api, "elsewhere", {"kind": "external", "name": "someone"})
    page = api.get("/dataset-runs").text
    fields = {**form_fields(page), "dataset_version_id": version["id"], "evaluator_config_id": config["id"]}
    fields.update({k: imported["id"] if v == "imported" else v for k, v in change.items()})
    before = table_counts(count_rows, api.org)
    answer = api.post("/dataset-runs", data=fields)
    assert answer.status_code == 422, answer.text[:500]
    error = one(answer.text, f"#{field} ~ p.error")
    assert message in error.get_text(), error
    assert table_counts(count_rows, api.org) == before
    redrawn = api.post("/dataset-runs", data=fields, headers={"HX-Request": "true"})  # htmx swaps the form in place
    assert redrawn.status_code == 422 and is_fragment(redrawn.text) and one(redrawn.text, "form[hx-post]")
    assert table_counts(count_rows, api.org) == before


def test_a_viewer_reads_the_pages_but_cannot_start_or_retry(api, viewer_api, database, count_rows):
    version = dataset_version(api, count=2)
    crashed = start(api, version, evaluator(api, "crashes", CRASHES, attempts=1))
    config = evaluator(api, "novice", NOVICE)
    work(database)
    listing = viewer_api.get("/dataset-runs")
    assert listing.status_code == 200 and parse(listing.text).select("#start-dataset-run form") == []
    assert "A member or owner can start dataset runs." in listing.text
    page = viewer_api.get(f"/dataset-runs/{crashed['id']}")
    assert page.status_code == 200 and parse(page.text).select("form.retry-errors") == []
    assert "2 tasks ended in errors; a member or owner can retry them." in page.text
    before = table_counts(count_rows, api.org)
    token = csrf_token_from(page.text)
    started = viewer_api.post(
        "/dataset-runs",
        data={"csrf_token": token, "dataset_version_id": version["id"], "evaluator_config_id": config["id"]},
    )
    retried = viewer_api.post(f"/dataset-runs/{crashed['id']}/retry", data={"csrf_token": token})
    for refused in (started, retried):
        assert refused.status_code == 403 and "This needs the member role; you are a viewer here." in refused.text
    assert table_counts(count_rows, api.org) == before


@pytest.mark.leak
def test_another_organizations_dataset_run_answers_404_and_nothing_is_written(api, app, make_member, count_rows):
    version = dataset_version(api, count=2)
    mine = start(api, version, evaluator(api, "novice", NOVICE))
    bob = ApiClient(app.test_client(), make_member("bob@b.test", "Org B"))
    theirs = evaluator(bob, "theirs", NOVICE)
    before = table_counts(count_rows, api.org)
    for url in (f"/dataset-runs/{mine['id']}", f"/dataset-runs/{uuid.uuid4()}"):
        assert bob.get(url).status_code == 404
        assert bob.get(url, headers={"HX-Request": "true"}).status_code == 404
    assert bob.post(f"/dataset-runs/{mine['id']}/retry", {}).status_code == 404
    listing = bob.get("/dataset-runs").text
    assert mine["id"] not in listing and version["id"] not in listing and "shop-50" not in listing
    answer = bob.post("/dataset-runs", data={"dataset_version_id": version["id"], "evaluator_config_id": theirs["id"]})
    assert answer.status_code == 422 and "Choose a dataset version of this organization." in answer.text
    assert table_counts(count_rows, api.org) == before
    assert count_rows("dataset_runs", bob.org) == 0 and count_rows("evaluation_runs", bob.org) == 0


def test_a_large_dataset_runs_tasks_are_shown_a_hundred_a_page(api):
    dataset_run = start(api, dataset_version(api, count=250), evaluator(api, "novice", NOVICE, attempts=1))
    url = f"/dataset-runs/{dataset_run['id']}"
    body = api.get(url).text
    rows = task_rows(body)
    assert len(rows) == 100 and [cells(row)[0] for row in rows[:2] + rows[-1:]] == ["1", "2", "100"]
    assert texts(body, "table.dataset-run-tasks caption")[0].startswith("Tasks 1\u2013100 of 250 (page 1 of 3)")
    pager = one(body, "nav.pager")
    assert [(a.get_text(), attr(a, "href")) for a in pager.find_all("a")] == [
        ("Tasks 101\u2013200 →", f"{url}?page=2#tasks")
    ]
    last = api.get(f"{url}?page=3").text
    assert [cells(row)[0] for row in task_rows(last)][::49] == ["201", "250"]
    assert [a.get_text() for a in one(last, "nav.pager").find_all("a")] == ["← Tasks 101\u2013200"]
    assert api.get(f"{url}?page=4").status_code == 404 and api.get(f"{url}?page=0").status_code == 400
    more = one(body, "p.more-tasks")
    assert attr(one(more, "a"), "href") == f"/api/v1/dataset-runs/{dataset_run['id']}"
    assert len(api.get(attr(one(more, "a"), "href")).json["tasks"]) == 250


def test_the_pages_issue_a_fixed_number_of_statements_whatever_the_tasks(api, database):
    config = evaluator(api, "novice", NOVICE, attempts=2)
    small = start(api, dataset_version(api, count=2), config)
    work(database)

    def statements(url: str) -> int:
        with counting_queries(database) as sent:
            assert api.get(url).status_code == 200
        return len(sent)

    before = {"page": statements(f"/dataset-runs/{small['id']}"), "list": statements("/dataset-runs")}
    version = api.post(
        f"/api/v1/datasets/{new_dataset(api, 'shop-30')['id']}/versions",
        {"environmentVersionId": builtin_version(api, "admin-console-2")["id"], "count": 30},
    ).json
    large = start(api, version, config)
    start(api, version, config)
    work(database)
    after = {"page": statements(f"/dataset-runs/{large['id']}"), "list": statements("/dataset-runs")}
    print("statements per page:", after)
    assert after == before and max(after.values()) <= 8, (before, after)
