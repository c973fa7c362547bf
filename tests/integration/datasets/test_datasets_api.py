"""Datasets and their immutable versions through the API: created, listed, a version from each body form, the same
tasks answering the same version and a change making a new one, every refusal naming its field with nothing written,
and another organization's ids answering 404 (as the runtime role, as every request runs)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from db.urls import runtime_role_of
from models.base import new_id
from tests.conftest import ApiClient
from tests.helpers import migrate, table_counts
from tests.integration.harbor_tasks.test_task_upload import HELLO, tar_gz, upload

SPEC = {"environment": "admin-console", "params": {"skus": 4}}


def builtin_version(api: ApiClient, name: str = "admin-console", spec: dict | None = None) -> dict:
    env = api.post("/api/v1/environments", {"name": name}).json
    made = api.post(f"/api/v1/environments/{env['id']}/versions", {"spec": spec or SPEC})
    assert made.status_code == 201, made.json
    return made.json


def harbor_version(api: ApiClient) -> dict:
    env = api.post("/api/v1/environments", {"name": "hello-file"}).json
    made = upload(api, env["id"], tar_gz(HELLO))
    assert made.status_code == 201, made.json
    return made.json


def new_dataset(api: ApiClient, name: str = "shop-50") -> dict:
    made = api.post("/api/v1/datasets", {"name": name, "description": "fifty shop tasks"})
    assert made.status_code == 201, made.json
    return made.json


def post_version(api: ApiClient, dataset: dict, body: dict):
    return api.post(f"/api/v1/datasets/{dataset['id']}/versions", body)


def test_a_dataset_is_created_listed_and_its_name_taken_once(api, count_rows):
    made = new_dataset(api)
    assert (made["name"], made["description"], made["latestVersion"], made["taskCount"]) == (
        "shop-50",
        "fifty shop tasks",
        None,
        None,
    )
    again = api.post("/api/v1/datasets", {"name": "shop-50"})
    assert again.status_code == 409 and again.json["detail"] == "a dataset named 'shop-50' already exists"
    listed = api.get("/api/v1/datasets")
    assert listed.status_code == 200 and [d["id"] for d in listed.json] == [made["id"]]
    assert count_rows("datasets", api.org) == 1


@pytest.mark.parametrize(
    ("body", "error"),
    [({}, "invalid name"), ({"name": " "}, "invalid name"), ({"name": "x" * 201}, "invalid name")],
)
def test_a_dataset_name_follows_the_environments_name_rule(api, body, error, count_rows):
    answer = api.post("/api/v1/datasets", body)
    assert answer.status_code == 400 and answer.json["error"] == error
    assert "name must be text of 1 to 200 characters" in answer.json["detail"]
    assert count_rows("datasets", api.org) == 0


def test_a_version_from_a_task_list_keeps_its_order_and_shows_each_tasks_environment(api):
    shop, desk = builtin_version(api), builtin_version(api, "support-desk", {"environment": "support-desk"})
    harbor = harbor_version(api)
    dataset = new_dataset(api)
    tasks = [
        {"environmentVersionId": desk["id"], "worldSeed": 7},
        {"environmentVersionId": harbor["id"]},
        {"environmentVersionId": shop["id"], "worldSeed": 0},
        {"environmentVersionId": shop["id"], "worldSeed": 2**31 - 1},
    ]
    made = post_version(api, dataset, {"tasks": tasks})
    assert made.status_code == 201, made.json
    assert (made.json["version"], made.json["taskCount"], made.json["datasetId"]) == (1, 4, dataset["id"])
    shown = api.get(f"/api/v1/datasets/{dataset['id']}/versions/1")
    assert shown.status_code == 200
    assert [
        (t["position"], t["environmentName"], t["version"], t["kind"], t["worldSeed"]) for t in shown.json["tasks"]
    ] == [
        (1, "support-desk", 1, "builtin", 7),
        (2, "hello-file", 1, "harbor-task", None),
        (3, "admin-console", 1, "builtin", 0),
        (4, "admin-console", 1, "builtin", 2**31 - 1),
    ]
    assert shown.json["tasksSha256"] == made.json["tasksSha256"]
    detail = api.get(f"/api/v1/datasets/{dataset['id']}").json
    assert [(v["version"], v["taskCount"]) for v in detail["versions"]] == [(1, 4)]
    assert (detail["latestVersion"], detail["taskCount"]) == (1, 4)
    assert [(d["latestVersion"], d["taskCount"]) for d in api.get("/api/v1/datasets").json] == [(1, 4)]


def test_the_same_tasks_in_any_form_are_the_same_version_and_a_change_is_a_new_one(api, count_rows):
    shop = builtin_version(api)
    dataset = new_dataset(api)
    by_count = post_version(api, dataset, {"environmentVersionId": shop["id"], "count": 3})
    by_seeds = post_version(api, dataset, {"environmentVersionId": shop["id"], "worldSeeds": [1, 2, 3]})
    by_tasks = post_version(
        api, dataset, {"tasks": [{"environmentVersionId": shop["id"], "worldSeed": s} for s in (1, 2, 3)]}
    )
    assert [r.status_code for r in (by_count, by_seeds, by_tasks)] == [201, 200, 200]
    assert by_count.json["id"] == by_seeds.json["id"] == by_tasks.json["id"]
    assert count_rows("dataset_versions", api.org) == 1 and count_rows("dataset_tasks", api.org) == 3
    reordered = post_version(api, dataset, {"environmentVersionId": shop["id"], "worldSeeds": [2, 1, 3]})
    one_more = post_version(api, dataset, {"environmentVersionId": shop["id"], "count": 4})
    assert (reordered.status_code, reordered.json["version"]) == (201, 2)
    assert (one_more.status_code, one_more.json["version"], one_more.json["taskCount"]) == (201, 3, 4)
    assert len({by_count.json["tasksSha256"], reordered.json["tasksSha256"], one_more.json["tasksSha256"]}) == 3
    seeds = [t["worldSeed"] for t in api.get(f"/api/v1/datasets/{dataset['id']}/versions/2").json["tasks"]]
    assert seeds == [2, 1, 3]
    assert count_rows("dataset_tasks", api.org) == 3 + 3 + 4


def test_a_harbor_task_version_alone_is_one_task_without_a_world_seed(api):
    harbor = harbor_version(api)
    dataset = new_dataset(api)
    made = post_version(api, dataset, {"environmentVersionId": harbor["id"]})
    assert (made.status_code, made.json["taskCount"]) == (201, 1)
    task = api.get(f"/api/v1/datasets/{dataset['id']}/versions/1").json["tasks"][0]
    assert (task["kind"], task["worldSeed"]) == ("harbor-task", None)


MISSING_VERSION = "6d1f2c3e-8b4a-4e0f-9a7d-2c5b1e0f4a99"


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("body", "status", "field", "says"),
    [
        ({"tasks": []}, 400, "tasks", "tasks must be a list of 1 to 10000 tasks, not 0 items"),
        ({}, 400, "tasks", "tasks is required"),
        ({"tasks": "shop"}, 400, "tasks", "tasks must be a list of 1 to 10000 tasks"),
        ({"environmentVersionId": "{shop}", "count": 10_001}, 400, "count", "count must be an integer from 1 to 10000"),
        ({"environmentVersionId": "{shop}", "count": 0}, 400, "count", "count must be an integer from 1 to 10000"),
        (
            {"environmentVersionId": "{shop}", "worldSeeds": list(range(10_001))},
            400,
            "worldSeeds",
            "worldSeeds must be a list of 1 to 10000 world seeds, not 10001 items",
        ),
        (
            {"tasks": [{"environmentVersionId": "{shop}", "worldSeed": s} for s in range(10_001)]},
            400,
            "tasks",
            "tasks must be a list of 1 to 10000 tasks, not 10001 items",
        ),
        (
            {
                "tasks": [
                    {"environmentVersionId": "{shop}", "worldSeed": 4},
                    {"environmentVersionId": "{shop}", "worldSeed": 4},
                ]
            },
            400,
            "tasks[1].worldSeed",
            "tasks[1].worldSeed repeats task 1",
        ),
        (
            {"tasks": [{"environmentVersionId": "{harbor}"}, {"environmentVersionId": "{harbor}"}]},
            400,
            "tasks[1].environmentVersionId",
            "tasks[1].environmentVersionId repeats task 1",
        ),
        (
            {"environmentVersionId": "{shop}", "worldSeeds": [3, 5, 3]},
            400,
            "worldSeeds[2]",
            "worldSeeds[2] repeats task 1",
        ),
        (
            {
                "tasks": [
                    {"environmentVersionId": "{shop}", "worldSeed": 1},
                    {"environmentVersionId": "{harbor}", "worldSeed": 1},
                ]
            },
            400,
            "tasks[1].worldSeed",
            "tasks[1].worldSeed must be left out: a Harbor-task version is one task by itself",
        ),
        (
            {"environmentVersionId": "{harbor}", "count": 2},
            400,
            "count",
            "count must be left out: a Harbor-task version is one task by itself",
        ),
        (
            {"tasks": [{"environmentVersionId": "{shop}"}]},
            400,
            "tasks[0].worldSeed",
            "tasks[0].worldSeed is required: a built-in or MCP version draws a world from it",
        ),
        (
            {"tasks": [{"environmentVersionId": "{shop}", "worldSeed": -1}]},
            400,
            "tasks[0].worldSeed",
            "tasks[0].worldSeed must be an integer from 0 to 2147483647, not -1",
        ),
        (
            {"environmentVersionId": "{shop}", "worldSeeds": [1, 2**31]},
            400,
            "worldSeeds[1]",
            "worldSeeds[1] must be an integer from 0 to 2147483647, not 2147483648",
        ),
        (
            {"tasks": [{"environmentVersionId": "{shop}", "worldSeed": "3"}]},
            400,
            "tasks[0].worldSeed",
            "tasks[0].worldSeed must be an integer from 0 to 2147483647, not '3'",
        ),
        (
            {"tasks": [{"environmentVersionId": "{shop}", "seed": 3}]},
            400,
            "tasks[0].seed",
            "tasks[0].seed is unknown",
        ),
        (
            {"tasks": [{"environmentVersionId": "shop", "worldSeed": 3}]},
            400,
            "tasks[0].environmentVersionId",
            "tasks[0].environmentVersionId must be a UUID",
        ),
        (
            {
                "tasks": [
                    {"environmentVersionId": "{shop}", "worldSeed": 1},
                    {"environmentVersionId": MISSING_VERSION, "worldSeed": 1},
                ]
            },
            404,
            "tasks[1].environmentVersionId",
            f"tasks[1].environmentVersionId names no environment version of this organization: {MISSING_VERSION}",
        ),
        (
            {"environmentVersionId": "{shop}", "count": 2, "worldSeeds": [1]},
            400,
            "count",
            "count cannot be given with worldSeeds",
        ),
    ],
)
def test_a_task_list_refused_names_its_field_and_writes_nothing(api, count_rows, body, status, field, says):
    ids = {"{shop}": builtin_version(api)["id"], "{harbor}": harbor_version(api)["id"]}
    dataset = new_dataset(api)
    post_version(api, dataset, {"environmentVersionId": ids["{shop}"], "count": 2})
    before = table_counts(count_rows, api.org)

    def filled(value):
        if isinstance(value, dict):
            return {k: filled(v) for k, v in value.items()}
        if isinstance(value, list):
            return [filled(v) for v in value]
        return ids.get(value, value) if isinstance(value, str) else value

    answer = post_version(api, dataset, filled(body))
    assert answer.status_code == status, answer.json
    assert answer.json["field"] == field
    assert answer.json["detail"].startswith(says), answer.json["detail"]
    assert table_counts(count_rows, api.org) == before


@pytest.mark.leak
def test_another_organizations_dataset_and_environment_versions_answer_404_and_nothing_is_written(
    api, app, make_member, count_rows
):
    theirs_version = builtin_version(api)
    theirs = new_dataset(api)
    assert post_version(api, theirs, {"environmentVersionId": theirs_version["id"], "count": 2}).status_code == 201
    bob = ApiClient(app.test_client(), make_member("bob@b.test", "Org B"))
    mine_version = builtin_version(bob)
    mine = new_dataset(bob, "mine")
    before = table_counts(count_rows, api.org)
    for url in (f"/api/v1/datasets/{theirs['id']}", f"/api/v1/datasets/{theirs['id']}/versions/1"):
        assert bob.get(url).status_code == 404
    into_theirs = post_version(bob, theirs, {"environmentVersionId": mine_version["id"], "count": 1})
    assert into_theirs.status_code == 404 and into_theirs.json["detail"] == f"no dataset {theirs['id']}"
    their_tasks = post_version(bob, mine, {"environmentVersionId": theirs_version["id"], "worldSeeds": [1]})
    assert (their_tasks.status_code, their_tasks.json["field"]) == (404, "environmentVersionId")
    mixed = {
        "tasks": [
            {"environmentVersionId": mine_version["id"], "worldSeed": 1},
            {"environmentVersionId": theirs_version["id"], "worldSeed": 1},
        ]
    }
    assert post_version(bob, mine, mixed).json["field"] == "tasks[1].environmentVersionId"
    assert [d["name"] for d in bob.get("/api/v1/datasets").json] == ["mine"]
    assert table_counts(count_rows, api.org) == before
    assert count_rows("dataset_versions", bob.org) == 0


def test_a_version_holds_a_harbor_task_once_even_written_past_the_api(api, database):
    """The unique key treats a NULL world seed as equal (NULLS NOT DISTINCT), not as a new task each time."""
    harbor = harbor_version(api)
    dataset = new_dataset(api)
    version_id = post_version(api, dataset, {"environmentVersionId": harbor["id"]}).json["id"]
    insert = text(
        "INSERT INTO dataset_tasks (organization_id, id, dataset_version_id, position, environment_version_id, "
        "world_seed) VALUES (:org, :id, :version, 2, :env, NULL)"
    )
    refused = pytest.raises(IntegrityError, match="uq_dataset_tasks_task_once_per_version")
    with refused, database.session(api.org.id) as session, session.begin():
        session.execute(insert, {"org": api.org.id, "id": new_id(), "version": version_id, "env": harbor["id"]})


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE dataset_versions SET task_count = 2",
        "DELETE FROM dataset_tasks",
        "UPDATE dataset_tasks SET world_seed = 9",
    ],
)
def test_a_dataset_version_and_its_tasks_are_immutable_even_to_the_owner_role(api, owner_engine, statement):
    shop = builtin_version(api)
    post_version(api, new_dataset(api), {"environmentVersionId": shop["id"], "count": 1})
    with pytest.raises(DBAPIError, match="rows are immutable"), owner_engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :org, true)"), {"org": str(api.org.id)})
        conn.execute(text(statement))


@pytest.mark.bad_input
@pytest.mark.parametrize("version", ["0", "2", str(2**31), "99999999999999999999999"])
def test_a_version_number_the_dataset_has_not_answers_404(api, version):
    shop = builtin_version(api)
    dataset = new_dataset(api)
    post_version(api, dataset, {"environmentVersionId": shop["id"], "count": 1})
    answer = api.get(f"/api/v1/datasets/{dataset['id']}/versions/{version}")
    assert (answer.status_code, answer.json["error"]) == (404, "not found")


def test_the_migration_goes_down_and_up_leaving_the_datasets_tables_secured(database, database_urls, owner_engine):
    tables = "('datasets', 'dataset_versions', 'dataset_tasks')"
    secured = text(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
        "has_table_privilege(:runtime, c.oid, 'UPDATE') FROM pg_class c "
        f"WHERE c.relname IN {tables} AND c.relkind = 'r' ORDER BY c.relname"
    )
    runtime = {"runtime": runtime_role_of(database_urls)}
    migrate(database_urls, database, "0039", downgrade=True)
    try:
        with owner_engine.connect() as conn:
            assert conn.execute(secured, runtime).all() == []
    finally:
        migrate(database_urls, database, "head")
    with owner_engine.connect() as conn:
        assert [tuple(row) for row in conn.execute(secured, runtime)] == [
            ("dataset_tasks", True, True, False),
            ("dataset_versions", True, True, False),
            ("datasets", True, True, True),
        ]
