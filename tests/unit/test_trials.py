"""Trials without a database: environments are deterministic, agents really act and really fail."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.errors import SpecError
from domain.outcome import LOG_CAP_CHARS, TrialOutcome
from domain.specs import validate_spec
from tests.factories import command_agent
from worker.environments import Environment, load
from worker.environments.admin_console import AdminConsole
from worker.trial import run_trial

ADMIN = {"kind": "builtin", "environment": "admin-console", "params": {}}
DESK = {"kind": "builtin", "environment": "support-desk", "params": {}}


def trial(spec=ADMIN, agent=None, **budget):
    options = {"world_seed": 7, "seed": 1, "max_steps": 12, "timeout_s": 10.0} | budget
    return run_trial(spec, agent or {"kind": "scripted", "skill": 1.0}, **options)


def test_same_world_seed_same_task_other_seed_other_task():
    first, again, other = (load(ADMIN).reset(seed).text for seed in (7, 7, 8))
    assert first == again and first != other


@pytest.mark.parametrize("spec", [ADMIN, DESK])
def test_a_perfect_agent_passes_every_stage(spec):
    outcome = trial(spec)
    assert outcome.status == "succeeded" and outcome.reward == 1.0 and outcome.failure_category is None
    env = load(spec)
    assert isinstance(env, Environment)
    assert set(outcome.stages) == set(env.stage_keys)
    assert all(key.startswith("stage_") for key in outcome.stages)


def test_admin_console_log_reads_like_the_spec():
    log = trial().log
    assert log.startswith("opened admin-console")
    assert "placed ORD-" in log


def test_steps_record_tool_command_and_observation():
    steps = trial().steps
    assert [s.number for s in steps] == list(range(1, len(steps) + 1))
    restock = next(s for s in steps if s.tool == "restock")
    assert restock.command.startswith('restock {"sku": "SKU-')
    assert "restocked SKU-" in restock.observation


def test_stored_steps_keep_the_seed_fields_and_the_record_beside_them():
    """What trial-{n}-trajectory.json carries as its steps (rendered from the stored trial, migration 0037)."""
    first = trial().stored_steps()[0]
    assert {"step", "tool", "command", "observation"} <= set(first)  # the seed's fields, the record beside them
    [call] = first["toolCalls"]
    assert first["source"] == "agent" and call["name"] == first["tool"]
    assert first["command"] == f"{call['name']} {json.dumps(call['arguments'])}" if call["arguments"] else call["name"]
    assert first["results"] == [{"callId": call["id"], "content": first["observation"]}]


def test_scripted_mistakes_give_categories_from_what_happened():
    seen: dict[str | None, TrialOutcome] = {}
    for seed in range(120):
        outcome = trial(agent={"kind": "scripted", "skill": 0.3}, world_seed=seed, seed=seed)
        seen.setdefault(outcome.failure_category, outcome)
    assert {"wrong_item", "wrong_customer", "wrong_quantity", "gave_up", "tool_error", "out_of_steps", None} <= set(
        seen
    )
    for category, outcome in seen.items():
        assert outcome.reward is not None  # every ended trial is scored
        assert (outcome.reward == 1) == (category is None)
    assert "step budget of 12 used up" in seen["out_of_steps"].log
    assert any(s.observation.startswith("error:") for s in seen["tool_error"].steps)


@pytest.mark.parametrize(
    ("order", "category"),
    [
        ({}, "wrong_customer"),  # the right SKU and quantity, for another customer
        ({"sku": "other"}, "wrong_item"),  # a wrong SKU is a wrong item whoever it is for
        ({"customer_id": "goal", "quantity": "more"}, "wrong_quantity"),
    ],
)
def test_admin_console_names_a_wrong_customer_apart_from_a_wrong_item(order, category):
    env = load(ADMIN)
    assert isinstance(env, AdminConsole)
    env.reset(7)
    goal, world = env.goal, env.world
    env.call("restock", {"sku": goal["sku"], "quantity": goal["restock"]})
    other_customer = next(c for c in sorted(world.customers) if c != goal["customer_id"])
    other_sku = next(s for s in sorted(world.stock) if s != goal["sku"])
    args = {
        "customer_id": goal["customer_id"] if order.get("customer_id") == "goal" else other_customer,
        "sku": other_sku if order.get("sku") == "other" else goal["sku"],
        "quantity": goal["quantity"] + (1 if order.get("quantity") == "more" else 0),
    }
    env.call("create_order", args)
    assert env.diagnose() == category


@pytest.mark.slow  # starts agent processes
def test_command_agent_that_solves_the_task():
    for spec in (ADMIN, DESK):
        outcome = trial(spec, command_agent("solver.py"))
        assert outcome.reward == 1.0, outcome.log


@pytest.mark.slow  # starts agent processes
@pytest.mark.parametrize(
    ("mode", "category", "log_text"),
    [
        ("crash", "agent_error", "exit code 3"),
        ("hang", "timeout", "did not answer within the trial's time budget"),
        ("garbage", "agent_protocol_error", "not JSON"),
        ("flood", "agent_protocol_error", "without a newline"),
        ("quit", "gave_up", "agent finished: nothing to do"),
    ],
)
@pytest.mark.fault
def test_misbehaving_command_agents_give_a_scored_trial_with_the_matching_category(mode, category, log_text):
    outcome = trial(agent=command_agent("misbehave.py", mode), timeout_s=1.5)
    assert outcome.failure_category == category
    assert outcome.status == "failed" and outcome.reward == 0.0  # scored from the untouched world
    assert log_text in outcome.log
    assert len(outcome.log) <= LOG_CAP_CHARS + 100


@pytest.mark.slow  # starts agent processes
def test_crashing_agent_stderr_reaches_the_log():
    assert "something broke inside the agent" in trial(agent=command_agent("misbehave.py", "crash")).log


@pytest.mark.slow  # starts agent processes
@pytest.mark.fault
def test_flooding_stderr_is_bounded_with_a_marker():
    outcome = trial(agent=command_agent("misbehave.py", "stderr-flood"))
    assert "[stderr truncated:" in outcome.log
    assert len(outcome.log) <= LOG_CAP_CHARS + 100


@pytest.mark.fault
def test_an_agent_that_cannot_start_is_an_agent_error():
    outcome = trial(agent={"kind": "command", "argv": ["/nonexistent/agent"]})
    assert outcome.failure_category == "agent_error" and outcome.reward == 0.0


@pytest.mark.fault
def test_an_environment_that_cannot_start_has_no_reward(monkeypatch):
    from worker.environments.admin_console import AdminConsole

    def broken_reset(self, world_seed):
        raise RuntimeError("world generator exploded")

    monkeypatch.setattr(AdminConsole, "reset", broken_reset)
    outcome = trial()
    assert (outcome.status, outcome.reward, outcome.failure_category) == ("error", None, "environment_error")
    assert "world generator exploded" in outcome.log


@pytest.mark.fault
def test_an_environment_that_raises_mid_episode_is_still_scored(monkeypatch):
    from worker.environments.admin_console import AdminConsole

    def broken_checkout(self, order_id):
        raise RuntimeError("payment service down")

    monkeypatch.setattr(AdminConsole, "tool_checkout", broken_checkout)
    outcome = trial()
    assert outcome.failure_category == "environment_error"
    assert outcome.stages["stage_inventory"] == 1.0 and outcome.stages["stage_checkout"] == 0.0
    assert "payment service down" in outcome.log


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "builtin", "environment": "nope"}, "spec.environment must be one of admin-console, support-desk"),
        ({"kind": "docker", "environment": "admin-console"}, "spec.kind must be 'builtin'"),
        ({"environment": "admin-console", "params": {"skus": 500}}, "params.skus must be an integer from 3 to 20"),
        ({"environment": "support-desk", "params": {"reference_prefix": "X"}}, "params.reference_prefix"),
        ({"environment": "admin-console", "extra": 1}, "unknown spec keys: extra"),
        ([], "spec must be a JSON object"),
    ],
)
def test_invalid_specs_are_refused_with_the_reason(spec, message):
    with pytest.raises(SpecError, match=message):
        validate_spec(spec)


def test_an_agents_message_reasoning_and_token_counts_are_recorded_with_its_steps():
    outcome = trial(agent=command_agent("talker.py"))
    call, closing = outcome.stored_steps()
    assert (call["tool"], call["message"], call["tokens"]) == ("list_inventory", "Let me look at the stock first.", {
        "prompt": 812, "completion": 40
    })  # fmt: skip
    assert call["reasoning"] == "The task names a SKU; its stock decides." and call["toolCalls"][0]["arguments"] == {}
    assert (closing["tool"], closing["message"], closing["tokens"]) == (None, "I only looked.", {"completion": 5})


@pytest.mark.bad_input
def test_a_message_that_is_not_text_is_a_protocol_error():
    outcome = trial(agent=command_agent("talker.py", "bad"))
    assert outcome.failure_category == "agent_protocol_error" and "message must be text" in outcome.log


def test_mcp_resources_keep_their_text_and_links_their_name_and_uri():
    from domain.trajectory import content_text

    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "found two"},
        {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "line 1"}},
        {"type": "resource", "resource": {"uri": "file:///logo.png", "mimeType": "image/png", "blob": "iVBOR"}},
        {"type": "resource_link", "name": "report", "uri": "file:///report.md", "mimeType": "text/markdown"},
        {"type": "image", "mimeType": "image/png", "data": "iVBOR"},
    ]
    assert content_text(parts).splitlines() == [
        "found two",
        "[resource file:///notes.txt text/plain]",
        "line 1",
        "[resource file:///logo.png image/png]",
        "[resource_link report file:///report.md text/markdown]",
        "[image image/png]",
    ]
