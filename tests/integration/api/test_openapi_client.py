"""A client generated from /api/v1/openapi.json calls every operation of a served app and parses every answer.

Request bodies are inline in the document, so the generator names their models <operationId><BodyModel>.
"""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from domain import task_stats
from tests.factories import make_catalog
from tests.helpers import create_token
from tests.integration.harbor_tasks.test_task_upload import HELLO, tar_gz

# The generated client reads NDJSON as bytes (its own parser knows JSON only); the document keeps application/x-ndjson.
CONFIG = (
    "post_hooks: []\ncontent_type_overrides:\n  application/x-ndjson: application/octet-stream\n"
    "  application/gzip: application/octet-stream\n"
)
LINE = {
    "externalId": "ext-1",
    "environment": {"name": "harbor-tasks", "spec": {"kind": "external", "harness": "harbor"}},
    "attempt": 1,
    "reward": 0.0,
    "failureCategory": "wrong_answer",
    "stages": {"stage_found": 1.0, "stage_fixed": 0.0},
    "trajectory": {"steps": [{"step": 1, "tool": "bash", "command": "ls", "observation": "a.txt"}]},
}


@pytest.fixture
def served(app):
    """The test app served over HTTP on a free port, in a thread."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


@pytest.fixture
def generated(served, tmp_path: Path):
    """The client openapi-python-client generates from the served document, imported as `agentforge_client`."""
    import httpx

    document = httpx.get(f"{served}/api/v1/openapi.json").raise_for_status().json()
    (tmp_path / "openapi.json").write_text(json.dumps(document))
    (tmp_path / "config.yaml").write_text(CONFIG)
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("openapi-python-client")),
            "generate",
            "--path",
            str(tmp_path / "openapi.json"),
            "--output-path",
            str(tmp_path / "agentforge_client"),
            "--meta",
            "none",
            "--config",
            str(tmp_path / "config.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr  # every operation generated
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("agentforge_client")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "agentforge_client" or m.startswith("agentforge_client.")]:
            del sys.modules[name]


@pytest.mark.slow  # runs the client generator as a process
def test_a_generated_client_calls_every_operation(served, generated, runner, make_member, database):
    owner = make_member("olga@acme.test", "Acme RL", "owner")
    catalog = make_catalog(database, owner.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=2)
    token = create_token(runner, owner.email, "Acme RL")
    models = importlib.import_module("agentforge_client.models")
    types = importlib.import_module("agentforge_client.types")
    client = generated.AuthenticatedClient(base_url=f"{served}/api/v1", token=token, raise_on_unexpected_status=True)

    def call(operation: str, **kwargs):
        return importlib.import_module(f"agentforge_client.api.default.{operation}").sync_detailed(
            client=client, **kwargs
        )

    me = call("me")
    assert me.status_code == 200 and me.parsed.email == "olga@acme.test" and me.parsed.role == "owner"

    created = call(
        "create_environment", body=models.CreateEnvironmentEnvironmentCreate(name="support", description="tickets")
    )
    assert created.status_code == 201 and created.parsed.name == "support" and created.parsed.latest_version is None
    taken = call("create_environment", body=models.CreateEnvironmentEnvironmentCreate(name="support"))
    assert taken.status_code == 409 and isinstance(taken.parsed, models.Error)

    spec = models.SupportDeskSpec.from_dict(
        {"kind": "builtin", "environment": "support-desk", "params": {"tickets": 4}}
    )
    version = call(
        "create_environment_version",
        environment_id=created.parsed.id,
        body=models.CreateEnvironmentVersionEnvironmentVersionCreate(spec=spec),
    )
    assert version.status_code == 201 and version.parsed.version == 1
    assert isinstance(version.parsed.spec, models.SupportDeskSpec) and version.parsed.spec.environment == "support-desk"
    mcp = models.McpSpec.from_dict({"kind": "mcp", "command": ["python", "-m", "srv"], "verifier": {"tool": "score"}})
    mcp_version = call(
        "create_environment_version",
        environment_id=created.parsed.id,
        body=models.CreateEnvironmentVersionEnvironmentVersionCreate(spec=mcp),
    )
    assert mcp_version.status_code == 201 and isinstance(mcp_version.parsed.spec, models.McpSpec)

    task = types.File(payload=io.BytesIO(tar_gz(HELLO)), mime_type="application/gzip")
    uploaded = call("upload_harbor_task", environment_id=created.parsed.id, body=task)
    assert uploaded.status_code == 201 and isinstance(uploaded.parsed.spec, models.HarborTaskSpec)
    assert uploaded.parsed.version == 3 and uploaded.parsed.spec.name == "hello-file"
    task.payload.seek(0)
    again = call("upload_harbor_task", environment_id=created.parsed.id, body=task)
    assert again.status_code == 200 and again.parsed.id == uploaded.parsed.id
    refused = call("upload_harbor_task", environment_id=created.parsed.id, body=types.File(payload=io.BytesIO(b"no")))
    assert refused.status_code == 400 and isinstance(refused.parsed, models.Error)

    bench = call("create_dataset", body=models.CreateDatasetDatasetCreate(name="harbor fixtures"))
    assert bench.status_code == 201
    folder = types.File(payload=io.BytesIO(tar_gz(HELLO.parent)), mime_type="application/gzip")  # tasks/hello-file
    harbor = call("upload_harbor_dataset", dataset_id=bench.parsed.id, body=folder)
    assert harbor.status_code == 201 and harbor.parsed.task_count == 1
    assert [(t.folder, t.new_environment, t.new_version) for t in harbor.parsed.tasks] == [("hello-file", True, True)]
    refused = call("upload_harbor_dataset", dataset_id=bench.parsed.id, body=types.File(payload=io.BytesIO(b"no")))
    assert refused.status_code == 400 and refused.parsed.field == "body"

    listed = call("list_environments")
    assert listed.status_code == 200
    assert any(e.name == "support" and e.latest_version == 3 for e in listed.parsed)

    agent = models.CommandAgent.from_dict({"kind": "command", "argv": ["python3", "agent.py"], "env": {"KEY": "s"}})
    config = call(
        "create_evaluator_config",
        body=models.CreateEvaluatorConfigEvaluatorConfigCreate(
            name="cmd", attempt_count=3, agent=agent, max_steps=10, timeout_s=5
        ),
    )
    assert config.status_code == 201 and config.parsed.attempt_count == 3
    assert isinstance(config.parsed.agent, models.CommandAgent) and config.parsed.agent.env["KEY"] == "***"
    bad = call(
        "create_evaluator_config",
        body=models.CreateEvaluatorConfigEvaluatorConfigCreate(
            name="bad", attempt_count=9, agent=models.ScriptedAgent.from_dict({"kind": "scripted"})
        ),
    )
    assert bad.status_code == 400 and bad.parsed.error == "invalid attemptCount"

    run = call(
        "create_evaluation_run",
        body=models.CreateEvaluationRunEvaluationRunCreate(
            environment_version_id=catalog.version_id, evaluator_config_id=catalog.config_id, attempt_count=2
        ),
    )
    assert run.status_code == 202 and run.parsed.status == "queued" and run.parsed.attempt_count == 2
    assert run.headers["Location"].endswith(f"/api/v1/evaluation-runs/{run.parsed.id}")
    got = call("get_evaluation_run", run_id=run.parsed.id)
    assert got.status_code == 200 and got.parsed.id == run.parsed.id
    reset = call(
        "reset_evaluation_run",
        run_id=run.parsed.id,
        body=models.ResetEvaluationRunEvaluationRunReset(
            mode=models.ResetEvaluationRunEvaluationRunResetMode.NEW_WORLD
        ),
    )
    assert reset.status_code == 202 and reset.parsed.reset_mode == "new_world"
    assert reset.parsed.reset_of_run_id == run.parsed.id

    body = types.File(payload=io.BytesIO((json.dumps(LINE) + "\n").encode()), mime_type="application/x-ndjson")
    imported = call("import_evaluation_runs", body=body)
    assert imported.status_code == 201 and imported.parsed.imported == 1 and len(imported.parsed.runs) == 1
    body.payload.seek(0)
    again = call("import_evaluation_runs", body=body)
    assert again.status_code == 200 and again.parsed.skipped == 1

    export = call("export_rollouts", kind=models.ExportRolloutsKind.FAILED)
    assert export.status_code == 200 and export.headers["X-Privacy-Class"] == "PRIVATE"
    assert export.headers["Content-Type"].startswith("application/x-ndjson")
    assert "attachment; filename=" in export.headers["Content-Disposition"]
    lines = [json.loads(line) for line in export.parsed.decode().splitlines()]
    assert len(lines) == 1 and lines[0]["trajectory"][0]["command"] == "ls"
    bad_kind = call("export_rollouts", after=run.parsed.id)
    assert bad_kind.status_code == 404 and bad_kind.parsed.error == "not found"

    trials = call("list_trials", status=models.ListTrialsStatus.FAILED, reward_band=models.ListTrialsRewardBand.FAILED)
    assert trials.status_code == 200 and trials.parsed.next_ is None
    assert [t.failure_category for t in trials.parsed.trials] == ["wrong_answer"]
    assert trials.parsed.trials[0].evaluation_run_id == imported.parsed.runs[0]
    staged = call("list_trials", stage_failed="stage_fixed", stage_passed="stage_found", min_reward=0.0)
    assert staged.status_code == 200 and len(staged.parsed.trials) == 1
    unknown = call("list_trials", after=run.parsed.id)
    assert unknown.status_code == 404 and unknown.parsed.error == "not found"

    rollout = call("get_rollout", rollout_id=lines[0]["rolloutId"])
    assert rollout.status_code == 200 and rollout.parsed.failure_category == "wrong_answer"
    assert rollout.headers["X-Privacy-Class"] == "PRIVATE"
    artifact = call("get_artifact", artifact_id=rollout.parsed.trajectory_artifact_id)
    assert artifact.status_code == 200 and artifact.parsed.schema_version == 1
    assert json.loads(artifact.parsed.trajectory)["steps"][0]["command"] == "ls"

    compared = call("compare", a=catalog.version_id, b=created.parsed.id)
    assert compared.status_code == 404 and compared.parsed.error == "not found"  # an environment is no side
    compared = call("compare", a=catalog.version_id, b=catalog.version_id, b_evaluator_config_id=catalog.config_id)
    assert compared.status_code == 200 and compared.parsed.a.kind == "version" and compared.parsed.a.trials == 0
    assert compared.parsed.tests.pass_at_1.method == task_stats.UNPAIRED_METHOD
    assert compared.parsed.tests.paired is False
    assert compared.parsed.a.pass_at_k["1"].value is None
    assert compared.parsed.warnings == [] and compared.parsed.tasks == [] and compared.parsed.tests.paired_tasks == 0

    label = call(
        "create_label", body=models.CreateLabelLabelCreate.from_dict({"name": "flaky-verifier", "color": "red"})
    )
    assert label.status_code == 201 and label.parsed.name == "flaky-verifier" and label.parsed.trials == 0
    twice = call("create_label", body=models.CreateLabelLabelCreate(name="FLAKY-verifier"))
    assert twice.status_code == 409 and twice.parsed.error == "name taken"
    trial_id = trials.parsed.trials[0].id
    put = call("set_trial_labels", trial_id=trial_id, body=models.TrialLabels(labels=["flaky-verifier"]))
    assert put.status_code == 200 and put.parsed.labels == ["flaky-verifier"]
    assert [label.trials for label in call("list_labels").parsed] == [1]
    reviewed = call(
        "review_trial",
        trial_id=trial_id,
        body=models.ReviewTrialTrialReviewChange.from_dict(
            {"reviewState": "excluded", "reason": "verifier crashed", "humanCategory": "wrong_customer"}
        ),
    )
    assert reviewed.status_code == 200 and reviewed.parsed.review_state == "excluded"
    assert reviewed.parsed.failure_category == "wrong_customer" and reviewed.parsed.verifier_category == "wrong_answer"
    note = call("add_trial_note", trial_id=trial_id, body=models.AddTrialNoteNoteCreate(body="look at step 1", step=1))
    assert note.status_code == 201 and note.parsed.step == 1 and note.parsed.author == "olga@acme.test"
    edited = call(
        "edit_trial_note", trial_id=trial_id, note_id=note.parsed.id, body=models.EditTrialNoteNoteEdit(body="step 1")
    )
    assert edited.status_code == 200 and edited.parsed.body == "step 1"
    detail = call("get_trial", trial_id=trial_id)
    assert detail.status_code == 200 and detail.parsed.labels == ["flaky-verifier"]
    assert [entry.action for entry in detail.parsed.audit] == [
        "note_edited",
        "note_added",
        "human_category",
        "review",
        "labels",
    ]
    assert call("delete_trial_note", trial_id=trial_id, note_id=note.parsed.id).status_code == 204
    assert call("export_rollouts", kind=models.ExportRolloutsKind.FAILED).parsed == b""  # the trial is excluded
    included = call("export_rollouts", kind=models.ExportRolloutsKind.FAILED, include_excluded=True)
    assert json.loads(included.parsed.decode())["reviewState"] == "excluded"

    document = call("openapi")
    assert document.status_code == 200 and document.parsed["openapi"] == "3.1.0"

    anonymous = generated.Client(base_url=f"{served}/api/v1", raise_on_unexpected_status=True)
    refused = importlib.import_module("agentforge_client.api.default.me").sync_detailed(client=anonymous)
    assert refused.status_code == 401 and refused.parsed.error
