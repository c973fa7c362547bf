"""A new environment kind, agent kind and export format added through the registries alone: created from the
catalog's forms, run by the worker's own trial code, exported in its own format; an unknown format is refused.

Each registry is the one place its kind is added: the spec's model in domain.specs.VARIANTS, its environment in
worker.environments.ENVIRONMENTS (what `@environment_of` fills), its form in web.catalog_forms.SPEC_TEMPLATES (what
templates/catalog/environment-templates/ fills); the agent config's model in domain.agents.AGENTS, its agent in
worker.agents.AGENT_RUNTIMES (`@agent_of`), its form in web.catalog_forms.AGENT_TEMPLATES; the export format's
writer in queries.export_formats.EXPORT_FORMATS.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal

import pytest

from domain.agents import AGENTS, AgentModel
from domain.rules import Config, integer_from
from domain.specs import VARIANTS
from domain.worlds import Task
from queries.export_formats import EXPORT_FORMATS, ExportFormat
from tests.helpers import rows, work
from web.catalog_forms import AGENT_TEMPLATES, SPEC_TEMPLATES, Template
from worker.agents import AGENT_RUNTIMES, Agent, Finish, ToolCall, agent_of
from worker.environments import ENVIRONMENTS, ToolError, ToolResult, ToolSpec, TrialEnvironment, environment_of


class CounterSpec(Config):
    """A toy world: a counter the agent must bring to `target`."""

    kind: Literal["counter"]
    target: Annotated[int, integer_from(1, 10)] = 3


class Counter(TrialEnvironment):
    """The counter's trial: one tool, increment; one stage, the count is the target."""

    name = "counter"

    def __init__(self, spec: CounterSpec) -> None:
        self.spec, self.count = spec, 0
        self.log: list[Any] = []
        self.preamble: list[Any] = []

    def reset(self, world_seed: int) -> Task:
        self.log.append(f"opened counter (world {world_seed})")
        return Task(f"Bring the counter to {self.spec.target}.", {"target": self.spec.target})

    def tools(self) -> list[dict[str, Any]]:
        return [ToolSpec("increment", "Add one to the counter.").as_dict()]

    def call(self, tool: str, args: dict[str, Any], deadline: float | None = None) -> ToolResult:
        if tool != "increment":
            raise ToolError(f"unknown tool {tool!r}; available: increment")
        self.count += 1
        return ToolResult(f"count {self.count}", {"count": self.count})

    def score(self) -> dict[str, float]:
        return {"stage_count": 1.0 if self.count == self.spec.target else 0.0}

    def diagnose(self) -> str:
        return "miscounted"


class ClickerConfig(AgentModel):
    """A toy agent: clicks increment a fixed number of times."""

    kind: Literal["clicker"]
    clicks: Annotated[int, integer_from(0, 10)] = 3


class Clicker(Agent):
    def __init__(self, clicks: int) -> None:
        self.left = clicks

    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        self.target = task_data["target"]

    def act(self, observation: str | None, deadline: float) -> ToolCall | Finish:
        if self.left:
            self.left -= 1
            return ToolCall(tool="increment", args={})
        return Finish(summary=f"clicked, saw {observation}")


def counter_line(row: Any) -> dict[str, Any]:
    """The toy format: a rollout's reward and the counts its steps saw."""
    return {"reward": row.reward, "seen": [s["observation"] for s in row.steps if s.get("tool") == "increment"]}


@pytest.fixture
def toy_kinds(monkeypatch):
    """The counter kind, the clicker kind and the counter export format, registered for one test only."""
    monkeypatch.setitem(VARIANTS, "counter", CounterSpec)
    monkeypatch.setitem(ENVIRONMENTS, CounterSpec, None)  # taken out again after the test
    environment_of(CounterSpec)(lambda spec, place: Counter(spec))  # as a module of worker/environments/ registers
    monkeypatch.setitem(
        SPEC_TEMPLATES,
        "counter",
        Template("counter", "Counter", "Bring a counter to its target.", CounterSpec, {"kind": "counter"}),
    )
    monkeypatch.setitem(AGENTS, "clicker", ClickerConfig)
    monkeypatch.setitem(AGENT_RUNTIMES, ClickerConfig, None)
    agent_of(ClickerConfig)(lambda config, seed, sandbox, masker: Clicker(config.clicks))
    monkeypatch.setitem(
        AGENT_TEMPLATES,
        "clicker",
        Template("clicker", "Clicker", "Clicks a number of times.", ClickerConfig, {"kind": "clicker"}),
    )
    monkeypatch.setitem(EXPORT_FORMATS, "counter", ExportFormat(counter_line))


def form_post(api, url: str, data: dict[str, str]):
    body = {"submission_key": str(uuid.uuid4()), "source": "fields", **data}
    return api.client.post(url, data=body, headers={"X-CSRFToken": api.token})


def test_a_toy_kind_registered_alone_is_created_run_and_exported(api, database, toy_kinds):
    page = api.get("/environments/new?template=counter")
    assert page.status_code == 200 and 'name="spec.target"' in page.text  # the form drawn from the spec's model
    made = form_post(api, "/environments/new?template=counter", {"name": "counter", "spec.target": "3"})
    assert made.status_code == 303, made.text
    (environment,) = api.get("/api/v1/environments").json
    (version,) = rows(database, api.org.id, "SELECT id, spec FROM environment_versions")
    assert version.spec == {"kind": "counter", "target": 3}  # checked by its model, stored as its JSON
    for name, clicks in (("exact", "3"), ("eager", "4")):
        data = {"name": name, "attemptCount": "2", "agent.clicks": clicks}
        assert form_post(api, "/evaluators/new?template=clicker", data).status_code == 303
    for config in api.get("/api/v1/evaluator-configs").json:
        started = api.post(
            "/api/v1/evaluation-runs", {"environmentVersionId": str(version.id), "evaluatorConfigId": config["id"]}
        )
        assert started.status_code == 202, started.json

    assert work(database) == 2  # the worker's own loop and trial code run both
    trials = rows(
        database,
        api.org.id,
        "SELECT c.name, t.status, t.reward, t.failure_category, t.metrics FROM evaluation_trials t "
        "JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id "
        "JOIN evaluator_configs c ON c.organization_id = r.organization_id AND c.id = r.evaluator_config_id "
        "ORDER BY c.name, t.trial_number",
    )
    assert [(t.name, t.status, t.reward, t.failure_category, t.metrics) for t in trials] == [
        ("eager", "failed", 0.0, "miscounted", {"stage_count": 0.0}),
        ("eager", "failed", 0.0, "miscounted", {"stage_count": 0.0}),
        ("exact", "succeeded", 1.0, None, {"stage_count": 1.0}),
        ("exact", "succeeded", 1.0, None, {"stage_count": 1.0}),
    ]

    exported = api.get("/api/v1/rollouts", query_string={"format": "counter", "kind": "successful"})
    assert exported.status_code == 200
    assert (
        exported.headers["Content-Disposition"] == "attachment; filename=agentforge-rollouts-successful.counter.jsonl"
    )
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert lines == [{"reward": 1.0, "seen": ["count 1", "count 2", "count 3"]}] * 2
    export_page = api.get(f"/environments/{environment['id']}/export")
    assert "agentforge-rollouts-successful.counter.jsonl" in export_page.text  # the pages link the new variant


@pytest.mark.bad_input
def test_an_unknown_export_format_is_refused_with_the_known_ones(api):
    answer = api.get("/api/v1/rollouts", query_string={"format": "counter"})  # not registered in this test
    assert answer.status_code == 400
    assert answer.json["error"] == "invalid format"
    assert answer.json["detail"] == "format must be one of atif-shaped, atif, trl, not 'counter'"
    assert answer.json["valid"] == ["atif-shaped", "atif", "trl"]
