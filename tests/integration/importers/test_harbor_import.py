"""import-harbor on the real Harbor 0.26 job: every ATIF step, the task's instruction, the logs, the ATIF round trip,
a directory of jobs, and a directory that is no job at all. What the fixture holds is counted from its files."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from domain.outcome import LOG_CAP_CHARS, OBSERVATION_CAP_CHARS
from tests.factories import writable_copy
from tests.helpers import one, parse, texts
from tests.paths import TESTS

# Written by Harbor 0.26 itself (see fixtures/harbor/README.md): the job and the task it ran. Tests copy it.
FIXTURE = TESTS / "fixtures" / "harbor"
JOB = "terminus2-hello"
INSTRUCTION = (FIXTURE / "tasks" / "hello-file" / "instruction.md").read_text().strip()
IMPORTED_TABLES = ("evaluation_runs", "evaluation_trials", "artifacts", "environments", "evaluator_configs")


@pytest.fixture
def harbor(tmp_path) -> Path:
    """A writable copy of the fixture folder: the job `terminus2-hello` beside `tasks/hello-file`."""
    return writable_copy(FIXTURE, tmp_path / "harbor")


def trial_dirs(job: Path) -> list[Path]:
    return sorted(p.parent for p in job.glob("*/result.json"))


def atif_of(trial: Path) -> dict:
    return json.loads((trial / "agent" / "trajectory.json").read_text())


def import_harbor(runner, path: Path, *more: str):
    return runner.invoke(args=["import-harbor", str(path), "--org", "Acme RL", *more])


def imported(database, org_id) -> dict[str, dict]:
    """Each imported trial by its Harbor trial id: its task, log, seed, steps and id."""
    with database.session(org_id) as session:
        rows = session.execute(
            text("SELECT t.id, t.external_id, t.task, t.log_excerpt, t.seed, t.steps FROM evaluation_trials t")
        ).all()
    return {
        row.external_id.removeprefix("harbor:"): {
            "id": row.id,
            "task": row.task,
            "log": row.log_excerpt,
            "seed": row.seed,
            "steps": row.steps,
        }
        for row in rows
    }


def by_trial(job: Path, trials: dict[str, dict]) -> list[tuple[Path, dict]]:
    """Each trial directory with what was imported from it (matched on result.json's id)."""
    return [(d, trials[json.loads((d / "result.json").read_text())["id"]]) for d in trial_dirs(job)]


def test_every_atif_step_observation_and_message_is_kept(harbor, runner, make_member, database, client, auth):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    result = import_harbor(runner, harbor / JOB)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Imported 4 trials into 1 runs (0 already there)."
    auth.login(member.email)
    pairs = by_trial(harbor / JOB, imported(database, member.org.id))
    assert len(pairs) == 4
    for trial_dir, trial in pairs:
        atif = atif_of(trial_dir)
        steps = trial["steps"]
        assert [s["source"] for s in steps] == [s["source"] for s in atif["steps"]]
        for ours, theirs in zip(steps, atif["steps"], strict=True):
            assert ours.get("message") == theirs.get("message")
            assert ours.get("startedAt") == theirs.get("timestamp")
            calls = [(c["tool_call_id"], c["function_name"], c["arguments"]) for c in theirs.get("tool_calls") or []]
            assert [(c["id"], c["name"], c["arguments"]) for c in ours.get("toolCalls", [])] == calls
            results = (theirs.get("observation") or {}).get("results") or []
            assert [(r["callId"], r["content"]) for r in ours.get("results", [])] == [
                (r.get("source_call_id"), r["content"]) for r in results
            ]
            if theirs.get("metrics"):
                assert ours["tokens"]["prompt"] == theirs["metrics"]["prompt_tokens"]
        observations = [r["content"] for s in atif["steps"] for r in (s.get("observation") or {}).get("results", [])]
        unlinked = [
            r["content"]
            for s in atif["steps"]
            for r in (s.get("observation") or {}).get("results", [])
            if not r.get("source_call_id")
        ]
        messages = [s["message"] for s in atif["steps"] if s["source"] == "agent"]
        assert unlinked, "the fixture's mark_task_complete results carry no source_call_id"

        page = client.get(f"/trials/{trial['id']}").text
        assert f"Trajectory ({len(atif['steps'])} steps)" in page
        assert "The agent took no steps" not in page
        shown = parse(page).get_text()
        for observation in observations:
            assert observation.strip().splitlines()[0] in shown
        for message in messages:
            assert message.splitlines()[-1] in shown
        assert "mark_task_complete" in shown


def test_the_task_is_the_instruction_and_the_log_holds_trial_log_and_the_verifier(
    harbor, runner, make_member, database, client, auth
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    auth.login(member.email)
    for trial_dir, trial in by_trial(harbor / JOB, imported(database, member.org.id)):
        assert trial["task"] == INSTRUCTION
        assert "You are an AI assistant" not in trial["task"]
        trial_log = (trial_dir / "trial.log").read_text().strip().splitlines()
        verifier = (trial_dir / "verifier" / "test-stdout.txt").read_text().strip()
        assert trial_log[-1] in trial["log"] and verifier in trial["log"]
        assert trial["seed"] == 0  # Harbor records no seed
        page = client.get(f"/trials/{trial['id']}").text
        assert texts(page, "p.task") == [INSTRUCTION]
        log = one(page, "pre.log").get_text()
        assert trial_log[-1] in log and verifier in log


def test_the_imported_atif_document_exports_unchanged(harbor, runner, make_member, client, auth):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    auth.login(member.email)
    lines = client.get("/api/v1/rollouts?kind=all&format=atif").data.splitlines()
    exported = {doc["session_id"]: doc for doc in map(json.loads, lines)}
    originals = [atif_of(d) for d in trial_dirs(harbor / JOB)]
    assert len(exported) == len(originals) == 4
    for original in originals:
        document = exported[original["session_id"]]
        assert {k: v for k, v in document.items() if k != "extra"} == original
        assert document["extra"]["reward"] in (0.0, 1.0)


def strict_lines(body: bytes) -> list:
    """Each NDJSON line parsed as JSON only (Python's json module alone reads NaN and Infinity)."""

    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    return [json.loads(line, parse_constant=refuse) for line in body.splitlines()]


@pytest.mark.fault
def test_a_trajectory_holding_nan_imports_and_every_exported_line_is_json(harbor, runner, make_member, client, auth):
    # Harbor writes its files with Python's json module, which writes NaN for a float("nan") (jsonb refuses it):
    # the trial is imported with NaN kept as the text "NaN".
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trajectory = trial_dirs(harbor / JOB)[0] / "agent" / "trajectory.json"
    atif = json.loads(trajectory.read_text())
    atif["steps"][-1]["metrics"] = {"prompt_tokens": 12, "cost_usd": float("nan")}
    trajectory.write_text(json.dumps(atif))
    assert "NaN" in trajectory.read_text()
    result = import_harbor(runner, harbor / JOB)
    assert result.exit_code == 0, result.output
    auth.login(member.email)
    for export_format in ("atif", "trl", "atif-shaped"):
        assert len(strict_lines(client.get(f"/api/v1/rollouts?kind=all&format={export_format}").data)) == 4
    exported = strict_lines(client.get("/api/v1/rollouts?kind=all&format=atif").data)
    (document,) = [doc for doc in exported if doc["session_id"] == atif["session_id"]]
    assert document["steps"][-1]["metrics"]["cost_usd"] == "NaN"


def test_a_folder_holding_the_job_imports_that_one_job(harbor, runner, make_member, database):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    result = import_harbor(runner, harbor)
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines() == [
        f"{harbor} holds 1 Harbor job(s): {JOB}.",
        "Imported 4 trials into 1 runs (0 already there).",
    ]
    trials = imported(database, member.org.id)
    assert len(trials) == 4 and {t["task"] for t in trials.values()} == {INSTRUCTION}


def test_each_trial_keeps_the_times_harbor_recorded(harbor, runner, make_member, database):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    with database.session(member.org.id) as session:
        stored = {
            row.external_id: (row.started_at, row.finished_at)
            for row in session.execute(text("SELECT external_id, started_at, finished_at FROM evaluation_trials"))
        }
    for trial_dir in trial_dirs(harbor / JOB):
        result = json.loads((trial_dir / "result.json").read_text())
        recorded = tuple(datetime.fromisoformat(result[key]) for key in ("started_at", "finished_at"))
        assert stored[f"harbor:{result['id']}"] == recorded


def test_harbors_own_layout_finds_the_task_from_the_folder_it_ran_in(harbor, tmp_path, runner, make_member, database):
    """Harbor ran in a folder with jobs/<job> and tasks/<task>; the config's trials_dir says so."""
    ran_in = tmp_path / "harbor-run"
    (ran_in / "jobs").mkdir(parents=True)
    shutil.move(harbor / JOB, ran_in / "jobs" / JOB)
    shutil.move(harbor / "tasks", ran_in / "tasks")
    member = make_member("olga@acme.test", "Acme RL", "owner")
    result = import_harbor(runner, ran_in / "jobs")
    assert result.exit_code == 0, result.output
    assert {t["task"] for t in imported(database, member.org.id).values()} == {INSTRUCTION}


def test_without_the_task_directory_the_instruction_comes_from_the_agents_prompt_or_is_named(
    harbor, runner, make_member, database
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    shutil.rmtree(harbor / "tasks")
    oracle = sorted((harbor / JOB).glob("hello-file__*"))[0]
    (oracle / "agent" / "trajectory.json").unlink()  # like the oracle agent: no trajectory
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    tasks = {d.name: t["task"] for d, t in by_trial(harbor / JOB, imported(database, member.org.id))}
    assert tasks.pop(oracle.name) == (
        "Harbor task hello-file (task directory tasks/hello-file): its instruction.md was not found beside the job; "
        "import with --tasks DIR"
    )
    assert set(tasks.values()) == {INSTRUCTION}


def test_tasks_option_names_the_folder_task_paths_are_relative_to(harbor, tmp_path, runner, make_member, database):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    elsewhere = tmp_path / "checkout"
    shutil.move(harbor / "tasks", elsewhere / "tasks")
    for trial in trial_dirs(harbor / JOB):
        (trial / "agent" / "trajectory.json").unlink()
    assert import_harbor(runner, harbor / JOB, "--tasks", str(elsewhere)).exit_code == 0
    assert {t["task"] for t in imported(database, member.org.id).values()} == {INSTRUCTION}


def test_a_task_path_leading_out_of_the_folder_is_not_read(harbor, tmp_path, runner, make_member, database):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "instruction.md").write_text("PRIVATE-INSTRUCTION")
    for trial in trial_dirs(harbor / JOB):
        result = trial / "result.json"
        result.write_text(result.read_text().replace('"path": "tasks/hello-file"', '"path": "../private"'))
        (trial / "agent" / "trajectory.json").unlink()
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    tasks = {t["task"] for t in imported(database, member.org.id).values()}
    assert all("PRIVATE" not in task and "../private" in task for task in tasks)


@pytest.mark.parametrize("what", ["empty", "tasks", "trial"])
def test_a_directory_that_holds_no_job_is_refused_and_nothing_is_written(
    what, harbor, tmp_path, runner, make_member, count_rows
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    path = {"empty": tmp_path / "empty", "tasks": harbor / "tasks", "trial": trial_dirs(harbor / JOB)[0]}[what]
    path.mkdir(exist_ok=True)
    result = import_harbor(runner, path)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: path: "), result.output
    if what == "trial":
        assert f"{path} is a Harbor trial directory, not a job; import its job directory {path.parent}" in lines[0]
    else:
        assert f"{path} is not a Harbor job directory" in lines[0] and "nothing imported" in lines[0]
    assert {t: count_rows(t, member.org) for t in IMPORTED_TABLES} == dict.fromkeys(IMPORTED_TABLES, 0)


def test_observations_and_logs_get_the_worker_caps_and_a_log_keeps_its_end(harbor, runner, make_member, database):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial = trial_dirs(harbor / JOB)[0]
    atif = atif_of(trial)
    long = "x" * (3 * OBSERVATION_CAP_CHARS)
    atif["steps"][1]["observation"]["results"][0]["content"] = long
    (trial / "agent" / "trajectory.json").write_text(json.dumps(atif))
    (trial / "trial.log").write_text("early line\n" * 10_000 + "THE LAST LINE\n")
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    ours = dict(by_trial(harbor / JOB, imported(database, member.org.id)))[trial]
    step = ours["steps"][1]
    assert step["observation"].startswith("x" * OBSERVATION_CAP_CHARS)
    assert "observation truncated" in step["observation"]
    assert len(step["results"][0]["content"]) < len(long)
    assert len(ours["log"]) <= LOG_CAP_CHARS + 100
    assert ours["log"].startswith("… [log truncated:") and "THE LAST LINE" in ours["log"]
    assert "exists=" in ours["log"]  # the verifier's output, after trial.log, survives the cut


def test_a_timed_out_trial_keeps_its_message_only_step_and_its_exception(
    harbor, runner, make_member, database, client, auth
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial = trial_dirs(harbor / JOB)[0]
    atif = atif_of(trial)
    atif["steps"].append(
        {
            "step_id": len(atif["steps"]) + 1,
            "source": "agent",
            "message": "Still thinking about hello.txt",
            "reasoning_content": "the file may need a trailing newline",
        }
    )
    (trial / "agent" / "trajectory.json").write_text(json.dumps(atif))
    result = json.loads((trial / "result.json").read_text())
    result["verifier_result"] = {"rewards": {"reward": 0}}
    result["exception_info"] = {
        "exception_type": "AgentTimeoutError",
        "exception_message": "Agent execution timed out after 120.0 seconds",
        "exception_traceback": "Traceback (most recent call last):\n  ...\nAgentTimeoutError",
    }
    (trial / "result.json").write_text(json.dumps(result))
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    ours = dict(by_trial(harbor / JOB, imported(database, member.org.id)))[trial]
    last = ours["steps"][-1]
    assert last["source"] == "agent" and "toolCalls" not in last
    assert last["message"] == "Still thinking about hello.txt"
    assert last["reasoning"] == "the file may need a trailing newline"
    auth.login(member.email)
    page = client.get(f"/trials/{ours['id']}").text
    assert "agent message" in page and "Still thinking about hello.txt" in page
    assert "Agent execution timed out after 120.0 seconds" in page and "agent_timeout_error" in page


@pytest.mark.fault
def test_an_unreadable_directory_is_refused_in_one_line_and_nothing_is_written(
    harbor, runner, make_member, count_rows, monkeypatch
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    (harbor / "locked").mkdir()
    listing = Path.iterdir

    def iterdir(self):  # the tests run as root, who reads any directory: refuse this one as the kernel would
        if self.name == "locked":
            raise PermissionError(13, "Permission denied")
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    result = import_harbor(runner, harbor)
    assert result.exit_code == 1 and "locked cannot be read: Permission denied" in result.output, result.output
    assert "Traceback" not in result.output and count_rows("evaluation_trials", member.org.id) == 0


def test_a_multi_step_trials_per_step_rewards_become_its_stages(harbor, runner, make_member, database):
    # Harbor writes `step_results` ([{"step": 1, "reward": 0.85, …}]) for multi-step tasks; the fixture's job is
    # single-step (null there), so this copy of one trial gets two steps' results as Harbor would write them.
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial_dir = trial_dirs(harbor / JOB)[0]
    result = json.loads((trial_dir / "result.json").read_text())
    result["step_results"] = [{"step": 1, "reward": 1.0}, {"step": 2, "reward": 0.25}]
    result["verifier_result"] = None
    (trial_dir / "result.json").write_text(json.dumps(result))
    for reward_file in (trial_dir / "verifier").glob("reward.*"):  # no overall reward: the steps' mean is it
        reward_file.unlink()
    assert import_harbor(runner, harbor / JOB).exit_code == 0
    with database.session(member.org.id) as session:
        metrics, reward, log = session.execute(
            text("SELECT metrics, reward, log_excerpt FROM evaluation_trials WHERE external_id = :id"),
            {"id": f"harbor:{result['id']}"},
        ).one()
    assert metrics == {
        "stage_step_1": 1.0,
        "stage_step_2": 0.25,
        "explanations": {  # verifier/test-stdout.txt, beside the stages, and how the reward was derived
            "verifier": "exists=1 content=1",
            "reward": "the mean of 2 steps' rewards in result.json's step_results",
        },
    }
    assert reward == 0.625
    assert '== step results ==\n{"step": 1, "reward": 1.0}' in log


@pytest.mark.bad_input
def test_a_job_copied_twice_is_refused_in_one_line_naming_both_trial_directories(
    harbor, runner, make_member, count_rows
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    shutil.copytree(harbor / JOB, harbor / f"{JOB}-copy")
    result = import_harbor(runner, harbor)
    assert result.exit_code == 1
    (said,) = result.output.strip().splitlines()
    first = trial_dirs(harbor / JOB)[0].name
    assert said.startswith("Error: ") and "Traceback" not in result.output and "UniqueViolation" not in said
    assert f"{JOB}-copy/{first}" in said and f"is also the id of {JOB}/{first}" in said, said
    assert all(count_rows(table, member.org) == 0 for table in IMPORTED_TABLES)


def test_importing_again_reports_trials_that_changed_since(harbor, runner, make_member):
    make_member("olga@acme.test", "Acme RL", "owner")
    assert import_harbor(runner, harbor).exit_code == 0
    first = trial_dirs(harbor / JOB)[0]
    document = atif_of(first)
    document["steps"] = document["steps"][:1]
    (first / "agent" / "trajectory.json").write_text(json.dumps(document))
    again = import_harbor(runner, harbor)
    assert again.exit_code == 0, again.output
    lines = again.output.strip().splitlines()
    assert lines[-2] == f"Nothing new to import: all 4 trials of job {JOB} were imported before; nothing was written."
    assert lines[-1].startswith("1 of those already there differ from what was read now")
    assert json.loads((first / "result.json").read_text())["id"] in lines[-1]


def test_importing_a_job_again_says_its_trials_were_imported_before_and_writes_nothing(
    harbor, runner, make_member, count_rows
):
    """The second import of a job reads trials imported before: it says so, with no warning about their tasks."""
    member = make_member("olga@acme.test", "Acme RL", "owner")
    shutil.rmtree(harbor / "tasks")
    for trial in trial_dirs(harbor / JOB):
        (trial / "agent" / "trajectory.json").unlink()  # no instruction.md, no prompt quoting it: named only
    first = import_harbor(runner, harbor / JOB)
    assert first.exit_code == 0, first.output
    assert first.output.strip().splitlines() == [
        "Imported 4 trials into 1 runs (0 already there).",
        "Warning: 4 of the 4 trials imported have no instruction: their task's instruction.md was not found where "
        "the job points, so their task only names the task. A trial keeps the task it was imported with (importing "
        "again changes nothing): import a job whose task folders are elsewhere with --tasks DIR.",
    ]
    written = {table: count_rows(table, member.org) for table in (*IMPORTED_TABLES, "rollouts")}
    again = import_harbor(runner, harbor / JOB)
    assert again.exit_code == 0, again.output
    assert again.output.strip().splitlines() == [
        f"Nothing new to import: all 4 trials of job {JOB} were imported before; nothing was written."
    ]
    assert {table: count_rows(table, member.org) for table in written} == written
    assert written["evaluation_trials"] == 4


def test_a_renamed_job_in_its_jobs_folder_still_finds_its_task(harbor, tmp_path, runner, make_member, database):
    """The config's trials_dir names jobs/terminus2-hello, but the job was renamed: the job's grandparent is the
    folder Harbor ran in."""
    ran_in = tmp_path / "harbor-run"
    (ran_in / "jobs").mkdir(parents=True)
    shutil.move(harbor / JOB, ran_in / "jobs" / "renamed-job")
    shutil.move(harbor / "tasks", ran_in / "tasks")
    for trial in trial_dirs(ran_in / "jobs" / "renamed-job"):
        (trial / "agent" / "trajectory.json").unlink()  # no prompt to fall back on
    member = make_member("olga@acme.test", "Acme RL", "owner")
    result = import_harbor(runner, ran_in / "jobs" / "renamed-job")
    assert result.exit_code == 0 and "Warning" not in result.output, result.output
    assert {t["task"] for t in imported(database, member.org.id).values()} == {INSTRUCTION}


def test_tasks_option_takes_the_tasks_folder_itself_and_a_missing_task_is_warned_about(
    harbor, tmp_path, runner, make_member, database
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    elsewhere = tmp_path / "checkout"
    shutil.move(harbor / "tasks", elsewhere / "tasks")
    for trial in trial_dirs(harbor / JOB):
        (trial / "agent" / "trajectory.json").unlink()
    result = import_harbor(runner, harbor / JOB, "--tasks", str(elsewhere / "tasks"))
    assert result.exit_code == 0 and "Warning" not in result.output, result.output
    assert {t["task"] for t in imported(database, member.org.id).values()} == {INSTRUCTION}
    empty = tmp_path / "empty"
    empty.mkdir()
    other = make_member("ann@globex.test", "Globex", "owner")
    warned = runner.invoke(args=["import-harbor", str(harbor / JOB), "--org", "Globex", "--tasks", str(empty)])
    assert warned.exit_code == 0
    assert (
        "Warning: 4 of the 4 trials imported have no instruction: their task's instruction.md was not found "
        "where --tasks points" in warned.output
    )
    assert all("--tasks" in t["task"] for t in imported(database, other.org.id).values())


def rewarded_by_criteria(trial_dir: Path, rewards: dict, *, in_result: bool = True) -> dict:
    """Give a trial of the fixture the rewards Harbor's rewardkit writes for a tests/ folder per criterion: one key
    per criterion in verifier/reward.json, and the same in result.json's verifier_result (or none there, `in_result`
    False, as when Harbor stopped before recording it). Returns its result.json."""
    (trial_dir / "verifier" / "reward.json").write_text(json.dumps(rewards))
    result = json.loads((trial_dir / "result.json").read_text())
    result["verifier_result"] = {"rewards": rewards} if in_result else None
    (trial_dir / "result.json").write_text(json.dumps(result))
    return result


@pytest.mark.parametrize(
    ("in_result", "derived"),
    [
        (True, "the mean of 2 rewards in result.json: correctness, performance"),
        (False, "the mean of 2 rewards in reward.json: correctness, performance"),
    ],
    ids=["result.json", "reward.json"],
)
def test_a_trial_rewarded_by_several_keys_imports_with_each_as_a_stage(
    harbor, runner, make_member, database, client, auth, in_result, derived
):
    # was: "Error: …/result.json: does not hold a number as its reward" and nothing of the job imported
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial_dir = trial_dirs(harbor / JOB)[0]
    result = rewarded_by_criteria(trial_dir, {"correctness": 1, "performance": 0}, in_result=in_result)
    imported_now = import_harbor(runner, harbor / JOB)
    assert imported_now.exit_code == 0, imported_now.output
    assert imported_now.output.strip() == "Imported 4 trials into 1 runs (0 already there)."
    with database.session(member.org.id) as session:
        trial_id, reward, category, metrics = session.execute(
            text("SELECT id, reward, failure_category, metrics FROM evaluation_trials WHERE external_id = :id"),
            {"id": f"harbor:{result['id']}"},
        ).one()
    assert (reward, category) == (0.5, "verifier_failed")
    assert {k: v for k, v in metrics.items() if k.startswith("stage_")} == {
        "stage_correctness": 1.0,
        "stage_performance": 0.0,
    }
    auth.login(member.email)
    page = parse(client.get(f"/trials/{trial_id}").text)
    assert f"Reward 0.500 ({derived})" in one(page, "dl.facts").get_text(" ", strip=True)
    assert texts(page, "table.stages th[scope=row]") == ["stage_correctness", "stage_performance"]


@pytest.mark.bad_input
def test_a_reward_that_is_no_number_is_refused_naming_its_key_and_nothing_is_written(
    harbor, runner, make_member, count_rows
):
    # was: a key whose value was no number was dropped without a word
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial_dir = trial_dirs(harbor / JOB)[0]
    rewarded_by_criteria(trial_dir, {"correctness": 1, "notes": "TOPSECRET judge notes"})
    result = import_harbor(runner, harbor / JOB)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {trial_dir.name}/result.json: result.json's key 'notes' does not hold a number\n"
    ), result.output
    assert "TOPSECRET" not in result.output
    assert all(count_rows(table, member.org) == 0 for table in IMPORTED_TABLES)
