"""One rule library, every door: the same values sent through the API, the page forms, ingest and the CLI get the
same answer (taken or refused) and, when taken, the same stored value, read back from the database.

The doors of each field:
* an environment's name: POST /api/v1/environments, the page's /environments/new, an NDJSON import line's
  environment.name, `import-harbor-task --environment`;
* an evaluator's name: POST /api/v1/evaluator-configs, the page's /evaluators/new, an NDJSON line's agent,
  `import-harbor` (the agent of a Harbor trial's result.json);
* a token's name: the settings page's form, `create-token --name` (an organization's: `create-org`, the CLI only);
* a stage key: the `stagePassed` filter of /api/v1/trials and of the /trials page, an NDJSON line's stages,
  `import-harbor` (a Harbor reward key, which becomes stage_<key> unless it is one);
* a reward: the `minReward` filter of /api/v1/trials and of the /trials page (query strings: the text "0.5" is the
  number), an NDJSON line's reward (JSON: the string "0.5" is no number), `import-harbor` (result.json's reward;
  Harbor's verifiers write any number, which is held to 0..1, as the worker holds a Harbor task's reward).

A CLI refusal is one `Error: …` line, exit 1 and nothing written; an API or page refusal is a 4xx with nothing
written.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tests.factories import writable_copy
from tests.helpers import import_ndjson, line, ndjson
from tests.paths import TESTS

REFUSED = "refused"
TASK = TESTS / "fixtures" / "harbor_tasks" / "greet"
LONG = "x" * 300

# Every value any name takes, and what every door holds of it (REFUSED: refused, nothing written).
NAMES = [
    ("plain", "shop", "shop"),
    ("spaces around", "  x  ", "x"),
    ("blank", "   ", REFUSED),
    ("empty", "", REFUSED),
    ("NUL", "a\x00b", REFUSED),
    ("200 characters", "y" * 200, "y" * 200),
    ("201 characters", "x" * 201, REFUSED),
    ("300 characters", LONG, REFUSED),
]


@pytest.fixture
def acme_api(api):
    """The member's API client; the CLI finds the organization as "Acme RL"."""
    assert api.org.name == "Acme RL"
    return api


def names_in(database, org_id, table: str) -> list[str]:
    with database.session(org_id) as session:
        return sorted(session.scalars(text(f"SELECT name FROM {table}")))


def form_post(api, url: str, data: dict[str, Any]):
    return api.client.post(url, data=data, headers={"X-CSRFToken": api.token})


def cli(runner, *args: str):
    """Run a command; a refusal must be exactly one `Error:` line and exit 1 (no traceback)."""
    result = runner.invoke(args=list(args))
    if result.exit_code != 0:
        lines = result.output.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), (
            result.exit_code,
            result.output,
            result.exception,
        )
    return result


def harbor_job(tmp_path: Path, *, task: str = "greet", agent: str = "terminus-2", rewards: dict | None = None) -> Path:
    """A Harbor job directory of one trial whose result.json names `task` and `agent` and holds `rewards`."""
    job = tmp_path / f"job-{uuid.uuid4().hex[:8]}"
    trial = job / "greet__1"
    trial.mkdir(parents=True)
    result = {
        "id": str(uuid.uuid4()),
        "task_name": task,
        "trial_name": "greet__1",
        "agent_info": {"name": agent},
        "verifier_result": {"rewards": {"reward": 1.0} if rewards is None else rewards},
    }
    (trial / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return job


def outcome(accepted: bool, stored: list) -> Any:
    """What a door did: REFUSED with nothing stored, or the one value it stored."""
    if not accepted:
        assert stored == [], stored
        return REFUSED
    assert len(stored) == 1, stored
    return stored[0]


# Environment names


def environment_by_api(api, database, runner, tmp_path, name):
    answer = api.post("/api/v1/environments", {"name": name})
    assert answer.status_code in (201, 400), answer.status_code
    return outcome(answer.status_code == 201, names_in(database, api.org.id, "environments"))


def environment_by_form(api, database, runner, tmp_path, name):
    data = {"name": name, "description": "", "submission_key": str(uuid.uuid4()), "source": "fields"}
    answer = form_post(api, "/environments/new", data)
    assert answer.status_code in (303, 400, 422), answer.status_code
    return outcome(answer.status_code == 303, names_in(database, api.org.id, "environments"))


def environment_by_ingest(api, database, runner, tmp_path, name):
    body = line("x-1", 1, 1.0)
    body["environment"]["name"] = name
    answer = import_ndjson(api, ndjson(body))
    assert answer.status_code in (201, 400), answer.status_code
    return outcome(answer.status_code == 201, names_in(database, api.org.id, "environments"))


def environment_by_cli(api, database, runner, tmp_path, name):
    task = writable_copy(TASK, tmp_path / "greet")
    result = cli(runner, "import-harbor-task", str(task), "--org", "Acme RL", "--environment", name)
    return outcome(result.exit_code == 0, names_in(database, api.org.id, "environments"))


ENVIRONMENT_DOORS = [environment_by_api, environment_by_form, environment_by_ingest, environment_by_cli]


@pytest.mark.bad_input
@pytest.mark.parametrize("door", ENVIRONMENT_DOORS, ids=lambda door: door.__name__)
@pytest.mark.parametrize(("case", "name", "held"), NAMES, ids=[case for case, _, _ in NAMES])
def test_an_environment_name_is_held_alike_by_every_door(acme_api, database, runner, tmp_path, door, case, name, held):
    # was: ingest and import-harbor-task stored "  x  " as it is (a second environment that looks like "x"), took
    # "   ", a NUL and 300 characters, or crashed (DataError) on 201
    assert door(acme_api, database, runner, tmp_path, name) == held


# Evaluator names

AGENT = {"kind": "scripted", "skill": 1.0}


def evaluator_by_api(api, database, runner, tmp_path, name):
    answer = api.post("/api/v1/evaluator-configs", {"name": name, "attemptCount": 1, "agent": AGENT})
    assert answer.status_code in (201, 400), answer.status_code
    return outcome(answer.status_code == 201, names_in(database, api.org.id, "evaluator_configs"))


def evaluator_by_form(api, database, runner, tmp_path, name):
    data = {"name": name, "attemptCount": "4", "submission_key": str(uuid.uuid4()), "source": "fields"}
    answer = form_post(api, "/evaluators/new", data)
    assert answer.status_code in (303, 400, 422), (answer.status_code, answer.text[:2000])
    return outcome(answer.status_code == 303, names_in(database, api.org.id, "evaluator_configs"))


def evaluator_by_ingest(api, database, runner, tmp_path, name):
    answer = import_ndjson(api, ndjson(line("x-1", 1, 1.0, agent=name)))
    assert answer.status_code in (201, 400), answer.status_code
    return outcome(answer.status_code == 201, names_in(database, api.org.id, "evaluator_configs"))


def evaluator_by_cli(api, database, runner, tmp_path, name):
    result = cli(runner, "import-harbor", str(harbor_job(tmp_path, agent=name)), "--org", "Acme RL")
    return outcome(result.exit_code == 0, names_in(database, api.org.id, "evaluator_configs"))


EVALUATOR_DOORS = [evaluator_by_api, evaluator_by_form, evaluator_by_ingest, evaluator_by_cli]


@pytest.mark.bad_input
@pytest.mark.parametrize("door", EVALUATOR_DOORS, ids=lambda door: door.__name__)
@pytest.mark.parametrize(("case", "name", "held"), NAMES, ids=[case for case, _, _ in NAMES])
def test_an_evaluator_name_is_held_alike_by_every_door(acme_api, database, runner, tmp_path, door, case, name, held):
    assert door(acme_api, database, runner, tmp_path, name) == held


# Token and organization names


def token_by_form(api, database, runner, tmp_path, name):
    answer = form_post(api, "/settings/tokens", {"name": name})
    assert answer.status_code in (201, 400, 422), answer.status_code
    return outcome(answer.status_code == 201, names_in(database, api.org.id, "api_tokens"))


def token_by_cli(api, database, runner, tmp_path, name):
    result = cli(runner, "create-token", api.member.email, "--org", "Acme RL", "--name", name)
    return outcome(result.exit_code == 0, names_in(database, api.org.id, "api_tokens"))


@pytest.mark.bad_input
@pytest.mark.parametrize("door", [token_by_form, token_by_cli], ids=lambda door: door.__name__)
@pytest.mark.parametrize(("case", "name", "held"), NAMES, ids=[case for case, _, _ in NAMES])
def test_a_token_name_is_held_alike_by_the_form_and_the_cli(
    acme_api, database, runner, tmp_path, door, case, name, held
):
    # was: create-token stored a blank name as "token" and cut 300 characters to 200
    assert door(acme_api, database, runner, tmp_path, name) == held


@pytest.mark.bad_input
@pytest.mark.parametrize(("case", "name", "held"), NAMES, ids=[case for case, _, _ in NAMES])
def test_an_organization_name_follows_the_same_rule(runner, owner_engine, case, name, held):
    # was: create-org crashed with a DataError traceback on a name over 200 characters
    result = cli(runner, "create-org", name)
    with owner_engine.connect() as connection:
        stored = list(connection.scalars(text("SELECT name FROM organizations")))
    assert outcome(result.exit_code == 0, stored) == held


# Stage keys

STAGE_KEYS = [
    ("plain", "stage_ok", "stage_ok"),
    ("a comma", "stage_a,b", REFUSED),
    ("nothing after stage_", "stage_", REFUSED),
    ("NUL", "stage_a\x00b", REFUSED),
    ("100 characters", "stage_" + "k" * 94, "stage_" + "k" * 94),
    ("101 characters", "stage_" + "k" * 95, REFUSED),
]


def stages_in(database, org_id) -> list[str]:
    with database.session(org_id) as session:
        metrics = session.scalars(text("SELECT metrics FROM evaluation_trials")).all()
    return sorted(key for found in metrics for key in found if key.startswith("stage_"))


def trials_filtered(url: str):
    def door(api, database, runner, tmp_path, value):
        answer = api.get(url, query_string={"stagePassed": value})
        assert answer.status_code in (200, 400), answer.status_code
        return REFUSED if answer.status_code == 400 else value

    door.__name__ = f"stage_filter_of_{url}"
    return door


def stage_by_ingest(api, database, runner, tmp_path, key):
    answer = import_ndjson(api, ndjson(line("x-1", 1, 1.0, stages={key: 1.0})))
    assert answer.status_code in (201, 400), answer.status_code
    return outcome(answer.status_code == 201, stages_in(database, api.org.id))


def stage_by_cli(api, database, runner, tmp_path, key):
    job = harbor_job(tmp_path, rewards={"reward": 1.0, key: 1.0})
    result = cli(runner, "import-harbor", str(job), "--org", "Acme RL")
    return outcome(result.exit_code == 0, stages_in(database, api.org.id))


STAGE_DOORS = [trials_filtered("/api/v1/trials"), trials_filtered("/trials"), stage_by_ingest, stage_by_cli]


@pytest.mark.bad_input
@pytest.mark.parametrize("door", STAGE_DOORS, ids=lambda door: door.__name__)
@pytest.mark.parametrize(("case", "key", "held"), STAGE_KEYS, ids=[case for case, _, _ in STAGE_KEYS])
def test_a_stage_key_is_held_alike_by_every_door(acme_api, database, runner, tmp_path, door, case, key, held):
    # was: ingest and import-harbor stored stage_a,b and stage_, keys the stagePassed filter refuses
    assert door(acme_api, database, runner, tmp_path, key) == held


def test_a_stage_key_in_any_case_but_stage_is_no_stage_key(acme_api, database, runner, tmp_path):
    # The filter and ingest refuse Stage_x; Harbor's reward keys become stage_<key> (its mapping), so its Stage_x
    # is stage_Stage_x.
    for door in STAGE_DOORS[:3]:
        assert door(acme_api, database, runner, tmp_path, "Stage_x") == REFUSED, door.__name__
    assert stage_by_cli(acme_api, database, runner, tmp_path, "Stage_x") == "stage_Stage_x"


# Rewards


def rewards_in(database, org_id, external_ids: str) -> list[float | None]:
    """The rewards of the trials whose externalId is LIKE `external_ids` (each door imports its own)."""
    with database.session(org_id) as session:
        found = session.scalars(
            text("SELECT reward FROM evaluation_trials WHERE external_id LIKE :ids"), {"ids": external_ids}
        )
        return list(found)


def reward_filtered(url: str):
    def door(api, database, runner, tmp_path, value):
        answer = api.get(url, query_string={"minReward": value if isinstance(value, str) else json.dumps(value)})
        assert answer.status_code in (200, 400), answer.status_code
        return REFUSED if answer.status_code == 400 else float(value)

    door.__name__ = f"reward_filter_of_{url}"
    return door


def reward_by_ingest(api, database, runner, tmp_path, value):
    body = json.dumps(line("x-1", 1, 1.0)).replace('"reward": 1.0', f'"reward": {json.dumps(value)}')
    answer = import_ndjson(api, body)
    assert answer.status_code in (201, 400), answer.status_code
    return outcome(answer.status_code == 201, rewards_in(database, api.org.id, "x-1"))


def reward_by_cli(api, database, runner, tmp_path, value):
    result = cli(runner, "import-harbor", str(harbor_job(tmp_path, rewards={"reward": value})), "--org", "Acme RL")
    return outcome(result.exit_code == 0, rewards_in(database, api.org.id, "harbor:%"))


REWARD_DOORS = [reward_filtered("/api/v1/trials"), reward_filtered("/trials"), reward_by_ingest, reward_by_cli]
NAN = float("nan")
REWARDS = [
    # case, the value (a query string's is its text), what the filters, ingest and import-harbor hold
    ("0.5", 0.5, (0.5, 0.5, 0.5, 0.5)),
    ("0", 0, (0.0, 0.0, 0.0, 0.0)),
    # A string in JSON is no number; a query string's text is the number it spells.
    ('"0.5"', "0.5", (0.5, 0.5, REFUSED, REFUSED)),
    ("NaN", NAN, (REFUSED, REFUSED, REFUSED, REFUSED)),
    # Out of 0..1: refused, except from a Harbor verifier, whose number is held to 0..1 (docs: Harbor tasks).
    ("-0.1", -0.1, (REFUSED, REFUSED, REFUSED, 0.0)),
    ("1.5", 1.5, (REFUSED, REFUSED, REFUSED, 1.0)),
]


@pytest.mark.bad_input
@pytest.mark.parametrize(("case", "value", "held"), REWARDS, ids=[case for case, _, _ in REWARDS])
def test_a_reward_is_held_alike_by_every_door(acme_api, database, runner, tmp_path, case, value, held):
    # was: import-harbor stored NaN as reward 0 and took the string "0.5" that ingest refuses
    assert tuple(door(acme_api, database, runner, tmp_path, value) for door in REWARD_DOORS) == held


# Failure categories: given by an ingest line, looked for by the failureCategory filter (Harbor's is its exception
# type in snake_case, never text a user writes)

CATEGORIES = [
    ("plain", "wrong_answer", "wrong_answer"),
    ("spaces around", "  wrong_answer  ", "wrong_answer"),
    ("NUL", "wrong\x00answer", REFUSED),
    ("64 characters", "c" * 64, "c" * 64),
    ("65 characters", "c" * 65, REFUSED),
]


def category_filtered(url: str):
    def door(api, database, value):
        answer = api.get(url, query_string={"failureCategory": value})
        assert answer.status_code in (200, 400), answer.status_code
        return REFUSED if answer.status_code == 400 else value.strip()

    door.__name__ = f"category_filter_of_{url}"
    return door


def category_by_ingest(api, database, value):
    answer = import_ndjson(api, ndjson(line("x-1", 1, 0.5, failureCategory=value)))
    assert answer.status_code in (201, 400), answer.status_code
    with database.session(api.org.id) as session:
        stored = list(session.scalars(text("SELECT failure_category FROM evaluation_trials")))
    return outcome(answer.status_code == 201, stored)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "door",
    [category_filtered("/api/v1/trials"), category_filtered("/trials"), category_by_ingest],
    ids=lambda door: door.__name__,
)
@pytest.mark.parametrize(("case", "value", "held"), CATEGORIES, ids=[case for case, _, _ in CATEGORIES])
def test_a_failure_category_is_held_alike_by_every_door(acme_api, database, door, case, value, held):
    # was: ingest stored "  wrong_answer  " (which the filter, reading "wrong_answer", never finds) and took a NUL
    assert door(acme_api, database, value) == held
