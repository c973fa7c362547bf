"""A dataset task's text (GET /api/v1/datasets/{id}/versions/{n}, `task`) is what a trial of it is asked: the text
the real worker recorded as the trial's `task` for a built-in world's seed and for a Harbor task's instruction.md,
and words for an MCP server's, which the server draws only when the task runs."""

from __future__ import annotations

import shutil

import pytest

from tests.factories import make_catalog
from tests.helpers import queue, rows, work
from tests.integration.datasets.test_datasets_api import builtin_version, new_dataset, post_version
from tests.integration.harbor_tasks.test_task_runs import run_task, trial_of
from tests.integration.harbor_tasks.test_task_upload import TASKS
from writes.demo import MCP_SPEC

SCRIPTED = {"kind": "scripted", "skill": 0.5}


def version_tasks(api, dataset: dict, number: int = 1) -> list[dict]:
    shown = api.get(f"/api/v1/datasets/{dataset['id']}/versions/{number}")
    assert shown.status_code == 200, shown.json
    return shown.json["tasks"]


@pytest.mark.slow  # the worker runs the trials
def test_a_built_in_tasks_text_is_the_task_the_worker_asked_its_trials_of_that_seed(api, database):
    shop = make_catalog(database, api.org.id, SCRIPTED, 1, params={"skus": 12, "customers": 7})
    desk_params = {"tickets": 9, "reference_prefix": "CASE"}
    desk = make_catalog(
        database, api.org.id, SCRIPTED, 1, environment="support-desk", params=desk_params, config_name="desk"
    )
    queue(database, shop, count=3)
    queue(database, desk, count=3)
    assert work(database) == 6
    recorded = rows(
        database,
        api.org.id,
        "SELECT r.environment_version_id, r.world_seed, t.task FROM evaluation_trials t "
        "JOIN evaluation_runs r ON r.id = t.evaluation_run_id ORDER BY r.created_at, r.id",
    )
    assert len(recorded) == 6 and len({row.task for row in recorded}) == 6  # six seeds drawn, six worlds
    dataset = new_dataset(api)
    tasks = [{"environmentVersionId": str(row.environment_version_id), "worldSeed": row.world_seed} for row in recorded]
    assert post_version(api, dataset, {"tasks": tasks}).status_code == 201
    assert [t["task"] for t in version_tasks(api, dataset)] == [row.task for row in recorded]


@pytest.mark.slow  # the real worker in the real sandbox
def test_a_harbor_tasks_text_is_its_instruction_md_as_the_worker_hands_it_to_the_agent(api, database, tmp_path):
    folder = tmp_path / "greet"
    shutil.copytree(TASKS / "greet", folder)
    (folder / "instruction.md").write_bytes(b"Write the greeting\r\nto /app/answer.txt.\rCaf\xe9 \xff done.\n")
    run = run_task(api, database, folder, {"kind": "oracle"})
    asked = trial_of(api, run)["task"]
    assert asked == "Write the greeting\nto /app/answer.txt.\nCaf\ufffd \ufffd done.\n"
    version_id = run["environmentVersionId"]
    dataset = new_dataset(api)
    assert post_version(api, dataset, {"environmentVersionId": version_id}).status_code == 201
    [task] = version_tasks(api, dataset)
    assert (task["kind"], task["worldSeed"], task["task"]) == ("harbor-task", None, asked)


def test_an_mcp_tasks_text_says_the_server_draws_it_when_the_task_runs(api):
    env = api.post("/api/v1/environments", {"name": "shop over mcp"}).json
    mcp = api.post(f"/api/v1/environments/{env['id']}/versions", {"spec": MCP_SPEC}).json
    shop = builtin_version(api)
    dataset = new_dataset(api)
    body = {
        "tasks": [
            {"environmentVersionId": mcp["id"], "worldSeed": 4},
            {"environmentVersionId": shop["id"], "worldSeed": 4},
        ]
    }
    assert post_version(api, dataset, body).status_code == 201
    first, second = version_tasks(api, dataset)
    assert first["task"] == "Drawn by the MCP server when the task runs, world seed 4."
    assert second["task"].startswith("Restock SKU-") and "world seed" not in second["task"]
