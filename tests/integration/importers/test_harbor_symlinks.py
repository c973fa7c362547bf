"""import-harbor refuses files that lead outside the job directory and never quotes a file in its error line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.factories import writable_copy
from tests.paths import TESTS

pytestmark = pytest.mark.bad_input

# Written by Harbor 0.26 itself (see fixtures/harbor/README.md); tests copy it, never change it.
FIXTURE = TESTS / "fixtures" / "harbor" / "terminus2-hello"
SECRET = "TOPSECRET-7f3a9c-do-not-echo"


@pytest.fixture
def job(tmp_path) -> Path:
    """A writable copy of the real Harbor 0.26 job directory (four attempts of `hello-file`)."""
    return writable_copy(FIXTURE, tmp_path / "jobs" / FIXTURE.name)


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside the job directory whose content must never appear in any output."""
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{SECRET}\n")
    return secret


def first_trial(job: Path) -> Path:
    """The first trial directory of the job, in name order."""
    return sorted(p.parent for p in job.glob("*/result.json"))[0]


def test_the_real_harbor_job_imports(job, runner, make_member, count_rows):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 0, result.output
    assert "Imported 4 trials into 1 runs (0 already there)." in result.output
    assert count_rows("evaluation_trials", member.org) == 4


def replace_with_symlink(path: Path, target: Path) -> None:
    """Make `path` a symlink to `target` (removing the file there, if any)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(target)


@pytest.mark.parametrize(
    "relative",
    ["verifier/reward.txt", "verifier/reward.json", "agent/trajectory.json", "result.json"],
)
def test_a_symlink_out_of_the_job_is_refused_naming_the_file_not_its_content(
    job, outside, relative, runner, make_member, count_rows
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial = first_trial(job)
    if relative == "verifier/reward.txt":
        (trial / "verifier" / "reward.json").unlink()  # reward.txt is read when reward.json is missing
    replace_with_symlink(trial / relative, outside)

    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])

    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    assert f"{trial.name}/{relative}" in lines[0] and "outside the job directory" in lines[0]
    assert SECRET not in result.output and "TOPSECRET" not in result.output
    assert count_rows("evaluation_trials", member.org) == 0


def test_a_reward_in_result_json_does_not_excuse_a_symlinked_reward_file(job, outside, runner, make_member, count_rows):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial = first_trial(job)
    replace_with_symlink(trial / "verifier" / "reward.txt", outside)  # never read: result.json holds the reward
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 1 and "verifier/reward.txt" in result.output and SECRET not in result.output
    assert count_rows("evaluation_trials", member.org) == 0


def test_a_symlinked_trial_directory_outside_the_job_is_refused(job, tmp_path, runner, make_member, count_rows):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(first_trial(job), elsewhere)
    (job / "hello-file__aaaa").symlink_to(elsewhere, target_is_directory=True)
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 1 and "hello-file__aaaa/result.json" in result.output
    assert "outside the job directory" in result.output
    assert count_rows("evaluation_trials", member.org) == 0


def test_a_symlink_that_stays_inside_the_job_is_followed(job, runner, make_member, count_rows):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trials = sorted(p.parent for p in job.glob("*/result.json"))
    replace_with_symlink(
        trials[0] / "agent" / "trajectory.json", Path("../..") / trials[1].name / "agent" / "trajectory.json"
    )
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 0, result.output
    assert count_rows("evaluation_trials", member.org) == 4


@pytest.mark.parametrize(
    ("relative", "content", "says"),
    [
        ("verifier/reward.txt", f"{SECRET}\n", "does not hold a number"),
        ("verifier/reward.json", f'{{"reward": "{SECRET}"}}', "does not hold a number"),
        ("agent/trajectory.json", f"{{{SECRET}", "is not valid JSON"),
        ("result.json", f"[{SECRET}]", "is not valid JSON"),
    ],
)
def test_a_damaged_file_is_named_without_quoting_it(job, relative, content, says, runner, make_member, count_rows):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    trial = first_trial(job)
    if relative == "verifier/reward.txt":
        (trial / "verifier" / "reward.json").unlink()
    if relative.startswith("verifier/"):  # the reward files are read when result.json holds no rewards
        result = json.loads((trial / "result.json").read_text())
        result["verifier_result"] = None
        (trial / "result.json").write_text(json.dumps(result))
    (trial / relative).write_text(content)
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert f"{trial.name}/{relative}" in lines[0] and says in lines[0]
    assert "TOPSECRET" not in result.output
    assert count_rows("evaluation_trials", member.org) == 0
