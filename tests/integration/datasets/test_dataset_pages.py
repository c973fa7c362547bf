"""The datasets pages: the list with its empty state and the new-dataset form, a dataset's page that builds a version
(add "N tasks of this version" or world seeds, preview the ordered tasks with their text, save; the same tasks open
the version that holds them), a version's tasks a page at a time; every refusal in words with nothing written, in
place as an htmx fragment too, and another organization's dataset answering 404."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.conftest import ApiClient
from tests.helpers import (
    attr,
    counting_queries,
    import_ndjson,
    is_fragment,
    is_whole_page,
    line,
    ndjson,
    one,
    parse,
    rows,
    table_counts,
    texts,
)
from tests.integration.datasets.test_datasets_api import builtin_version, harbor_version, new_dataset, post_version
from worker.environments import load
from writes.demo import MCP_SPEC

HTMX = {"HX-Request": "true"}


def built_in_text(seed: int, spec: dict | None = None) -> str:
    """What the worker's environment asks a trial of this seed (the same spec builtin_version pins)."""
    return (
        load({"kind": "builtin", **(spec or {"environment": "admin-console", "params": {"skus": 4}})}).reset(seed).text
    )


def form_post(api: ApiClient, dataset: dict, **fields):
    return api.post(f"/datasets/{dataset['id']}/versions", data=fields)


def preview_texts(html: str) -> list[str]:
    return [" ".join(t.split()) for t in texts(html, ".version-preview .dataset-tasks td:last-child .task-text")]


def draft(html: str) -> str:
    return one(html, "textarea#draft").get_text()


def previewed(html: str) -> str:
    return attr(one(html, "input[name=previewed]"), "value")


def error(html: str) -> str:
    """The version form's one refusal, as its error summary says it (and the input it links to, under it)."""
    [line] = parse(html).select(".error-summary li")
    said = " ".join(line.get_text().split())
    link = line.select_one("a")
    if link is not None:
        under = one(html, f"{attr(link, 'href')}-error").get_text().removeprefix("Error:")
        assert " ".join(under.split()) == said
        assert attr(one(html, attr(link, "href")), "aria-invalid") == "true"
    return said


def test_the_datasets_page_says_what_to_do_first_then_lists_each_dataset_with_its_latest_version(api):
    empty = api.get("/datasets")
    assert empty.status_code == 200 and is_whole_page(empty.text)
    assert "Datasets" in texts(empty.text, 'nav[aria-label="Main"] a')
    assert "No datasets yet." in one(empty.text, ".empty-state").get_text()
    assert "N tasks of this version" in one(empty.text, ".empty-state").get_text()
    shop = builtin_version(api)
    dataset = new_dataset(api)
    new_dataset(api, "another")
    post_version(api, dataset, {"environmentVersionId": shop["id"], "count": 3})
    rows = [
        [" ".join(c.get_text().split()) for c in row.select("th, td")]
        for row in parse(api.get("/datasets").text).select("#datasets tbody tr")
    ]
    assert [row[:3] for row in rows] == [
        ["anotherfifty shop tasks", "no version yet", "—"],
        ["shop-50fifty shop tasks", "v1", "3"],
    ]


def test_a_dataset_is_created_from_the_form_and_its_page_opens(api, count_rows):
    made = api.post("/datasets", data={"name": "  shop-50 ", "description": "fifty shop tasks"})
    assert made.status_code == 303
    dataset_id = made.headers["Location"].rsplit("/", 1)[1]
    page = api.get(made.headers["Location"]).text
    assert "Created the dataset shop-50." in page and one(page, "h1").get_text() == "shop-50"
    assert "No versions yet." in page and "fifty shop tasks" in page
    assert [d["id"] for d in api.get("/api/v1/datasets").json] == [dataset_id]
    assert count_rows("datasets", api.org) == 1


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "Enter a name of 1 to 200 characters."),
        ("   ", "Enter a name of 1 to 200 characters."),
        ("x" * 201, "Name must be at most 200 characters."),
        ("shop-50", "A dataset named 'shop-50' already exists; choose another name."),
    ],
)
def test_a_refused_dataset_form_says_why_in_place_and_writes_nothing(api, count_rows, name, says):
    new_dataset(api)
    before = table_counts(count_rows, api.org)
    for headers in ({}, HTMX):
        refused = api.post("/datasets", data={"name": name}, headers=headers)
        assert refused.status_code == 422
        assert one(refused.text, "#dataset-name-error").get_text().removeprefix("Error:").strip() == says
        assert attr(one(refused.text, "#dataset-name"), "aria-invalid") == "true"
    assert is_fragment(refused.text) and not parse(refused.text).select('nav[aria-label="Main"]')
    assert table_counts(count_rows, api.org) == before


def test_three_tasks_of_a_version_are_added_previewed_with_their_text_and_saved(api, count_rows):
    shop = builtin_version(api)
    dataset = new_dataset(api)
    page = api.get(f"/datasets/{dataset['id']}").text
    assert "No versions yet." in page and texts(page, "#environment_version_id option") == [
        "admin-console v1 (built-in)"
    ]
    added = form_post(api, dataset, action="add", environment_version_id=shop["id"], count="3", draft="")
    assert added.status_code == 200
    assert draft(added.text) == f"{shop['id']} 1..3  # admin-console v1"
    assert attr(one(added.text, "#count"), "value") == ""  # added: ready for the next ones
    assert one(added.text, "#preview-heading").get_text() == "Preview: 3 tasks"
    assert preview_texts(added.text) == [built_in_text(seed) for seed in (1, 2, 3)]
    assert [c.get_text() for c in parse(added.text).select(".version-preview tbody td:nth-child(3)")] == ["1", "2", "3"]
    assert "Saving pins them as v1" in added.text and count_rows("dataset_versions", api.org) == 0
    saved = form_post(api, dataset, action="save", draft=draft(added.text), previewed=previewed(added.text))
    assert saved.status_code == 303 and saved.headers["Location"] == f"/datasets/{dataset['id']}/versions/1"
    version_page = api.get(saved.headers["Location"]).text
    assert "Saved v1 of shop-50: 3 tasks." in version_page
    assert [" ".join(t.split()) for t in texts(version_page, ".dataset-tasks .task-text")] == preview_texts(added.text)
    by_api = post_version(api, dataset, {"environmentVersionId": shop["id"], "count": 3})
    assert (by_api.status_code, by_api.json["version"]) == (200, 1)  # the page's tasks are the API's
    assert count_rows("dataset_tasks", api.org) == 3


def test_the_same_tasks_saved_again_open_the_version_that_holds_them_in_words(api, count_rows):
    shop = builtin_version(api)
    dataset = new_dataset(api)
    post_version(api, dataset, {"environmentVersionId": shop["id"], "worldSeeds": [4, 5]})
    preview = form_post(api, dataset, action="preview", draft=f"{shop['id']} 4, 5")
    assert "these tasks, in this order, are v1" in " ".join(one(preview.text, ".version-preview").get_text().split())
    assert one(preview.text, "button[value=save]").get_text() == "Open v1"
    before = table_counts(count_rows, api.org)
    saved = form_post(api, dataset, action="save", draft=draft(preview.text), previewed=previewed(preview.text))
    assert saved.status_code == 303 and saved.headers["Location"].endswith("/versions/1")
    assert "These 2 tasks are already v1 of shop-50: nothing new was saved." in api.get(saved.headers["Location"]).text
    assert table_counts(count_rows, api.org) == before


def test_adding_more_keeps_the_list_in_order_and_htmx_swaps_the_form_then_follows_the_save(api):
    shop = builtin_version(api)
    desk = builtin_version(api, "support-desk", {"environment": "support-desk"})
    harbor = harbor_version(api)
    env = api.post("/api/v1/environments", {"name": "shop over mcp"}).json
    mcp = api.post(f"/api/v1/environments/{env['id']}/versions", {"spec": MCP_SPEC}).json
    dataset = new_dataset(api)
    first = form_post(api, dataset, action="add", environment_version_id=shop["id"], world_seeds="9, 2..3")
    listed = draft(first.text)
    for version, more in ((desk, {"count": "2"}), (harbor, {"count": "5"}), (mcp, {"world_seeds": "7"})):
        step = api.post(
            f"/datasets/{dataset['id']}/versions",
            data={"action": "add", "environment_version_id": version["id"], "draft": listed, **more},
            headers=HTMX,
        )
        assert step.status_code == 200 and is_fragment(step.text), step.text[:300]
        assert not parse(step.text).select('nav[aria-label="Main"]') and one(step.text, "#new-version-heading")
        listed = draft(step.text)
    assert listed.splitlines() == [
        f"{shop['id']} 9, 2..3  # admin-console v1",
        f"{desk['id']} 1..2  # support-desk v1",
        f"{harbor['id']}  # hello-file v1",
        f"{mcp['id']} 7  # shop over mcp v1",
    ]
    shown = preview_texts(step.text)
    desk_spec = {"environment": "support-desk"}
    assert shown[:5] == [
        built_in_text(9),
        built_in_text(2),
        built_in_text(3),
        built_in_text(1, desk_spec),
        built_in_text(2, desk_spec),
    ]
    assert shown[5].startswith("Create a file called hello.txt")
    assert shown[6] == "Drawn by the MCP server when the task runs, world seed 7."
    saved = api.post(
        f"/datasets/{dataset['id']}/versions",
        data={"action": "save", "draft": listed, "previewed": previewed(step.text)},
        headers=HTMX,
    )
    assert saved.status_code == 204 and saved.headers["HX-Redirect"] == f"/datasets/{dataset['id']}/versions/1"
    tasks = api.get(f"/api/v1/datasets/{dataset['id']}/versions/1").json["tasks"]
    assert [(t["environmentName"], t["worldSeed"]) for t in tasks] == [
        ("admin-console", 9),
        ("admin-console", 2),
        ("admin-console", 3),
        ("support-desk", 1),
        ("support-desk", 2),
        ("hello-file", None),
        ("shop over mcp", 7),
    ]
    assert [" ".join(t["task"].split()) for t in tasks] == shown


def test_a_list_changed_since_its_preview_is_previewed_again_not_saved(api, count_rows):
    shop = builtin_version(api)
    dataset = new_dataset(api)
    preview = form_post(api, dataset, action="preview", draft=f"{shop['id']} 1..2")
    changed = form_post(api, dataset, action="save", draft=f"{shop['id']} 1..3", previewed=previewed(preview.text))
    assert changed.status_code == 200 and "nothing was saved" in changed.text
    assert one(changed.text, "#preview-heading").get_text() == "Preview: 3 tasks"
    assert count_rows("dataset_versions", api.org) == 0
    saved = form_post(api, dataset, action="save", draft=f"{shop['id']} 1..3", previewed=previewed(changed.text))
    assert saved.status_code == 303 and count_rows("dataset_tasks", api.org) == 3


MISSING = "6d1f2c3e-8b4a-4e0f-9a7d-2c5b1e0f4a99"


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (
            {"action": "add", "environment_version_id": "{harbor}", "world_seeds": "3"},
            "The tasks to add: world seed 3 must be left out: a Harbor-task version is one task by itself, with no "
            "world seed.",
        ),
        (
            {"action": "add", "environment_version_id": "{shop}"},
            "The tasks to add need N (world seeds 1..N) or world seeds.",
        ),
        (
            {"action": "add", "environment_version_id": "{shop}", "count": "2", "world_seeds": "5"},
            "N cannot be given with world seeds",
        ),
        (
            {"action": "add", "environment_version_id": "{shop}", "count": "10001"},
            "N must be a whole number from 1 to 10000.",
        ),
        (
            {"action": "add", "environment_version_id": "{shop}", "count": "x"},
            "N must be a whole number from 1 to 10000.",
        ),
        (
            {"action": "add", "environment_version_id": MISSING, "count": "2"},
            "Environment version must be chosen: one of this organization's versions.",
        ),
        (
            {"action": "add", "environment_version_id": "{shop}", "world_seeds": "1"},
            "The tasks to add: world seed 1 repeats task 1 (environment version {shop}, world seed 1); a dataset "
            "version holds each task once.",
        ),
        (
            {"action": "add", "environment_version_id": "{shop}", "count": "10000"},
            "The task list holds 10001 tasks; a dataset version holds 1 to 10000.",
        ),
        (
            {"action": "preview", "draft": ""},
            "The task list holds no task yet: add tasks of an environment version first.",
        ),
        ({"action": "save", "draft": "{shop} 1..2\n{shop} 2"}, "Line 2: world seed 2 repeats task 2"),
        ({"action": "preview", "draft": "shop 1"}, "Line 1: the environment version id must be a UUID"),
        (
            {"action": "preview", "draft": f"{MISSING} 1"},
            f"Line 1: environment version names no environment version of this organization: {MISSING}.",
        ),
        (
            {"action": "preview", "draft": "{shop} 2147483648"},
            "Line 1: world seed must be an integer from 0 to 2147483647, not '2147483648'.",
        ),
        (
            {"action": "preview", "draft": "{shop} -1"},
            "Line 1: world seed must be an integer from 0 to 2147483647, not '-1'.",
        ),
        ({"action": "preview", "draft": "{shop} 9..3"}, "Line 1: world seeds 9..3 must go up, first..last (1..50)."),
        (
            {"action": "preview", "draft": "{shop} 0..2147483647"},
            "The task list holds 2147483648 tasks; a dataset version holds 1 to 10000.",
        ),
        (
            {"action": "preview", "draft": "{shop}"},
            "Line 1: a world seed is required: a built-in or MCP version draws a world from it",
        ),
        (
            {"action": "preview", "draft": "{imported} 1"},
            "Line 1: environment version is a version of imported results",
        ),
        ({"action": "publish", "draft": "{shop} 1"}, "Choose an action: one of add, preview, save."),
    ],
)
def test_a_refused_task_list_says_why_keeps_the_list_and_writes_nothing(api, database, count_rows, fields, says):
    ids = {"{shop}": builtin_version(api)["id"], "{harbor}": harbor_version(api)["id"]}
    imported = import_ndjson(api, ndjson(line("e1", 1, 1.0)))
    assert imported.status_code in (200, 201), imported.text
    [(external,)] = rows(database, api.org.id, "SELECT id FROM environment_versions WHERE spec->>'kind' = 'external'")
    ids["{imported}"] = str(external)
    dataset = new_dataset(api)
    standing = f"{ids['{shop}']} 1"
    post_version(api, dataset, {"environmentVersionId": ids["{shop}"], "count": 1})
    before = table_counts(count_rows, api.org)

    def filled(value: str) -> str:
        for key, id_ in ids.items():
            value = value.replace(key, id_)
        return value

    sent = {key: filled(value) for key, value in fields.items()}
    sent.setdefault("draft", standing)
    refused = form_post(api, dataset, **sent)
    assert refused.status_code == 422, refused.text[:500]
    assert error(refused.text).startswith(filled(says)), error(refused.text)
    assert draft(refused.text) == sent["draft"]  # the list as it was
    assert not parse(refused.text).select(".version-preview")
    assert table_counts(count_rows, api.org) == before


def test_a_version_shows_its_tasks_a_hundred_a_page_with_their_text(api):
    shop = builtin_version(api)
    dataset = new_dataset(api)
    post_version(api, dataset, {"environmentVersionId": shop["id"], "count": 250})
    url = f"/datasets/{dataset['id']}/versions/1"
    first = api.get(url).text
    assert "250 tasks" in first and "Tasks 1\u2013100 of 250 (page 1 of 3)." in first
    cells = parse(first).select(".dataset-tasks tbody tr")
    assert len(cells) == 100 and cells[0].select("td")[2].get_text() == "1"
    assert " ".join(one(cells[99], ".task-text").get_text().split()) == built_in_text(100)
    last = api.get(f"{url}?page=3", headers=HTMX)
    assert last.status_code == 200 and is_fragment(last.text)
    rows = parse(last.text).select(".dataset-tasks tbody tr")
    assert [r.select("td")[0].get_text() for r in (rows[0], rows[-1])] == ["201", "250"]
    assert one(last.text, ".pager a").get_text() == "← Tasks 101\u2013200"
    assert api.get(f"{url}?page=4").status_code == 404
    assert api.get(f"{url}?page=0").status_code == 400


def test_a_new_version_starts_from_an_old_ones_tasks(api):
    shop = builtin_version(api)
    harbor = harbor_version(api)
    dataset = new_dataset(api)
    tasks = [{"environmentVersionId": shop["id"], "worldSeed": s} for s in (1, 2, 3, 7)]
    tasks.insert(2, {"environmentVersionId": harbor["id"]})
    post_version(api, dataset, {"tasks": tasks})
    page = api.get(f"/datasets/{dataset['id']}").text
    assert attr(one(page, "#versions tbody a[href*=from]"), "href") == f"/datasets/{dataset['id']}?from=1#new-version"
    started = api.get(f"/datasets/{dataset['id']}?from=1").text
    assert draft(started).splitlines() == [
        f"{shop['id']} 1..2  # admin-console v1",
        f"{harbor['id']}  # hello-file v1",
        f"{shop['id']} 3, 7  # admin-console v1",
    ]
    same = form_post(api, dataset, action="preview", draft=draft(started))
    assert "are v1" in same.text
    assert api.get(f"/datasets/{dataset['id']}?from=2").status_code == 404
    assert api.get(f"/datasets/{dataset['id']}?from=x").status_code == 400


def test_a_viewer_reads_the_pages_but_gets_no_form_and_403_on_every_write(api, viewer_api, count_rows):
    shop = builtin_version(api)
    dataset = new_dataset(api)
    post_version(api, dataset, {"environmentVersionId": shop["id"], "count": 2})
    before = table_counts(count_rows, api.org)
    assert not parse(viewer_api.get("/datasets").text).select("#dataset-form")
    page = viewer_api.get(f"/datasets/{dataset['id']}").text
    assert "v1" in texts(page, "#versions a") and not parse(page).select("#version-form")
    assert viewer_api.get(f"/datasets/{dataset['id']}/versions/1").status_code == 200
    assert viewer_api.post("/datasets", data={"name": "mine"}).status_code == 403
    draft_ = f"{shop['id']} 5"
    assert form_post(viewer_api, dataset, action="add", draft=draft_).status_code == 403
    assert table_counts(count_rows, api.org) == before


@pytest.mark.leak
def test_another_organizations_dataset_answers_404_on_every_page_and_nothing_is_written(
    api, app, make_member, count_rows
):
    shop = builtin_version(api)
    theirs = new_dataset(api)
    post_version(api, theirs, {"environmentVersionId": shop["id"], "count": 2})
    bob = ApiClient(app.test_client(), make_member("bob@b.test", "Org B"))
    mine = new_dataset(bob, "mine")
    before = table_counts(count_rows, api.org)
    for url in (
        f"/datasets/{theirs['id']}",
        f"/datasets/{theirs['id']}?from=1",
        f"/datasets/{theirs['id']}/versions/1",
        f"/datasets/{uuid.uuid4()}",
    ):
        assert bob.get(url).status_code == 404, url
    into_theirs = form_post(bob, theirs, action="save", draft=f"{shop['id']} 3")
    assert into_theirs.status_code == 404
    their_version = form_post(bob, mine, action="preview", draft=f"{shop['id']} 3")
    assert their_version.status_code == 422
    assert error(their_version.text) == (
        f"Line 1: environment version names no environment version of this organization: {shop['id']}."
    )
    assert "theirs" not in bob.get("/datasets").text and shop["id"] not in bob.get(f"/datasets/{mine['id']}").text
    assert table_counts(count_rows, api.org) == before and count_rows("dataset_versions", bob.org) == 0


def test_the_first_run_checklist_mentions_datasets(api):
    steps = parse(api.get("/environments").text).select(".first-steps li")
    step = next(s for s in steps if "dataset" in s.get_text().lower())
    assert attr(one(step, "a"), "href") == "/datasets" and "done" not in attr(step, "class")
    new_dataset(api)
    steps = parse(api.get("/environments").text).select(".first-steps li")
    assert "done" in attr(next(s for s in steps if "dataset" in s.get_text().lower()), "class")
    assert re.search(
        r"0 of \d done|1 of \d done", one(api.get("/environments").text, "#first-steps-heading").get_text()
    )


def test_the_pages_issue_a_fixed_number_of_statements_whatever_the_datasets_size(api, database):
    """No statement per task or version: a dataset of 3 versions up to 10,000 tasks reads like one of 1 task."""
    shop = builtin_version(api)

    def statements(dataset: dict, draft_: str) -> dict[str, int]:
        counts = {}
        for name, send in (
            ("list", lambda: api.get("/datasets")),
            ("dataset", lambda: api.get(f"/datasets/{dataset['id']}?from=1")),
            ("version", lambda: api.get(f"/datasets/{dataset['id']}/versions/1?page=1")),
            ("preview", lambda: form_post(api, dataset, action="preview", draft=draft_)),
        ):
            with counting_queries(database) as sent:
                assert send().status_code == 200
            counts[name] = len(sent)
        return counts

    small = new_dataset(api, "small")
    post_version(api, small, {"environmentVersionId": shop["id"], "count": 1})
    before = statements(small, f"{shop['id']} 1")
    large = new_dataset(api, "large")
    for count in (10_000, 300, 20):
        post_version(api, large, {"environmentVersionId": shop["id"], "count": count})
    after = statements(large, f"{shop['id']} 1..10000")
    print("statements per page:", after)
    assert after == before and max(after.values()) <= 12, after  # the dataset page holds its leaderboard (2)
