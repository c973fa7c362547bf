"""The catalog's create forms (environments, versions, evaluator configurations), generated from the API's models.

A template names a spec or agent variant (domain.specs.VARIANTS, domain.agents.AGENTS) and an example to start
from; `SPEC_TEMPLATES` and `AGENT_TEMPLATES` are the registries of the catalog's forms (a stored spec is edited with
the first template of its model that fits it). `CatalogForm` holds one form's inputs: the top-level body model's
(EnvironmentCreate, EvaluatorConfigCreate, without the nested config) and the variant's under `spec.` or `agent.`; it
reads the posted form back into the API's JSON body and places every refusal next to the input it names, in the
page's words.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from domain.agents import AGENTS
from domain.rules import refusals
from domain.specs import VARIANTS, variant_of
from web.model_forms import (
    FieldRefused,
    FormErrors,
    ModelField,
    flat,
    in_page_words,
    model_fields,
    posted_object,
    refused_path,
    schema_of,
)
from web.validation import ApiModel, every_refusal, parse


def _any_spec(spec: Mapping[str, Any]) -> bool:
    return True


def _scored_by_command(spec: Mapping[str, Any]) -> bool:
    verifier = spec.get("verifier")
    return isinstance(verifier, dict) and "command" in verifier


@dataclass(frozen=True)
class Template:
    """Where a new environment or evaluator starts: a variant's model and an example of it; `fits` tells the stored
    specs of that model it edits (where one model has several templates: an MCP server scored by a tool or a
    command)."""

    key: str
    title: str
    summary: str
    model: type[BaseModel]
    example: dict[str, Any]
    fits: Callable[[Mapping[str, Any]], bool] = _any_spec


SPEC_TEMPLATES = {
    t.key: t
    for t in (
        Template(
            "admin-console",
            "Built-in admin console",
            "Restock a SKU, then place a customer's order, over a seeded catalog; scored in three stages.",
            VARIANTS["admin-console"],
            {"kind": "builtin", "environment": "admin-console"},
        ),
        Template(
            "support-desk",
            "Built-in support desk",
            "Triage, route and answer seeded tickets; scored in three stages.",
            VARIANTS["support-desk"],
            {"kind": "builtin", "environment": "support-desk"},
        ),
        Template(
            "mcp",
            "MCP server, scored by a tool",
            "Any MCP server over stdio, started in each trial's sandbox; a tool of the server scores the trial.",
            VARIANTS["mcp"],
            {"kind": "mcp", "command": ["python", "-m", "my_mcp_server"], "verifier": {"tool": "verify"}},
            lambda spec: not _scored_by_command(spec),
        ),
        Template(
            "command",
            "MCP server, scored by a command",
            "An MCP server whose trials a command scores, run in the sandbox after the agent stops (its JSON on "
            "stdout holds the reward and stage_* results).",
            VARIANTS["mcp"],
            {
                "kind": "mcp",
                "command": ["python", "-m", "my_mcp_server"],
                "verifier": {"command": ["python", "verify.py"]},
            },
            _scored_by_command,
        ),
    )
}

AGENT_TEMPLATES = {
    t.key: t
    for t in (
        Template(
            "scripted",
            "Scripted agent",
            "The built-in simulated agent: acts through the environment's tools with a skill level.",
            AGENTS["scripted"],
            {"kind": "scripted", "skill": 0.8},
        ),
        Template(
            "command",
            "Command agent",
            "Any program speaking JSON lines over stdin and stdout, run in each trial's sandbox.",
            AGENTS["command"],
            {"kind": "command", "argv": ["python", "my_agent.py"]},
        ),
        Template(
            "openai-chat",
            "OpenAI-compatible model",
            "A model behind an OpenAI-compatible chat-completions server (vLLM, SGLang, Ollama, llama.cpp, hosted "
            "APIs), called with the environment's tools. It reaches the server from the trial's sandbox, so it "
            "needs network access.",
            AGENTS["openai-chat"],
            {"kind": "openai-chat", "baseUrl": "http://127.0.0.1:8000/v1", "model": ""},
        ),
        Template(
            "oracle",
            "Harbor task oracle",
            "Runs a Harbor task's own solution/solve.sh: the check that the task can be solved (on other "
            "environments its trials end agent_error).",
            AGENTS["oracle"],
            {"kind": "oracle"},
        ),
    )
}


def template_of_spec(spec: Mapping[str, Any]) -> Template | None:
    """The template a stored spec is edited with: the first of its model that fits it (None for a kind without one,
    such as imported results or a Harbor task, which are not edited here)."""
    model = variant_of(spec)
    return next((t for t in SPEC_TEMPLATES.values() if t.model is model and t.fits(spec)), None)


def values_under(
    obj: Mapping[str, Any], prefix: str, fields: list[ModelField] | tuple[ModelField, ...]
) -> dict[str, Any]:
    """A JSON object as the values of `fields` (paths under `prefix`): a group's members by their own paths."""
    values: dict[str, Any] = {}
    for f in fields:
        if f.key not in obj:
            continue
        value = obj[f.key]
        if f.widget == "group" and isinstance(value, dict):
            values.update(values_under(value, f"{f.path}.", f.children))
        else:
            values[f.path] = value
    return values


def posted_values(fields: list[ModelField], form: Mapping[str, Any]) -> dict[str, Any]:
    """What the inputs show when a refused form is drawn again: the posted text, env names without values."""
    values: dict[str, Any] = {}
    for f in flat(fields):
        if f.widget == "env":
            names = [str(form.get(f"{f.path}.name.{i}", "")).strip() for i in range(64) if f"{f.path}.name.{i}" in form]
            values[f.path] = dict.fromkeys(name for name in names if name)
        elif f.widget == "flag" or f.path in form:
            value = form.get(f.path)
            values[f.path] = value.replace("\r\n", "\n") if isinstance(value, str) else value
    return values


@dataclass
class CatalogForm:
    """One create form: the body model's inputs, then the config variant's under `nested` (spec or agent).

    Every refusal is kept at the input it names, in the page's words (the JSON view's in the API's, as that view
    speaks the API's keys): `body` keeps the inputs that cannot be read, `check_body` every bad field of the body,
    `check_config` every bad field of the config, so one submit shows them all."""

    top: list[ModelField]
    nested_key: str
    nested: list[ModelField]
    errors: FormErrors = field(default_factory=FormErrors)
    posted: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, body_model: type[BaseModel], nested_key: str, template: Template) -> CatalogForm:
        """The form of `body_model` (its `nested_key` field left out) with `template`'s variant under it."""
        top = model_fields(schema_of(body_model), leave_out=(nested_key,))
        return cls(top, nested_key, model_fields(schema_of(template.model), f"{nested_key}."))

    @property
    def fields(self) -> list[ModelField]:
        """Every input of the form, the body's first."""
        return [*self.top, *self.nested]

    @property
    def json_view(self) -> bool:
        """Whether the nested config came from the JSON view."""
        return self.posted.get("source") == "json"

    def body(self, form: Mapping[str, Any], kept: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The API body the posted form stands for (the nested config from its inputs, or from the JSON view when
        `source` is json); an input that cannot be read is refused in place and left out."""
        self.posted = form
        unreadable: list[FieldRefused] = []
        body = posted_object(self.top, form, refused=unreadable)
        if self.json_view:
            text = str(form.get("config_json", "")).strip()
            try:
                body[self.nested_key] = json.loads(text)
            except json.JSONDecodeError as error:
                self.errors.add("config_json", f"is not JSON ({error.msg} at line {error.lineno})")
        else:
            body[self.nested_key] = posted_object(self.nested, form, kept, unreadable)
        for refused in unreadable:
            self.refuse(f"{refused.path} {refused.says}", path=refused.path)
        return body

    def check_body(self, model: type[ApiModel], body: Mapping[str, Any], stand_in: Any = None, **context: Any) -> Any:
        """The body's own fields as `model` (the nested config, checked apart, replaced by `stand_in` when the model
        needs one); None with every bad field refused in place."""
        top = {key: value for key, value in body.items() if key != self.nested_key}
        if stand_in is not None:
            top[self.nested_key] = stand_in
        refusals = every_refusal(model, top, **context)
        for invalid in refusals:
            self.refuse(invalid.detail)
        return None if refusals else parse(model, top, **context)

    def check_config(
        self, model: type[BaseModel], config: Any, check: Callable[[Any], dict[str, Any]], refused: type[Exception]
    ) -> dict[str, Any] | None:
        """The nested config as `check` (the API's validation) normalises it; None with every bad field refused in
        place (the JSON view's one refusal in the API's words), or nothing when the JSON view did not parse."""
        if "config_json" in self.errors.by_path:
            return None
        if not self.json_view:
            try:
                model.model_validate(config)
            except ValidationError as error:
                for sentence in refusals(error, self.nested_key, model):
                    self.refuse(sentence)
                return None
        try:
            return check(config)
        except refused as error:
            self.refuse(str(error))
            return None

    def refuse(self, detail: str, *, path: str | None = None) -> None:
        """Keep a refusal ("<path> <what is wrong>") next to the input it names, in the page's words (in the JSON
        view when that was used and it is about the config), else above the form as it is."""
        if self.json_view and detail.startswith(self.nested_key):
            self.errors.add("config_json", detail)
            return
        path = path or refused_path(detail, "", self.fields)
        found = next((f for f in flat(self.fields) if f.path == path), None)
        if found is None:
            self.errors.add(None, detail)
            return
        named, _, says = detail.partition(" ")
        if named.rstrip(":,") != path:  # about a part inside the input (a key of its JSON)
            says = f"{named.removeprefix(self.nested_key + '.')} {says}".strip()
        self.errors.add(path, in_page_words(found, says, self._empty(found)))

    def say(self, path: str, message: str) -> None:
        """Keep a message already in the page's words at the input `path`."""
        self.errors.add(path, message)

    def _empty(self, f: ModelField) -> bool:
        """Whether nothing was entered in the input."""
        value = self.posted.get(f.path)
        return value is None or (isinstance(value, str) and not value.strip())
