"""A folder of Harbor task folders becomes a dataset, through the API (a tar.gz upload) and the CLI: one environment
per task folder, named after it, holding the version its files are (the same as a single task's upload of that
folder), and one dataset version of those tasks in folder order; the same folder again makes nothing new and answers
the same version; one changed file is a new environment version and a new dataset version; a task folder named like
an environment of another kind is refused naming it, with nothing written."""

from __future__ import annotations

import io
import shutil
import tarfile
import threading
from pathlib import Path

import pytest

from tests.conftest import ApiClient
from tests.helpers import table_counts
from tests.integration.harbor_tasks.test_task_upload import HELLO, TASKS, tar_gz, upload

FOLDERS = ["greet", "hello-file", "hidden", "partial", "run-fails", "slow-verifier"]  # sorted, as Harbor lists them


def benchmark(tmp_path: Path, name: str = "bench") -> Path:
    """A folder of the repository's task fixtures: tests/fixtures/harbor_tasks/* and Harbor's own hello-file."""
    folder = tmp_path / name
    for task in [*sorted(TASKS.iterdir()), HELLO]:
        shutil.copytree(task, folder / task.name, symlinks=True)
    return folder


def contents(folder: Path) -> bytes:
    """`folder`'s contents as `tar -czf - -C folder .` makes them (entries under ./, no folder of its own)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        archive.add(folder, arcname=".")
    return out.getvalue()


def new_dataset(api: ApiClient, name: str = "fixtures") -> dict:
    made = api.post("/api/v1/datasets", {"name": name})
    assert made.status_code == 201, made.json
    return made.json


def upload_dataset(api: ApiClient, dataset_id: str, body: bytes):
    return api.post(
        f"/api/v1/datasets/{dataset_id}/versions/harbor", data=body, headers={"Content-Type": "application/gzip"}
    )


def made(answer) -> list[tuple[str, int, bool, bool]]:
    """Each task folder of an upload's answer: its folder, version number, and whether the environment and the
    version are new."""
    return [(t["folder"], t["version"], t["newEnvironment"], t["newVersion"]) for t in answer.json["tasks"]]


def test_a_folder_of_task_folders_becomes_environments_and_a_dataset_version(api, tmp_path, count_rows):
    folder = benchmark(tmp_path)
    dataset = new_dataset(api)
    first = upload_dataset(api, dataset["id"], tar_gz(folder))
    assert first.status_code == 201, first.json
    assert (first.json["version"], first.json["taskCount"], first.json["datasetId"]) == (1, 6, dataset["id"])
    assert made(first) == [(name, 1, True, True) for name in FOLDERS]
    environments = {e["name"]: e for e in api.get("/api/v1/environments").json}
    assert sorted(environments) == FOLDERS and all(e["latestVersion"] == 1 for e in environments.values())
    shown = api.get(f"/api/v1/datasets/{dataset['id']}/versions/1").json
    assert [(t["position"], t["environmentName"], t["version"], t["kind"], t["worldSeed"]) for t in shown["tasks"]] == [
        (i, name, 1, "harbor-task", None) for i, name in enumerate(FOLDERS, start=1)
    ]
    assert [t["environmentVersionId"] for t in shown["tasks"]] == [
        t["environmentVersionId"] for t in first.json["tasks"]
    ]
    # Each version is the one the single-task upload of that folder finds: the same files, the same version.
    for task in first.json["tasks"]:
        alone = HELLO if task["folder"] == "hello-file" else TASKS / task["folder"]
        single = upload(api, task["environmentId"], tar_gz(alone))
        assert (single.status_code, single.json["id"]) == (200, task["environmentVersionId"]), task["folder"]
    counts = table_counts(count_rows, api.org.id)
    assert counts["environment_versions"][0] == counts["artifacts"][0] == 6
    assert counts["dataset_versions"][0] == 1 and counts["dataset_tasks"][0] == 6

    # The same folder again, archived the other way (its contents, other times): the same version, nothing new.
    for path in folder.rglob("*"):
        path.touch()
    again = upload_dataset(api, dataset["id"], contents(folder))
    assert again.status_code == 200, again.json
    assert again.json["id"] == first.json["id"] and again.json["tasksSha256"] == first.json["tasksSha256"]
    assert made(again) == [(name, 1, False, False) for name in FOLDERS]
    assert table_counts(count_rows, api.org.id) == counts


def test_one_changed_file_is_a_new_environment_version_and_a_new_dataset_version(api, tmp_path, count_rows):
    folder = benchmark(tmp_path)
    dataset = new_dataset(api)
    first = upload_dataset(api, dataset["id"], tar_gz(folder))
    before = table_counts(count_rows, api.org.id)
    instruction = folder / "partial" / "instruction.md"
    instruction.write_text(instruction.read_text() + "\nOne more line.\n")
    second = upload_dataset(api, dataset["id"], tar_gz(folder))
    assert second.status_code == 201, second.json
    assert second.json["version"] == 2 and second.json["tasksSha256"] != first.json["tasksSha256"]
    assert made(second) == [(name, 2 if name == "partial" else 1, False, name == "partial") for name in FOLDERS]
    after = table_counts(count_rows, api.org.id)
    assert after["environments"] == before["environments"]
    assert after["environment_versions"][0] == before["environment_versions"][0] + 1
    assert after["artifacts"][0] == before["artifacts"][0] + 1
    assert after["dataset_versions"][0] == 2 and after["dataset_tasks"][0] == 12
    tasks = api.get(f"/api/v1/datasets/{dataset['id']}/versions/2").json["tasks"]
    assert [(t["environmentName"], t["version"]) for t in tasks] == [(n, 2 if n == "partial" else 1) for n in FOLDERS]
    # Back to the first files: the first versions, and the first dataset version.
    instruction.write_text(instruction.read_text().removesuffix("\nOne more line.\n"))
    back = upload_dataset(api, dataset["id"], tar_gz(folder))
    assert (back.status_code, back.json["id"]) == (200, first.json["id"])


def test_an_environment_of_a_task_folders_name_is_used_when_it_holds_harbor_tasks_or_nothing(api, tmp_path):
    empty = api.post("/api/v1/environments", {"name": "greet"}).json
    hello = api.post("/api/v1/environments", {"name": "hello-file"}).json
    single = upload(api, hello["id"], tar_gz(HELLO))
    answer = upload_dataset(api, new_dataset(api)["id"], tar_gz(benchmark(tmp_path)))
    assert answer.status_code == 201, answer.json
    tasks = {t["folder"]: t for t in answer.json["tasks"]}
    assert (tasks["greet"]["environmentId"], tasks["greet"]["newEnvironment"]) == (empty["id"], False)
    assert tasks["hello-file"]["environmentVersionId"] == single.json["id"]
    assert (tasks["hello-file"]["newEnvironment"], tasks["hello-file"]["newVersion"]) == (False, False)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("spec", "holds"),
    [
        ({"environment": "admin-console"}, "built-in versions"),
        ({"kind": "mcp", "command": ["python", "-m", "srv"], "verifier": {"tool": "score"}}, "MCP versions"),
        ({"kind": "external", "harness": "harbor"}, "versions of imported results"),
    ],
    ids=["built-in", "mcp", "imported"],
)
def test_a_task_folder_named_like_an_environment_of_another_kind_is_refused_naming_it(
    api, runner, tmp_path, count_rows, spec, holds
):
    other = api.post("/api/v1/environments", {"name": "partial"}).json
    assert api.post(f"/api/v1/environments/{other['id']}/versions", {"spec": spec}).status_code == 201
    folder = benchmark(tmp_path)
    dataset = new_dataset(api)
    before = table_counts(count_rows, api.org.id)
    refused = upload_dataset(api, dataset["id"], tar_gz(folder))
    assert refused.status_code == 409, refused.json
    assert (refused.json["error"], refused.json["field"]) == ("name taken", "partial")
    assert refused.json["detail"] == (
        f"partial names the environment 'partial', which holds {holds}, not Harbor tasks: rename the task folder or "
        "that environment"
    )
    assert table_counts(count_rows, api.org.id) == before
    result = runner.invoke(args=["import-harbor-dataset", str(folder), "--org", api.org.name, "--dataset", "cli"])
    assert result.exit_code == 1 and result.output == f"Error: {refused.json['detail']}\n"
    assert table_counts(count_rows, api.org.id) == before


def test_the_cli_imports_a_folder_of_task_folders_once(api, runner, tmp_path, count_rows):
    folder = benchmark(tmp_path)

    def run(dataset: str = "terminal-fixtures"):
        result = runner.invoke(args=["import-harbor-dataset", str(folder), "--org", api.org.name, "--dataset", dataset])
        assert result.exit_code == 0, result.output
        return result

    first = run()
    assert first.stdout.splitlines() == [
        *(f"{name}: {name} version 1 (a new environment) is new." for name in FOLDERS),
        "Dataset terminal-fixtures version 1 (6 tasks) is new.",
    ]
    assert "greet: not honoured without a container runtime: line 7: USER nobody (needs a container runtime)" in (
        first.stderr.splitlines()
    )
    datasets = api.get("/api/v1/datasets").json
    assert [(d["name"], d["latestVersion"], d["taskCount"]) for d in datasets] == [("terminal-fixtures", 1, 6)]
    tasks = api.get(f"/api/v1/datasets/{datasets[0]['id']}/versions/1").json["tasks"]
    assert [(t["environmentName"], t["kind"]) for t in tasks] == [(name, "harbor-task") for name in FOLDERS]
    counts = table_counts(count_rows, api.org.id)

    again = run()
    assert again.stdout.splitlines() == [
        *(f"{name}: {name} version 1 was already there: the same files." for name in FOLDERS),
        "Dataset terminal-fixtures version 1 (6 tasks) was already there: the same tasks.",
    ]
    assert table_counts(count_rows, api.org.id) == counts

    (folder / "greet" / "environment" / "name.txt").write_text("someone else\n")
    changed = run()
    assert "greet: greet version 2 is new." in changed.stdout.splitlines()
    assert "hidden: hidden version 1 was already there: the same files." in changed.stdout.splitlines()
    assert changed.stdout.splitlines()[-1] == "Dataset terminal-fixtures version 2 (6 tasks) is new."
    # The API's upload of the same folder finds what the CLI made.
    answer = upload_dataset(api, datasets[0]["id"], tar_gz(folder))
    assert (answer.status_code, answer.json["version"]) == (200, 2)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("name", "says"),
    [("", "--dataset must be text of 1 to 200 characters"), ("x" * 201, "--dataset must be text of 1 to 200")],
    ids=["empty", "201 characters"],
)
def test_the_cli_refuses_a_dataset_name_the_api_refuses(api, runner, tmp_path, count_rows, name, says):
    folder = benchmark(tmp_path)
    before = table_counts(count_rows, api.org.id)
    result = runner.invoke(args=["import-harbor-dataset", str(folder), "--org", api.org.name, "--dataset", name])
    assert result.exit_code == 1 and result.output.startswith(f"Error: {says}"), result.output
    assert len(result.output.splitlines()) == 1
    assert table_counts(count_rows, api.org.id) == before


@pytest.mark.leak
def test_another_organizations_dataset_is_not_found_and_nothing_is_written(
    app, api, tmp_path, make_member, make_org, count_rows, viewer_api
):
    dataset = new_dataset(api)
    body = tar_gz(benchmark(tmp_path))
    outsider = ApiClient(app.test_client(), make_member("eve@globex.test", make_org("Globex"), "owner"))
    mine, theirs = table_counts(count_rows, api.org.id), table_counts(count_rows, outsider.org.id)
    refused = upload_dataset(outsider, dataset["id"], body)
    assert refused.status_code == 404 and refused.json == {
        "error": "not found",
        "detail": f"no dataset {dataset['id']}",
    }
    assert upload_dataset(viewer_api, dataset["id"], body).status_code == 403
    assert table_counts(count_rows, api.org.id) == mine
    assert table_counts(count_rows, outsider.org.id) == theirs


def test_two_uploads_of_one_folder_at_once_make_one_set_of_environments(app, api, tmp_path, count_rows):
    body = tar_gz(benchmark(tmp_path))
    dataset = new_dataset(api)
    clients = [api, ApiClient(app.test_client(), api.member)]
    start = threading.Barrier(2)
    answers: list[tuple[int, str]] = []

    def send(client: ApiClient) -> None:
        start.wait()
        answer = upload_dataset(client, dataset["id"], body)
        answers.append((answer.status_code, answer.json.get("id") or answer.get_data(as_text=True)[:300]))

    threads = [threading.Thread(target=send, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(status for status, _ in answers) == [200, 201], answers
    assert answers[0][1] == answers[1][1]  # the same dataset version
    assert count_rows("environments", api.org) == 6 and count_rows("environment_versions", api.org) == 6


@pytest.mark.slow  # sandboxed programs, the worker
def test_the_oracle_runs_a_harbor_dataset_of_the_fixtures_and_a_retry_runs_only_the_task_that_errored(
    api, database, tmp_path
):
    from tests.helpers import work

    dataset = new_dataset(api)
    version = upload_dataset(api, dataset["id"], tar_gz(benchmark(tmp_path)))
    assert version.status_code == 201, version.json
    oracle = api.post(
        "/api/v1/evaluator-configs", {"name": "oracle", "attemptCount": 1, "timeoutS": 60, "agent": {"kind": "oracle"}}
    ).json
    started = api.post(
        "/api/v1/dataset-runs", {"datasetVersionId": version.json["id"], "evaluatorConfigId": oracle["id"]}
    )
    assert started.status_code == 202, started.json
    assert work(database) == 6
    run = api.get(f"/api/v1/dataset-runs/{started.json['id']}").json
    assert run["status"] == "completed", run
    by_folder = {t["environmentName"]: (t["status"], t["successes"], t["errors"], t["worldSeed"]) for t in run["tasks"]}
    assert by_folder == {
        "greet": ("completed", 1, 0, None),
        "hello-file": ("completed", 1, 0, None),
        "hidden": ("completed", 1, 0, None),
        "partial": ("completed", 1, 0, None),
        "run-fails": ("completed", 0, 1, None),  # its Dockerfile's RUN fails: an environment error, unscored
        "slow-verifier": ("completed", 0, 0, None),  # the verifier's timeout: a scored failure (reward 0)
    }
    assert run["passAtK"]["1"]["value"] == pytest.approx(4 / 6) and run["progress"]["tasksWithErrors"] == 1
    assert run["failureCategories"] == {"environment_error": 1, "timeout": 1}
    hello = next(t for t in run["tasks"] if t["environmentName"] == "hello-file")
    assert hello["task"] == (HELLO / "instruction.md").read_text().replace("\r\n", "\n")[:300]

    retried = api.post(f"/api/v1/dataset-runs/{started.json['id']}/retry", {})
    assert retried.status_code == 202 and retried.json["retried"] == 1, retried.json
    queued = [t["environmentName"] for t in retried.json["datasetRun"]["tasks"] if t["status"] == "queued"]
    assert queued == ["run-fails"]
