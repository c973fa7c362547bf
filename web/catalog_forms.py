"""The catalog's create forms (environments, versions, evaluator configurations), generated from the API's models.

A template names a spec or agent variant (domain.specs.VARIANTS, domain.agents.AGENTS) and an example to start
from; `SPEC_TEMPLATES` and `AGENT_TEMPLATES` are the registries of the catalog's forms, read from the JSON files of
templates/catalog/environment-templates/ and evaluator-templates/ (a stored spec is edited with the first template
of its model that fits it). `CatalogForm` holds one form's inputs: the top-level body model's
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
from domain.install import shipped_folder
from domain.rules import refusals
from domain.specs import variant_of
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


@dataclass(frozen=True)
class Template:
    """Where a new environment or evaluator starts: a variant's model and an example of it (a file of
    templates/catalog/environment-templates/ or evaluator-templates/, `<key>.json`). A stored spec of the model is
    edited with the first of its templates that `fits` it."""

    key: str
    title: str
    summary: str
    model: type[BaseModel]
    example: dict[str, Any]

    def fits(self, spec: Mapping[str, Any]) -> bool:
        """Whether the stored spec has the example's shape: every key of it, at every depth of objects (an MCP
        server scored by a tool has verifier.tool, one scored by a command verifier.command)."""
        return _has_shape(spec, self.example)


def _has_shape(value: Any, example: Mapping[str, Any]) -> bool:
    if not isinstance(value, Mapping):
        return False
    return all(
        key in value and (not isinstance(shape, Mapping) or _has_shape(value[key], shape))
        for key, shape in example.items()
    )


def _templates(folder: str, model_of: Callable[[dict[str, Any]], type[BaseModel] | None]) -> dict[str, Template]:
    """The templates of one folder of templates/catalog/, in their `position` order: each file's title, summary
    and example, and the model its example is a variant of."""
    templates = []
    for path in sorted((shipped_folder("templates") / "catalog" / folder).glob("*.json")):
        written = json.loads(path.read_text(encoding="utf-8"))
        model = model_of(written["example"])
        if model is None:
            raise LookupError(f"{path}: its example is no variant the domain knows")
        template = Template(path.stem, written["title"], written["summary"], model, written["example"])
        templates.append((written["position"], template))
    return {t.key: t for _, t in sorted(templates, key=lambda pair: (pair[0], pair[1].key))}


# The registries of the catalog's forms: a new kind is one more file in the folder.
SPEC_TEMPLATES = _templates("environment-templates", variant_of)
AGENT_TEMPLATES = _templates("evaluator-templates", lambda example: AGENTS.get(example.get("kind", "")))


def template_of_spec(spec: Mapping[str, Any]) -> Template | None:
    """The template a stored spec is edited with: the first of its model that fits it, else the first of its model
    (None for a kind without one, such as imported results or a Harbor task, which are not edited here)."""
    model = variant_of(spec)
    mine = [t for t in SPEC_TEMPLATES.values() if t.model is model]
    return next((t for t in mine if t.fits(spec)), mine[0] if mine else None)


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
