"""PRIVATE rollout export: kinds, lines, preference pairs, ATIF/TRL, cursors, headers, isolation."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from atif import Trajectory
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from domain.outcome import TrialOutcome
from domain.vocabulary import TrialStatus
from tests.factories import make_catalog, record_rewards, typed_steps
from tests.paths import TESTS

STEPS = [
    {"step": 1, "tool": "list_inventory", "command": "list_inventory", "observation": "SKU-1042  USB-C cable  stock=3"},
    {
        "step": 2,
        "tool": "restock",
        "command": 'restock {"sku": "SKU-1042", "quantity": 4}',
        "observation": "restocked SKU-1042: stock 3 -> 7",
    },
]
STAGES = {"stage_inventory": 1.0, "stage_order": 0.0, "stage_checkout": 0.0}


def outcome(reward, steps=STEPS, category="wrong_quantity") -> TrialOutcome:
    status: TrialStatus = "error" if reward is None else "succeeded" if reward == 1 else "failed"
    return TrialOutcome(
        status=status,
        reward=reward,
        failure_category=None if reward == 1 else category,
        stages=STAGES,
        steps=typed_steps(steps),
        log="opened admin-console",
        started_at=datetime.now(UTC),
        task="Restock SKU-1042 by 4 units, then place an order.",
    )


def record_run(database, catalog, rewards, steps_for=lambda reward: STEPS):
    """Queue a run on the catalog and record one trial per reward (a NULL reward still gets a rollout)."""
    return record_rewards(database, catalog, rewards, lambda reward: outcome(reward, steps_for(reward)))


@pytest.fixture
def v1(database, viewer):
    """Version with rewards null, 0, 0.15, 0.5, 0.999, 1; the 0.5 trial has no steps."""
    catalog = make_catalog(database, viewer.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=6)
    run_id, ids = record_run(
        database, catalog, [None, 0.0, 0.15, 0.5, 0.999, 1.0], steps_for=lambda reward: [] if reward == 0.5 else STEPS
    )
    return catalog, run_id, dict(zip([None, 0.0, 0.15, 0.5, 0.999, 1.0], ids, strict=True))


@pytest.fixture
def logged_in(client, auth, viewer):
    auth.login(viewer.email)
    return client


def lines(response) -> list[dict]:
    assert response.status_code == 200, response.data[:300]
    body = response.get_data(as_text=True)
    assert body == "" or body.endswith("\n")
    return [json.loads(line) for line in body.splitlines()]


def export(client, **params):
    return client.get("/api/v1/rollouts", query_string=params)


@pytest.mark.parametrize(
    ("kind", "rewards"),
    [
        ("all", {None, 0.0, 0.15, 0.5, 0.999, 1.0}),
        ("successful", {1.0}),
        ("failed", {0.0, 0.15, 0.5, 0.999}),
        ("recovery", {0.15, 0.5, 0.999}),
    ],
)
def test_each_kind_holds_exactly_the_right_rollouts(logged_in, v1, kind, rewards):
    catalog, _, ids = v1
    got = lines(export(logged_in, kind=kind, environmentVersionId=catalog.version_id))
    order = lambda reward: -1 if reward is None else reward  # noqa: E731
    assert sorted((line["reward"] for line in got), key=order) == sorted(rewards, key=order)
    assert {line["rolloutId"] for line in got} == {str(ids[r]) for r in rewards}


def test_missing_kind_means_all(logged_in, v1):
    assert len(lines(export(logged_in))) == 6


def test_rollout_lines_follow_the_spec_shape(logged_in, v1):
    catalog, run_id, ids = v1
    line = next(item for item in lines(export(logged_in, kind="failed")) if item["reward"] == 0.15)
    assert list(line)[:4] == ["schemaVersion", "privacyClass", "format", "rolloutId"]
    assert line["schemaVersion"] == 1 and line["privacyClass"] == "PRIVATE" and line["format"] == "atif-shaped"
    assert line["rolloutId"] == str(ids[0.15]) and line["seed"] == 3 and line["evaluationRunId"] == str(run_id)
    assert line["environmentVersionId"] == str(catalog.version_id) and line["trialNumber"] == 3
    assert line["failureCategory"] == "wrong_quantity" and line["stages"] == STAGES
    assert line["trajectory"] == STEPS


@pytest.mark.fault
def test_a_nul_printed_by_a_tool_or_agent_is_recorded_and_exported_as_a_replacement_character(
    logged_in, database, viewer
):
    catalog = make_catalog(database, viewer.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=1)
    hostile = [{"step": 1, "tool": "echo", "command": 'echo {"text": "a\u0000b"}', "observation": "a\x00b"}]
    hostile[0] |= {"source": "agent", "toolCalls": [{"id": "c", "name": "echo", "arguments": {"te\x00xt": "a\x00b"}}]}
    record_run(database, catalog, [0.0], steps_for=lambda reward: hostile)
    [line] = lines(export(logged_in, kind="failed"))
    assert line["trajectory"][0]["observation"] == "a\ufffdb"
    assert line["trajectory"][0]["toolCalls"][0]["arguments"] == {"te\ufffdxt": "a\ufffdb"}


def test_every_character_an_observation_can_hold_comes_back_exactly(logged_in, database, viewer):
    tricky = "quote \" comma , backslash \\ tab \t newline \n cr \r \x01\x02\x1f é 中 🙂 \\x02 E'\\x01'"
    catalog = make_catalog(database, viewer.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=1)
    record_run(database, catalog, [0.0], steps_for=lambda reward: [{**STEPS[0], "observation": tricky}])
    body = export(logged_in, kind="failed").get_data()
    assert body.count(b"\n") == 1 and body.endswith(b"\n")  # one line, raw newlines escaped inside it
    [line] = lines(export(logged_in, kind="failed"))
    assert line["trajectory"][0]["observation"] == tricky


def test_a_rollout_without_steps_has_no_trajectory_or_format(logged_in, v1):
    line = next(item for item in lines(export(logged_in, kind="recovery")) if item["reward"] == 0.5)
    assert "trajectory" not in line and "format" not in line
    assert line["privacyClass"] == "PRIVATE" and line["stages"] == STAGES


@pytest.mark.parametrize("kind", ["all", "successful", "failed", "recovery", "preference"])
def test_headers_and_filenames(logged_in, v1, kind):
    response = export(logged_in, kind=kind)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/x-ndjson"
    name = "agentforge-preferences.jsonl" if kind == "preference" else f"agentforge-rollouts-{kind}.jsonl"
    assert response.headers["Content-Disposition"] == f"attachment; filename={name}"
    assert response.headers["X-Privacy-Class"] == "PRIVATE"
    assert response.headers["Cache-Control"] == "no-store"


def test_export_requires_a_session(client, v1):
    response = export(client, kind="failed")
    assert response.status_code == 401 and response.json["error"] == "authentication required"


@pytest.mark.bad_input
def test_bad_kind_answers_400_with_the_valid_kinds(logged_in, v1):
    response = export(logged_in, kind="best")
    assert response.status_code == 400
    assert response.json["error"] == "invalid kind"
    assert response.json["valid"] == ["all", "successful", "failed", "recovery", "preference"]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"format": "csv"}, "invalid format"),
        ({"environmentId": "nope"}, "invalid environmentId"),
        ({"environmentVersionId": "12"}, "invalid environmentVersionId"),
        ({"evaluationRunId": "x" * 40}, "invalid evaluationRunId"),
        ({"after": "not-an-id"}, "invalid after"),
    ],
)
@pytest.mark.bad_input
def test_bad_parameters_answer_400(logged_in, v1, params, error):
    response = export(logged_in, **params)
    assert response.status_code == 400 and response.json["error"] == error


@pytest.mark.bad_input
def test_an_unknown_cursor_answers_404(logged_in, v1):
    missing = uuid.uuid4()
    response = export(logged_in, kind="failed", after=missing)
    assert response.status_code == 404 and str(missing) in response.json["detail"]


def test_filters_narrow_by_environment_version_and_run(logged_in, database, v1, viewer):
    catalog, _, _ = v1
    other = make_catalog(
        database, viewer.org.id, {"kind": "scripted"}, attempt_count=2, environment="support-desk", config_name="second"
    )
    other_run, _ = record_run(database, other, [0.0, 1.0])
    assert len(lines(export(logged_in, environmentId=catalog.environment_id))) == 6
    assert len(lines(export(logged_in, environmentId=other.environment_id))) == 2
    assert len(lines(export(logged_in, evaluationRunId=other_run, kind="failed"))) == 1
    assert lines(export(logged_in, evaluationRunId=uuid.uuid4())) == []


def test_all_is_capped_at_1000_newest_first(logged_in, database, v1):
    catalog, run_id, _ = v1
    with database.session(catalog.org_id) as session, session.begin():
        session.execute(
            text("""
            INSERT INTO evaluation_trials (organization_id, id, evaluation_run_id, environment_version_id,
                                           trial_number, seed, status, reward, metrics, log_excerpt, task)
            SELECT :org, gen_random_uuid(), :run, :version, 100 + n, n, 'failed', 0.25, '{}', '', ''
            FROM generate_series(1, 1000) n"""),
            {"org": catalog.org_id, "run": run_id, "version": catalog.version_id},
        )
        session.execute(
            text("""
            INSERT INTO rollouts (organization_id, id, environment_version_id, evaluation_run_id, evaluation_trial_id,
                                  seed, reward)
            SELECT :org, gen_random_uuid(), :version, :run, t.id, t.seed, 0.25
            FROM evaluation_trials t WHERE t.trial_number > 100 ORDER BY t.trial_number"""),
            {"org": catalog.org_id, "run": run_id, "version": catalog.version_id},
        )
    response = export(logged_in, kind="all")
    got = lines(response)
    assert len(got) == 1000
    assert got[0]["trialNumber"] == 1100 and got[-1]["trialNumber"] == 101  # newest first
    assert response.headers["X-Next-Cursor"] == got[0]["rolloutId"]
    assert len(lines(export(logged_in, kind="failed"))) == 1004  # uncapped


def test_incremental_pulls_return_each_rollout_once(logged_in, database, v1):
    catalog, _, _ = v1
    first = export(logged_in, kind="failed")
    seen = [line["rolloutId"] for line in lines(first)]
    cursor = first.headers["X-Next-Cursor"]
    assert cursor == seen[-1]  # oldest first: the last line names the cursor
    empty = export(logged_in, kind="failed", after=cursor)
    assert lines(empty) == [] and empty.headers["X-Next-Cursor"] == cursor
    record_run(database, catalog, [0.2, 1.0, 0.3])
    more = export(logged_in, kind="failed", after=cursor)
    new = [line["reward"] for line in lines(more)]
    assert new == [0.2, 0.3]
    assert more.headers["X-Next-Cursor"] == lines(more)[-1]["rolloutId"]
    assert not set(seen) & {line["rolloutId"] for line in lines(more)}


def test_preference_pairs_per_version_with_ties_broken_by_order(logged_in, database, v1, viewer):
    catalog, _, ids = v1
    tied = make_catalog(database, viewer.org.id, {"kind": "scripted"}, attempt_count=2, config_name="tied")
    record_run(database, tied, [0.5, 0.5])
    ties = make_catalog(database, viewer.org.id, {"kind": "scripted"}, attempt_count=4, config_name="ties")
    _, tie_ids = record_run(database, ties, [1.0, 0.0, 1.0, 0.0])
    pairs = {line["environmentVersionId"]: line for line in lines(export(logged_in, kind="preference"))}
    assert set(pairs) == {str(catalog.version_id), str(ties.version_id)}  # none for the all-tied version
    assert pairs[str(catalog.version_id)] == {
        "schemaVersion": 1,
        "privacyClass": "PRIVATE",
        "environmentVersionId": str(catalog.version_id),
        "preferred": {"rolloutId": str(ids[1.0]), "reward": 1.0},
        "rejected": {"rolloutId": str(ids[0.0]), "reward": 0.0},
    }
    assert pairs[str(ties.version_id)]["preferred"]["rolloutId"] == str(tie_ids[2])  # latest of the best
    assert pairs[str(ties.version_id)]["rejected"]["rolloutId"] == str(tie_ids[1])  # earliest of the worst


def test_format_atif_lines_are_valid_atif_trajectories(logged_in, v1):
    response = export(logged_in, kind="failed", format="atif")
    assert response.headers["Content-Disposition"] == "attachment; filename=agentforge-rollouts-failed.atif.jsonl"
    documents = lines(response)
    assert len(documents) == 4
    for document in documents:
        trajectory = Trajectory.model_validate(document)
        assert trajectory.schema_version == "ATIF-v1.7"
        assert trajectory.steps[0].source == "user" and "Restock SKU-1042" in trajectory.steps[0].message
        assert document["extra"]["privacyClass"] == "PRIVATE"
    with_steps = next(d for d in documents if d["extra"]["reward"] == 0.15)
    call = with_steps["steps"][2]
    assert call["tool_calls"][0]["function_name"] == "restock"
    assert call["tool_calls"][0]["arguments"] == {"sku": "SKU-1042", "quantity": 4}
    assert call["observation"]["results"][0]["source_call_id"] == call["tool_calls"][0]["tool_call_id"]
    assert with_steps["extra"]["stages"] == STAGES


def test_the_reference_atif_fixture_validates():
    """The ATIF v1.7 example from the spec's fixtures (copied into tests/fixtures) passes the same models."""
    fixture = TESTS / "fixtures" / "atif-v1.7-example.json"
    Trajectory.model_validate(json.loads(fixture.read_text()))


def test_format_trl_gives_prompt_chosen_rejected(logged_in, v1):
    response = export(logged_in, kind="preference", format="trl")
    assert response.headers["Content-Disposition"] == "attachment; filename=agentforge-preferences.trl.jsonl"
    (pair,) = lines(response)  # one task on the version: its 1.0 versus its 0.0
    assert set(pair) == {"prompt", "chosen", "rejected", "tools"}
    assert pair["prompt"] == [{"role": "user", "content": "Restock SKU-1042 by 4 units, then place an order."}]
    call = {"id": "call_1", "type": "function", "function": {"name": "list_inventory", "arguments": {}}}
    assert pair["chosen"][0] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert pair["chosen"][1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "list_inventory",
        "content": "SKU-1042  USB-C cable  stock=3",
    }
    assert pair["chosen"][2]["tool_calls"][0]["function"]["arguments"] == {"sku": "SKU-1042", "quantity": 4}
    assert pair["chosen"][-1]["role"] == pair["rejected"][-1]["role"] == "assistant"


def test_single_rollout_and_its_artifact(logged_in, v1):
    catalog, run_id, ids = v1
    rollout = logged_in.get(f"/api/v1/rollouts/{ids[0.15]}")
    assert rollout.status_code == 200 and rollout.headers["X-Privacy-Class"] == "PRIVATE"
    body = rollout.json
    assert {k: body[k] for k in ("id", "seed", "reward", "environmentVersionId", "evaluationRunId", "stages")} == {
        "id": str(ids[0.15]),
        "seed": 3,
        "reward": 0.15,
        "environmentVersionId": str(catalog.version_id),
        "evaluationRunId": str(run_id),
        "stages": STAGES,
    }
    assert body["trialNumber"] == 3 and body["failureCategory"] == "wrong_quantity"
    artifact = logged_in.get(f"/api/v1/artifacts/{body['trajectoryArtifactId']}")
    assert artifact.status_code == 200
    assert artifact.headers["Content-Disposition"] == "attachment; filename=trial-3-trajectory.json"
    document = artifact.json
    assert document["schemaVersion"] == 1 and json.loads(document["trajectory"]) == {"steps": STEPS}


def test_only_stage_keys_appear_in_stages(logged_in, database, v1):
    catalog, _, ids = v1
    # Metrics hold stage_* values and the verifier's explanations, and nothing else (a CHECK, migration 0036).
    with pytest.raises(IntegrityError, match="metrics_are_stages"), database.session(catalog.org_id) as session:
        session.execute(text("""UPDATE evaluation_trials SET metrics = metrics || '{"steps_taken": 5}'"""))
        session.commit()
    with database.session(catalog.org_id) as session, session.begin():
        explained = """'{"explanations": {"stage_found": "found it"}}'"""
        session.execute(text(f"UPDATE evaluation_trials SET metrics = metrics || {explained}"))
    assert logged_in.get(f"/api/v1/rollouts/{ids[0.15]}").json["stages"] == STAGES
    assert all(line["stages"] == STAGES for line in lines(export(logged_in, kind="failed")))
    atif = lines(export(logged_in, kind="failed", format="atif"))
    assert all(document["extra"]["stages"] == STAGES for document in atif)


@pytest.mark.leak
def test_another_org_sees_none_of_it(client, auth, database, v1, make_member):
    _, run_id, ids = v1
    outsider = make_member("eve@globex.test", "Globex Research", "owner")
    theirs = make_catalog(database, outsider.org.id, {"kind": "scripted"}, attempt_count=1)
    record_run(database, theirs, [0.4])
    auth.login(outsider.email)
    for kind in ("all", "successful", "failed", "recovery", "preference"):
        body = export(client, kind=kind).get_data(as_text=True)
        assert all(str(i) not in body for i in ids.values()) and str(run_id) not in body
    assert [line["reward"] for line in lines(export(client, kind="all"))] == [0.4]
    assert lines(export(client, evaluationRunId=run_id)) == []
    assert client.get(f"/api/v1/rollouts/{ids[0.15]}").status_code == 404
    with database.session(v1[0].org_id) as session:
        artifact_id = session.execute(text("SELECT id FROM artifacts LIMIT 1")).scalar()
    response = client.get(f"/api/v1/artifacts/{artifact_id}")
    assert response.status_code == 404 and response.json["error"] == "not found"


@pytest.mark.bad_input
def test_malformed_ids_in_paths_answer_404_json(logged_in):
    for url in ("/api/v1/rollouts/not-a-uuid", "/api/v1/artifacts/123", f"/api/v1/rollouts/{uuid.uuid4()}"):
        response = logged_in.get(url)
        assert response.status_code == 404 and response.is_json


@pytest.mark.fault
def test_a_client_that_disconnects_mid_stream_frees_its_connection(logged_in, database, v1):
    pool = database.engine.pool
    before = pool.checkedout()
    response = logged_in.get("/api/v1/rollouts?kind=all", buffered=False)
    next(response.response)  # read the first chunk only
    assert pool.checkedout() == before + 1
    response.close()
    assert pool.checkedout() == before


def test_format_trl_for_rollout_kinds_gives_sft_conversations(logged_in, v1):
    response = export(logged_in, kind="failed", format="trl")
    assert response.headers["Content-Disposition"] == "attachment; filename=agentforge-rollouts-failed.trl.jsonl"
    conversations = lines(response)  # the 0.5 has no steps: no turn of the agent's own, so no row, counted
    assert len(conversations) == 3 and all(set(c) == {"messages", "tools"} for c in conversations)
    assert response.headers["X-Rows-Without-Agent-Turn"] == "1"
    first = conversations[0]["messages"]
    assert first[0]["role"] == "user" and first[0]["content"].startswith("Restock SKU-1042")


def test_format_atif_for_preference_embeds_both_trajectories(logged_in, v1):
    (pair,) = lines(export(logged_in, kind="preference", format="atif"))
    for side in ("preferred", "rejected"):
        Trajectory.model_validate(pair[side]["trajectory"])
        assert pair[side]["trajectory"]["extra"]["rolloutId"] == pair[side]["rolloutId"]


def test_preference_after_a_cursor_pairs_only_newer_rollouts(logged_in, database, v1):
    catalog, _, _ = v1
    first = export(logged_in, kind="preference")
    assert len(lines(first)) == 1
    cursor = first.headers["X-Next-Cursor"]
    assert lines(export(logged_in, kind="preference", after=cursor)) == []
    _, new_ids = record_run(database, catalog, [0.9, 0.1])
    (pair,) = lines(export(logged_in, kind="preference", after=cursor))
    assert (pair["preferred"]["rolloutId"], pair["rejected"]["rolloutId"]) == (str(new_ids[0]), str(new_ids[1]))
