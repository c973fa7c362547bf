"""Page forms generated from the pydantic models the API validates with, so a field's label, help, bounds, choices
and refusal have one source.

`model_fields(schema)` reads a model's JSON schema (the one the OpenAPI document publishes) into ModelFields, each
with a widget; `posted_object(fields, form)` turns the posted form back into the JSON object the API would have
been sent (a number that does not parse is passed on as text, so the model refuses it in its own words); the page
then hands that object to the same validation and write as the API, and `refused_path` finds the field a refusal
names ("spec.params.skus must be …" → `params.skus`) to show it in place.

Secret `env` values are write-only: a form shows each name with an empty password field; left empty, a value the
row already holds is kept (`kept`), never sent back to the browser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

ENV_ROWS = 3  # empty name/value rows an env editor offers beyond the names it holds


@dataclass(frozen=True)
class ModelField:
    """One input of a generated form: its JSON path (dotted; the input's name), label, help and widget.

    Widgets: `fixed` (a const, hidden), `choice`, `flag`, `integer`, `number`, `text`, `textarea`, `lines` (a list
    of strings, one per line), `json` (an object as JSON text), `env` (secret name/value rows) and `group` (a
    nested object's `children`).
    """

    path: str
    key: str
    label: str
    help: str
    widget: str
    required: bool
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False  # the minimum itself is refused (exclusiveMinimum)
    max_length: int | None = None
    placeholder: Any = None  # the default of a field in an optional group, shown but not sent
    choices: tuple[Any, ...] = ()
    children: tuple[ModelField, ...] = ()

    @property
    def input_id(self) -> str:
        """The input's id: its path with dots as dashes."""
        return "f-" + self.path.replace(".", "-")

    @property
    def bounds(self) -> str:
        """The bounds in words, e.g. "from 3 to 20", "" when it has none."""
        if self.minimum is None and self.maximum is None:
            return ""
        low = "" if self.minimum is None else f"{'above' if self.above else 'from'} {_bound(self.minimum)}"
        high = "" if self.maximum is None else f"{'to' if low else 'at most'} {_bound(self.maximum)}"
        return " ".join(part for part in (low, high) if part)

    def shown(self, values: Mapping[str, Any]) -> Any:
        """What the input shows: the posted or current value, else the default (as the widget writes it)."""
        value = values.get(self.path, self.default)
        if value is None:
            return ""
        if self.widget == "lines" and isinstance(value, list):
            return "\n".join(str(item) for item in value)
        if self.widget == "pairs" and isinstance(value, dict):
            return "\n".join(f"{name}={text}" for name, text in sorted(value.items()))
        if self.widget == "json" and not isinstance(value, str):
            return json.dumps(value, indent=2, ensure_ascii=False)
        return value


def _bound(value: float) -> str:
    """A bound as written: an integer in full (a step's bound is 9223372036854775807, not 9.22337e+18)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


WORDS = {
    "cpu": "CPU",
    "s": "(seconds)",
    "mb": "(MB)",
    "url": "URL",
    "api": "API",
    "cwd": "working directory",
    "argv": "command",
}


def _humane(key: str) -> str:
    """A label from a field's key: timeoutS → "Timeout (seconds)", baseUrl → "Base URL"."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key).replace("_", " ").lower().split()
    text = " ".join(WORDS.get(word, word) for word in words)
    return text[:1].upper() + text[1:]


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema as the OpenAPI document has it (a body model's, embedded schemas' $defs hoisted)."""
    _, top = models_json_schema([(model, "validation")])
    definitions = top.get("$defs", {})
    return {**definitions[model.__name__], "$defs": definitions}


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**root["$defs"][ref.removeprefix("#/$defs/")], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _unwrap(schema: dict[str, Any], root: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema of an optional property's value (anyOf […, null]) and whether null is allowed."""
    parts = schema.get("anyOf")
    if isinstance(parts, list):
        values = [part for part in parts if part.get("type") != "null"]
        if len(values) == 1:
            outer = {k: v for k, v in schema.items() if k != "anyOf"}
            return {**_resolve(values[0], root), **outer}, len(values) < len(parts)
    return _resolve(schema, root), False


def _widget(schema: dict[str, Any], key: str = "") -> str:
    kind = schema.get("type")
    if kind == "boolean":
        return "flag"
    if "const" in schema:
        return "fixed"
    if "enum" in schema:
        return "choice"
    if kind in ("integer", "number"):
        return kind
    if kind == "array":
        return "lines"
    if kind == "object":
        if "properties" in schema:
            return "group"
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("type") == "string":
            return "env" if key == "env" else "pairs"  # secret rows, or plain NAME=value lines
        return "json"
    if kind == "string" and (schema.get("contentMediaType") == "text/plain" or schema.get("maxLength", 0) > 200):
        return "textarea"
    return "text"


def model_fields(
    schema: dict[str, Any],
    prefix: str = "",
    root: dict[str, Any] | None = None,
    *,
    leave_out: tuple[str, ...] = (),
    in_optional: bool = False,
) -> list[ModelField]:
    """The inputs of an object's JSON schema (pydantic's, with $defs), in the model's field order, but for the
    `leave_out` keys. Inside an optional group (limits) defaults are placeholders: an untouched group is not sent."""
    root = root or schema
    required = set(schema.get("required", ()))
    fields = []
    for key, raw in schema.get("properties", {}).items():
        if key in leave_out:
            continue
        value, nullable = _unwrap(raw, root)
        widget = _widget(value, key)
        path = f"{prefix}{key}"
        help_text = raw.get("description") or value.get("description") or ""
        above = "exclusiveMinimum" in value or "gt" in value
        minimum = value.get("exclusiveMinimum", value.get("gt", value.get("minimum")))
        default = raw.get("default", value.get("default"))
        if widget == "fixed":
            default = value["const"]
        fields.append(
            ModelField(
                path=path,
                key=key,
                label=_humane(key),
                help=help_text,
                widget=widget,
                required=key in required and not nullable,
                default=None if in_optional else default,
                placeholder=default if in_optional else None,
                minimum=minimum,
                maximum=value.get("maximum"),
                above=above,
                max_length=value.get("maxLength"),
                choices=tuple(value.get("enum", ())),
                children=tuple(model_fields(value, f"{path}.", root, in_optional=nullable or in_optional))
                if widget == "group"
                else (),
            )
        )
    return fields


def flat(fields: list[ModelField] | tuple[ModelField, ...]) -> list[ModelField]:
    """Every field, a group's children after it."""
    return [each for f in fields for each in (f, *flat(f.children))]


class FieldRefused(ValueError):
    """A posted input that is not what its widget reads (JSON that does not parse): the path and why."""

    def __init__(self, path: str, says: str) -> None:
        super().__init__(f"{path} {says}")
        self.path, self.says = path, says


def _number(text: str, widget: str) -> Any:
    """A posted number as JSON would carry it; text that is not one is passed on for the model to refuse."""
    try:
        return int(text) if widget == "integer" and re.fullmatch(r"[+-]?\d+", text) else float(text)
    except ValueError:
        return text


def _env(form: Mapping[str, Any], path: str, kept: Mapping[str, str]) -> dict[str, str]:
    """The env rows: a name with a value, or a kept name left empty (the value the row already holds)."""
    env: dict[str, str] = {}
    index = 0
    while f"{path}.name.{index}" in form:
        name = str(form.get(f"{path}.name.{index}", "")).strip()
        value = str(form.get(f"{path}.value.{index}", ""))
        index += 1
        if not name:
            if value:
                raise FieldRefused(path, f"row {index} has a value but no name")
            continue
        if value == "" and name in kept:
            value = kept[name]
        env[name] = value
    return env


def _pairs(path: str, text: str) -> dict[str, str]:
    """NAME=value lines as an object; FieldRefused for a line without a name and an "=" """
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, equals, value = line.partition("=")
        if not equals or not name.strip():
            raise FieldRefused(path, f"line {number} is not NAME=value")
        pairs[name.strip()] = value
    return pairs


def posted_object(
    fields: list[ModelField] | tuple[ModelField, ...], form: Mapping[str, Any], kept: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON object a posted form stands for: empty optional inputs left out (the model's defaults apply), a
    required one sent empty (so the model's refusal names it). FieldRefused for JSON text that does not parse."""
    obj: dict[str, Any] = {}
    for f in fields:
        raw = form.get(f.path)
        if isinstance(raw, str):
            raw = raw.replace("\r\n", "\n")  # browsers send a text area's lines with CRLF
        text = raw.strip() if isinstance(raw, str) else ""
        if f.widget == "fixed":
            obj[f.key] = f.default
        elif f.widget == "group":
            inner = posted_object(f.children, form, kept)
            if inner or f.required:
                obj[f.key] = inner
        elif f.widget == "flag":
            if raw is not None:
                obj[f.key] = raw in ("on", "true", "1")
            elif f.required:
                obj[f.key] = False
        elif f.widget == "env":
            env = _env(form, f.path, kept or {})
            if env:
                obj[f.key] = env
        elif not text:
            if f.required:
                obj[f.key] = "" if f.widget in ("text", "textarea", "choice") else None
        elif f.widget in ("integer", "number"):
            obj[f.key] = _number(text, f.widget)
        elif f.widget == "lines":
            obj[f.key] = [line.strip() for line in text.splitlines() if line.strip()]
        elif f.widget == "pairs":
            obj[f.key] = _pairs(f.path, text)
        elif f.widget == "json":
            try:
                obj[f.key] = json.loads(text)
            except json.JSONDecodeError as error:
                raise FieldRefused(f.path, f"is not JSON ({error.msg} at line {error.lineno})") from None
        else:
            obj[f.key] = raw if f.widget == "textarea" else text
    return obj


def refused_path(detail: str, where: str, fields: list[ModelField] | tuple[ModelField, ...]) -> str | None:
    """The path of the input a refusal names ("spec.params.skus must be …" with where="spec" → params.skus), the
    nearest enclosing input when the refusal names something inside one, None when it names none."""
    first = detail.split(" ", 1)[0].rstrip(":,")
    if where:
        if not first.startswith(f"{where}."):
            return None
        first = first.removeprefix(f"{where}.")
    paths = {f.path for f in flat(fields)}
    parts = first.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in paths:
            return candidate
    return None


@dataclass
class FormErrors:
    """Refusals of a generated form: by input path, and those that name no input (shown above the form)."""

    by_path: dict[str, str] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)

    def add(self, path: str | None, message: str) -> None:
        """Keep `message` at `path` (or above the form)."""
        if path is None:
            self.general.append(message)
        else:
            self.by_path.setdefault(path, message)

    def __bool__(self) -> bool:
        return bool(self.by_path or self.general)
