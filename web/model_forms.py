"""Page forms generated from the pydantic models the API validates with, so a field's label, help, bounds, choices
and refusal have one source.

`model_fields(schema)` reads a model's JSON schema (the one the OpenAPI document publishes) into ModelFields, each
with a widget; `posted_object(fields, form)` turns the posted form back into the JSON object the API would have
been sent (a number that does not parse is passed on as text, so the model refuses it in its own words); the page
then hands that object to the same validation and write as the API, and `refused_path` finds the field a refusal
names ("spec.params.skus must be …" → `params.skus`) to show it in place, in the page's words (`in_page_words`:
"SKUs must be a whole number from 3 to 20"); `FormErrors.summary` lists every refusal for the error summary.

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
    "skus": "SKUs",
    "params": "parameters",
    "vars": "plain variables",
    "env": "variable",
}
LABELS = {"env": "Secret variables"}  # a key whose label is not its words


def _humane(key: str) -> str:
    """A label from a field's key: timeoutS → "Timeout (seconds)", baseUrl → "Base URL", skus → "SKUs"."""
    if key in LABELS:
        return LABELS[key]
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
    fields: list[ModelField] | tuple[ModelField, ...],
    form: Mapping[str, Any],
    kept: Mapping[str, str] | None = None,
    refused: list[FieldRefused] | None = None,
) -> dict[str, Any]:
    """The JSON object a posted form stands for: empty optional inputs left out (the model's defaults apply), a
    required one sent empty (so the model's refusal names it). FieldRefused for an input that cannot be read (JSON
    text that does not parse, a NAME=value line without its "="), or, given `refused`, each such input kept there
    and left out of the object, so the rest of the form is still checked."""
    obj: dict[str, Any] = {}
    for f in fields:
        try:
            _post_field(obj, f, form, kept, refused)
        except FieldRefused as error:
            if refused is None:
                raise
            refused.append(error)
    return obj


def _post_field(
    obj: dict[str, Any],
    f: ModelField,
    form: Mapping[str, Any],
    kept: Mapping[str, str] | None,
    refused: list[FieldRefused] | None,
) -> None:
    """Put one input's value into `obj` (posted_object)."""
    raw = form.get(f.path)
    if isinstance(raw, str):
        raw = raw.replace("\r\n", "\n")  # browsers send a text area's lines with CRLF
    text = raw.strip() if isinstance(raw, str) else ""
    if f.widget == "fixed":
        obj[f.key] = f.default
    elif f.widget == "group":
        inner = posted_object(f.children, form, kept, refused)
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


_NOT_VALUE = re.compile(r", not (?:'.*'|\".*\"|None|-?[0-9][0-9.e+-]*|True|False)$", re.DOTALL)
_TEXT = re.compile(r"must be text of (1 to|at most) ([0-9]+) characters without NUL")
_RANGE = re.compile(r"must be (?:an integer|a number(?: of seconds)?) (from|above) (\S+) to (\S+)")


def _article(words: str) -> str:
    return ("an " if words[:1].lower() in "aeiou" else "a ") + words


def _lower(label: str) -> str:
    """A label inside a sentence: "Base URL" → "base URL", but "SKUs" and "API key variable" kept."""
    return label if label[1:2].isupper() else label[:1].lower() + label[1:]


def in_page_words(f: ModelField, says: str, empty: bool) -> str:
    """A refusal of the input `f` in the page's words: its label, not its key; the rule without the API's wording
    (the value is in the field, NUL is not typed). `says` follows the field's name ("must be text of 1 to 200
    characters without NUL, not ''" → "Enter a name of 1 to 200 characters"); `empty` when nothing was entered."""
    label, words = f.label, _lower(f.label)
    says = _NOT_VALUE.sub("", says.strip())
    text = _TEXT.fullmatch(says)
    if text:
        low, high = text.groups()
        if low == "1 to":
            return f"Enter {_article(words)} of 1 to {high} characters"
        return f"{label} must be at most {high} characters"
    number = _RANGE.fullmatch(says)
    if number:
        where, low, high = number.groups()
        kind = "whole number" if f.widget == "integer" else "number"
        bounds = f"from {low} to {high}" if where == "from" else f"above {low} and at most {high}"
        if empty:
            return f"Enter {_article(words)}: {_article(kind)} {bounds}"
        return f"{label} must be {_article(kind)} {bounds}"
    if f.widget == "lines" and "list of strings" in says:
        return f"Enter {_article(words)}, one item per line"
    if says == "must be a non-empty string" or (empty and f.widget in ("text", "textarea")):
        return f"Enter {_article(words)}"
    if f.widget == "choice" and says.startswith("must be one of "):
        return f"Choose {_article(words)}: {says.removeprefix('must be ')}"
    if f.widget == "group" and says.startswith("must be {"):
        parts = [_lower(child.label) for child in f.children if child.widget != "json"]
        return f"Fill in the {words}: {' or '.join(_article(part) for part in parts)}"
    if f.widget == "flag" and says.startswith("must be true"):
        why = re.split(r", so |\s\(", says.removeprefix("must be true").lstrip(": "))[0]
        return f"Tick {label}" + (f": {why}" if why else "")
    if says.startswith(("must ", "is ")):
        return f"{label} {says}"
    return f"{label}: {says}"


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

    def summary(self, fields: list[ModelField] | tuple[ModelField, ...]) -> list[tuple[str | None, str]]:
        """The error summary's lines in the form's order, each the id of the input (or group) it is about and its
        message: those that name no input first (no id), then each input's, the JSON view's last."""
        ids = [(f.path, f.input_id) for f in flat(fields)] + [("config_json", "config_json")]
        lines: list[tuple[str | None, str]] = [(None, message) for message in self.general]
        return lines + [(input_id, self.by_path[path]) for path, input_id in ids if path in self.by_path]

    def __bool__(self) -> bool:
        return bool(self.by_path or self.general)
