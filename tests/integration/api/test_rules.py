"""One validation library (domain.rules) at every boundary: the disagreements it ended, one test each."""

from __future__ import annotations

import re
import uuid

import pytest

from domain import rules
from domain.errors import SpecError
from domain.rules import UUID_RULE, Refused, integer_from
from domain.specs import validate_spec
from importers.ingest import IngestError, parse_trial
from tests.factories import make_catalog
from tests.helpers import line
from tests.paths import ROOT

SCRIPTED = {"kind": "scripted", "skill": 1.0}
IMPORTED = {"kind": "external", "name": "other-harness-agent"}


# The library itself (DB-free)


@pytest.mark.parametrize(("value", "held"), [(4, 4), (4.0, 4), (1, 1), (8, 8)])
def test_an_integer_is_a_json_number_without_a_fraction(value, held):
    got = integer_from(1, 8).apply(value)
    assert got == held and type(got) is int


@pytest.mark.parametrize("value", ["3", "4.0", True, 4.5, None, [1], float("nan"), float("inf"), 0, 9])
def test_an_integer_is_never_a_string_a_boolean_or_out_of_range(value):
    with pytest.raises(Refused, match="must be an integer from 1 to 8"):
        integer_from(1, 8).apply(value)


@pytest.mark.parametrize(("text", "held"), [("3", 3), (" 4.0 ", 4), ("8", 8)])
def test_a_query_string_integer_is_read_then_held_to_the_same_rule(text, held):
    assert integer_from(1, 8).apply_text(text) == held


@pytest.mark.parametrize("text", ["1.5", "x", "²", "٣", "", "9", "0x3"])
def test_a_query_string_integer_is_refused_like_a_json_one(text):
    with pytest.raises(Refused):
        integer_from(1, 8).apply_text(text)


def test_one_uuid_policy_no_urn_no_braces():
    value = uuid.uuid4()
    for accepted in (str(value), value.hex, str(value).upper(), f" {value}\t"):
        assert UUID_RULE.apply(accepted) == value and UUID_RULE.apply_text(accepted) == value
    for refused in (f"urn:uuid:{value}", f"{{{value}}}", str(value)[:-1], "", 7, None):
        with pytest.raises(Refused, match="must be a UUID"):
            UUID_RULE.apply(refused)


def test_a_reward_is_finite_from_0_to_1():
    assert rules.REWARD.apply(0) == 0 and rules.REWARD.apply_text("0.5") == 0.5
    for refused in (-0.1, 1.5, float("nan"), "0.5", True):
        with pytest.raises(Refused):
            rules.REWARD.apply(refused)
    with pytest.raises(Refused):
        rules.REWARD.apply_text("nan")


def test_text_refuses_nul_and_over_long_text_and_strips():
    rule = rules.text(5, required=True)
    assert rule.apply("  abc ") == "abc"
    for refused in ("a\x00b", "abcdef", "   ", 5):
        with pytest.raises(Refused):
            rule.apply(refused)


# The four reported disagreements


def test_spec_params_follow_the_one_integer_policy_like_max_steps():
    # was: params.skus 4.0 refused (domain) while maxSteps 4.0 was accepted (API)
    params = validate_spec({"environment": "admin-console", "params": {"skus": 4.0}})["params"]
    assert params["skus"] == 4 and type(params["skus"]) is int
    with pytest.raises(SpecError, match=r"params\.skus must be an integer from 3 to 20"):
        validate_spec({"environment": "admin-console", "params": {"skus": "4"}})


def test_max_steps_follows_the_same_policy(api):
    body = {"name": "four", "agent": SCRIPTED, "attemptCount": 2.0}
    created = api.post("/api/v1/evaluator-configs", {**body, "maxSteps": 4.0})
    assert created.status_code == 201 and created.json["maxSteps"] == 4 and created.json["attemptCount"] == 2
    refused = api.post("/api/v1/evaluator-configs", {**body, "name": "five", "maxSteps": "4"})
    assert refused.status_code == 400 and refused.json["error"] == "invalid maxSteps"


@pytest.mark.parametrize(("field", "value"), [("attempt", "3"), ("reward", "1"), ("seed", "7"), ("externalId", 7)])
def test_ingest_refuses_strings_for_numbers_like_the_api(field, value):
    # was: ingest attempt "3" accepted while the API's attemptCount "3" was refused
    with pytest.raises(IngestError) as refused:
        parse_trial({**line("x-1", 1, 1.0), field: value}, 1)
    assert refused.value.field == field


def test_ingest_takes_the_integer_3_0_as_3():
    assert parse_trial({**line("x-1", 3, 1.0), "attempt": 3.0}, 1).trial.attempt == 3


@pytest.mark.parametrize("path", ["/trials", "/capability-gap", "/api/v1/trials", "/api/v1/rollouts"])
def test_every_query_parameter_takes_one_uuid_rule(client, auth, member, path):
    # was: /trials?environmentId=urn:uuid:… accepted, /capability-gap?environmentId=urn:uuid:… refused
    auth.login(member.email)
    value = uuid.uuid4()
    for refused in (f"urn:uuid:{value}", f"{{{value}}}"):
        response = client.get(path, query_string={"environmentId": refused})
        assert response.status_code == 400, (path, refused)
        assert "environmentId must be a UUID" in response.text
    assert client.get(path, query_string={"environmentId": str(value)}).status_code == 200


def test_the_trial_timeout_ceiling_is_defined_once():
    sources = [p for p in ROOT.glob("*/**/*.py") if ".venv" not in p.parts and "tests" not in p.parts]
    sources += [ROOT / "app.py", ROOT / "cli.py"]
    defined = [p.name for p in sources if re.search(r"^DEFAULT_MAX_TRIAL_TIMEOUT_S\s*=", p.read_text(), re.M)]
    assert defined == ["limits.py"]


# Rules that need the database: in writes/, the same for the page and the API


@pytest.mark.bad_input
def test_the_api_refuses_a_run_of_an_imported_evaluator_like_the_page(api, database, member, count_rows):
    # was: 202 and a queued run no worker could run (the page answered 422)
    imported = make_catalog(database, member.org.id, IMPORTED, attempt_count=2, config_name="aaa-imported")
    response = api.post(
        "/api/v1/evaluation-runs",
        {"environmentVersionId": str(imported.version_id), "evaluatorConfigId": str(imported.config_id)},
    )
    assert response.status_code == 422
    assert response.json["error"] == "invalid evaluatorConfigId"
    assert "aaa-imported is imported" in response.json["detail"]
    assert count_rows("evaluation_runs") == 0


def test_attempt_count_is_checked_once_per_request(api, database, member, monkeypatch):
    catalog = make_catalog(database, member.org.id, SCRIPTED, attempt_count=2)
    calls = []
    apply = rules.Rule.apply

    def counted(self, value):
        if self is rules_attempts():
            calls.append(value)
        return apply(self, value)

    monkeypatch.setattr(rules.Rule, "apply", counted)
    response = api.post(
        "/api/v1/evaluation-runs",
        {
            "environmentVersionId": str(catalog.version_id),
            "evaluatorConfigId": str(catalog.config_id),
            "attemptCount": 3,
        },
    )
    assert response.status_code == 202 and response.json["attemptCount"] == 3
    assert calls == [3]


def rules_attempts():
    from domain.scoring import ATTEMPT_COUNT

    return ATTEMPT_COUNT


def test_every_page_module_is_under_the_contract_that_pages_never_import_the_api():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    pages = next(c for c in contracts if c.get("forbidden_modules") == ["blueprints.api"])
    modules = {f"blueprints.{p.stem}" for p in (ROOT / "blueprints").glob("*.py") if p.stem != "__init__"}
    assert set(pages["source_modules"]) == modules
