"""The validation library: every field rule of every boundary (API bodies and query strings, page forms, ingest,
the CLI, and the configs tenants write), each stated once.

A rule is a `Rule`: `rule.apply(value)` takes a JSON value and returns what the field holds (a UUID, a datetime,
the integer 4 for JSON's 4.0) or raises `Refused`, whose `says` is the sentence after the field's name ("must be
an integer from 1 to 8, not '3'"); `rule.apply_text(text)` reads a query-string or form value (always a string)
into the JSON value it stands for and applies the same rule. In a pydantic model a rule is `Annotated` metadata:
pydantic runs it before the type's own validation (with `context={"query": True}` it reads strings as
`apply_text` does), and its `schema` is merged into the field's JSON schema. `refusal()` turns a ValidationError
into one sentence naming the first bad field, `refusals()` into one per bad field.

The policies, one each:
* integer: a JSON number with no fraction (4.0 is the integer 4); never a string ("3"), never a boolean;
* number: a finite JSON number; never a string or boolean;
* uuid: 32 hex digits, hyphenated 8-4-4-4-12 or not, surrounding spaces ignored; no `urn:uuid:` prefix, no braces;
* moment: a date (2026-05-01) or date and time (2026-05-01T12:00, with an offset; UTC without one);
* text: a string without NUL (PostgreSQL text cannot hold one) of at most `limit` characters, stripped;
* choice: one of a vocabulary (the refusal lists it, and `valid` carries it);
* a tenant's name (NAME: an organization, environment, evaluator configuration, dataset, token): text of 1 to 200
  characters, held stripped; a stage key (STAGE_KEY): stage_ and 1 to 94 characters more, no comma, no NUL; a reward
  or stage value (REWARD): a number from 0 to 1; a failure category (FAILURE_CATEGORY): text of at most 64
  characters. The API, the page forms, ingest (NDJSON and Harbor jobs) and the CLI each hold these fields to them;
* name (of a thing tenants name and others pick by name, such as a label): stored and shown in its normal form
  (`normal_name`: NFKC, no format characters, case-folded), so `flaky`, `FLAKY` and `flaky` with a zero-width space
  are one name; two names that look alike share a `look_alike` key (UTS #39's confusable skeleton, whatever the
  case), so `fIaky` is taken once `flaky` is;
* query strings: an integer is ASCII digits (a fraction of zeros allowed: "4.0"), a number ASCII decimal.
"""

from __future__ import annotations

import contextlib
import math
import re
import unicodedata
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, ErrorDetails, PydanticCustomError, core_schema

from domain.confusables import skeleton


class Refused(ValueError):
    """A value a rule refuses: `says` follows the field's name ("must be one of a, b, not 'c'")."""

    def __init__(self, says: str, valid: tuple[str, ...] | None = None) -> None:
        super().__init__(says)
        self.says, self.valid = says, valid


def _anything(value: Any) -> bool:
    return True


@dataclass(frozen=True, eq=False)  # hashed by identity: Annotated metadata must hash
class Rule:
    """A field's rule: `check` passes its values, `parse` turns a passing value into what the field holds (a
    ValueError refuses it), `from_text` reads a query-string value as the JSON value it stands for; a refusal
    reads "<field> <says>, not <value>". `valid` is the vocabulary of a choice.

    Used as `Annotated[int, Rule(...)]`: pydantic runs `apply` before the type's own validation, and `schema` is
    merged into the field's JSON schema.
    """

    says: str
    check: Callable[[Any], bool] = _anything
    schema: dict[str, Any] = field(default_factory=dict)
    show_value: bool = True  # quote a refused scalar back: ", not 50"
    parse: Callable[[Any], Any] | None = None
    from_text: Callable[[str], Any] | None = None
    valid: tuple[str, ...] | None = None

    def refused(self, value: Any) -> Refused:
        """The refusal of `value`."""
        shown = self.show_value and (value is None or isinstance(value, str | int | float | bool))
        return Refused(f"{self.says}, not {value!r}" if shown else self.says, self.valid)

    def apply(self, value: Any) -> Any:
        """What the field holds for the JSON value `value`, or raise Refused (a check or parse that raises on a value
        it cannot read refuses it too)."""
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            if self.check(value):
                return self.parse(value) if self.parse else value
        raise self.refused(value)

    def apply_text(self, text: str) -> Any:
        """What the field holds for a query-string or form value, or raise Refused (quoting the text)."""
        try:
            value = self.from_text(text) if self.from_text else text
        except (ValueError, TypeError, OverflowError):
            raise self.refused(text) from None
        try:
            return self.apply(value)
        except Refused:
            raise self.refused(text) from None

    def validate(self, value: Any, info: core_schema.ValidationInfo | None = None) -> Any:
        """`apply` (or, with the context `query`, `apply_text` for a string) as pydantic's refusal."""
        query = bool(info is not None and (info.context or {}).get("query")) and isinstance(value, str)
        try:
            return self.apply_text(value) if query else self.apply(value)
        except Refused as refused:
            extra = {"valid": list(refused.valid)} if refused.valid else {}
            raise PydanticCustomError("rule", "{says}", {"says": refused.says, **extra}) from None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        if type(None) not in get_args(source):
            return core_schema.with_info_before_validator_function(self.validate, handler(source))

        def unless_null(value: Any, info: core_schema.ValidationInfo) -> Any:  # an optional field's null is null
            return None if value is None else self.validate(value, info)

        return core_schema.with_info_before_validator_function(unless_null, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        found = handler(schema)
        if "anyOf" in found and self.schema:  # an optional field: the rule speaks of its value, not of null
            parts = [part if part.get("type") == "null" else {**part, **self.schema} for part in found["anyOf"]]
            return {**found, "anyOf": parts}
        return {**found, **self.schema}


def rule_of(metadata: list[Any] | tuple[Any, ...]) -> Rule | None:
    """The Rule among a field's metadata, if any."""
    return next((item for item in metadata if isinstance(item, Rule)), None)


class Config(BaseModel):
    """A config object tenants write: keys as written (camelCase), unknown keys refused."""

    model_config = ConfigDict(extra="forbid")


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _whole(value: Any) -> bool:
    return _number(value) and (isinstance(value, int) or float(value).is_integer())


_DECIMAL = re.compile(r"[-+]?(?:[0-9]{1,300}(?:\.[0-9]{0,300})?|\.[0-9]{1,300})(?:[eE][-+]?[0-9]{1,3})?")
_DIGITS = re.compile(r"-?[0-9]{1,15}(?:\.0{1,15})?")  # ASCII only: str.isdigit() also accepts "²" and "٣"


def decimal_text(text: str) -> float | int:
    """A query-string number ("0.5", "1e-3") as a JSON number; ValueError for anything else ("nan", "²")."""
    text = text.strip(" \t")
    if not _DECIMAL.fullmatch(text):
        raise ValueError(text)
    return int(text) if re.fullmatch(r"-?[0-9]{1,15}", text) else float(text)


def integer_text(text: str) -> int | float:
    """A query-string integer: ASCII digits, optionally after a minus and before a fraction of zeros ("4.0")."""
    text = text.strip(" \t")
    if not _DIGITS.fullmatch(text):
        raise ValueError(text)
    return int(float(text)) if "." in text else int(text)


def integer_from(low: int, high: int) -> Rule:
    """An integer in low..high (JSON's 4.0 is the integer 4; the string "3" is refused)."""
    return Rule(
        f"must be an integer from {low} to {high}",
        lambda v: _whole(v) and low <= v <= high,
        {"minimum": low, "maximum": high},
        parse=int,
        from_text=integer_text,
    )


def number_from(low: float, high: float, *, above: bool = False, says: str | None = None) -> Rule:
    """A finite number in low..high (above low when `above`), kept as written (an int stays an int)."""
    return Rule(
        says or f"must be a number from {low:g} to {high:g}",
        lambda v: _number(v) and (low < v if above else low <= v) and v <= high,
        {"exclusiveMinimum" if above else "minimum": low, "maximum": high},
        from_text=decimal_text,
    )


REWARD = number_from(0, 1)  # a reward or a stage value: 0 (nothing) to 1 (success)
# A number another harness wrote, before its own mapping holds it to a band (a Harbor verifier's reward: any finite
# number, held to 0..1); a file's text is read as a query string's ("0.5").
FINITE = Rule("must be a finite number", _number, from_text=decimal_text)
LARGEST_BIGINT = 2**63 - 1  # PostgreSQL's bigint


def one_of(*valid: str) -> Rule:
    """One of `valid` (the refusal lists them)."""
    return Rule(f"must be one of {', '.join(valid)}", lambda v: isinstance(v, str) and v in valid, valid=valid)


choice = one_of


def text(limit: int, *, required: bool = False, what: str = "text") -> Rule:
    """A string without NUL of at most `limit` characters once stripped (and some besides spaces when required),
    held stripped."""
    says = f"must be {what} of 1 to {limit} characters" if required else f"must be {what} of at most {limit} characters"
    return Rule(
        f"{says} without NUL",
        lambda v: (
            isinstance(v, str) and "\x00" not in v and (not required or bool(v.strip())) and len(v.strip()) <= limit
        ),
        # The pattern says what the rule refuses: NUL anywhere, and (when required) nothing besides spaces.
        {"maxLength": limit, "pattern": NAME_PATTERN if required else NO_NUL},
        parse=str.strip,
    )


def _visible(text: str) -> str:
    """`text` in NFKC without format characters (Unicode category Cf: zero-width spaces and joiners, bidirectional
    marks, soft hyphens), which draw nothing or only steer how the rest is drawn."""
    return "".join(char for char in unicodedata.normalize("NFKC", text) if unicodedata.category(char) != "Cf")


def normal_name(text: str) -> str:
    """A name's normal form, the one it is stored, shown and looked up in: NFKC, without format characters,
    case-folded (NFKC again after folding, which folding can undo). `flaky`, `FLAKY`, `ﬂaky` (a ligature) and
    `flaky` with a zero-width space are all `flaky`."""
    return unicodedata.normalize("NFKC", _visible(text).casefold())


def look_alike(text: str) -> str:
    """What a name looks like, whatever its case: UTS #39's skeleton of the name as written (NFKC, no format
    characters), case-folded, and the skeleton of that. Two names with one key can be taken for each other: `fIaky`
    (capital I, drawn like l), `f1aky` and `FLAKY` all key as `flaky`, although `fIaky`'s normal form is `fiaky`."""
    return skeleton(skeleton(_visible(text)).casefold())


NO_NUL = "^[^\\u0000]*$"  # PostgreSQL text cannot hold NUL characters
NAME_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"  # some text besides spaces, no NUL
NAME_CHARS = 200  # the longest name a tenant gives anything (its columns hold no more)
# The name of what a tenant names and picks by name (an organization, an environment, an evaluator configuration, a
# dataset, a token): 1 to 200 characters besides the spaces around them, which are dropped; no NUL. The one rule of
# the API, the page forms, ingest and the CLI.
NAME = text(NAME_CHARS, required=True)
FAILURE_CATEGORY_CHARS = 64  # the longest failure_category a trial keeps
# A trial's failure category as an ingest line or a filter gives it: at most 64 characters, held stripped, no NUL
# (a reviewer's own category is domain.triage's HUMAN_CATEGORY, a narrower rule of the same length).
FAILURE_CATEGORY = text(FAILURE_CATEGORY_CHARS)
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")


def parse_uuid(value: Any) -> uuid.UUID:
    """The one UUID policy: 32 hex digits, hyphenated 8-4-4-4-12 or not, surrounding spaces and tabs ignored (no
    `urn:uuid:`, no braces); ValueError otherwise."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str) or not _UUID.fullmatch(value.strip(" \t")):
        raise ValueError(value)
    return uuid.UUID(value.strip(" \t"))


UUID_RULE = Rule("must be a UUID", parse=parse_uuid, schema={"format": "uuid"})

_MOMENT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?([Zz]|[+-][0-9]{2}:?[0-9]{2})?)?"
)


def parse_moment(value: Any) -> datetime:
    """A date (2026-05-01) or date and time (2026-05-01T12:00, with an offset or in UTC) as an aware datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not _MOMENT.fullmatch(value):
        raise ValueError(value)
    # Python reads at most 6 fraction digits: the rest of a finer time is dropped
    value = re.sub(r"(\.[0-9]{6})[0-9]+", r"\1", value)
    parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


MOMENT = Rule("must be a date or date-time such as 2026-05-01T12:00Z", parse=parse_moment)


def stage_key(chars: int) -> Rule:
    """A stage_* key of at most `chars` characters (no comma, no NUL)."""
    pattern = re.compile(f"stage_[^,\\u0000]{{1,{chars - len('stage_')}}}")
    return Rule(
        f"must be a stage key (stage_…, at most {chars} characters)",
        lambda v: isinstance(v, str) and bool(pattern.fullmatch(v)),
        {"pattern": f"^{pattern.pattern}$"},
    )


STAGE_KEY_CHARS = 100  # the longest stage_* key a trial keeps (its rollup and trial_stages rows hold no more)
# A stage key, wherever one comes from (a filter, an ingest line, a verifier, a Harbor reward key): stage_ and 1 to 94
# characters more, no comma (a filter lists keys with commas) and no NUL; stage_ in lowercase.
STAGE_KEY = stage_key(STAGE_KEY_CHARS)


def stage_keys(most: int) -> Rule:
    """Up to `most` comma-separated STAGE_KEYs (a query string's `stage_a,stage_b`), held as a tuple."""
    one = STAGE_KEY
    key = one.schema["pattern"][1:-1]

    def keys(value: Any) -> tuple[str, ...]:
        found = tuple(value.split(",")) if isinstance(value, str) else ()
        if not found or len(found) > most or not all(one.check(k) for k in found):
            raise ValueError(value)
        return found

    return Rule(
        f"must be up to {most} comma-separated stage keys (stage_…)",
        parse=keys,
        schema={"type": "string", "pattern": f"^{key}(,{key}){{0,{most - 1}}}$"},
    )


def hex_key(digits: int, says: str) -> Rule:
    """`digits` hex digits (e.g. an md5), held in lowercase."""
    return Rule(
        says,
        lambda v: isinstance(v, str) and bool(re.fullmatch(f"[0-9a-fA-F]{{{digits}}}", v.strip())),
        {"pattern": f"^[0-9a-fA-F]{{{digits}}}$"},
        parse=lambda v: v.strip().lower(),
    )


def _strings(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)


def _env(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


NETWORK = "Network access for the program (off unless true)"
SECRET_ENV = (
    '`env` values are secrets: sealed at rest, shown to nobody (every value reads "***", names only) and masked as '
    "*** in recorded output; a changed secret is a new version or configuration, never an edit."
)
Strings = Annotated[
    list[Annotated[str, Field(min_length=1)]],
    Field(min_length=1),
    Rule("must be a non-empty list of strings", _strings, show_value=False),
]
# Free text (a task, a system prompt): contentMediaType says so in the schema, and forms give it a text area.
Text = Annotated[
    str, Rule("must be text", lambda v: isinstance(v, str), {"contentMediaType": "text/plain"}, show_value=False)
]
Flag = Annotated[bool, Rule("must be true or false", lambda v: isinstance(v, bool), show_value=False)]


def _flag_text(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError(text)
    return text == "true"


# A query string's flag: the text true or false, nothing else (not 1, yes or on).
FLAG = Rule("must be true or false", lambda v: isinstance(v, bool), {"type": "boolean"}, from_text=_flag_text)
JsonObject = Annotated[dict[str, Any], Rule("must be a JSON object", lambda v: isinstance(v, dict), show_value=False)]
Env = Annotated[
    dict[str, str], Rule("must map names to strings", _env, show_value=False), Field(description=SECRET_ENV)
]
PLAIN_VARS = (
    "`vars` are plain settings put in the program's environment beside `env` (a user name, a file path): stored, "
    "shown and recorded as they are, never masked; a secret belongs in `env`, and a name is in one of the two."
)
Vars = Annotated[
    dict[str, str], Rule("must map names to strings", _env, show_value=False), Field(description=PLAIN_VARS)
]


def both_env_and_vars(config: dict[str, Any], where: str) -> str | None:
    """Why a config that names a variable in both `env` and `vars` is refused, None when it does not."""
    both = sorted(set(config.get("env") or {}) & set(config.get("vars") or {}))
    if not both:
        return None
    return f"{where}.vars {', '.join(both)}: also in {where}.env; a value is either secret (env) or plain (vars)"


def program_environment(config: dict[str, Any]) -> dict[str, str]:
    """The variables a spec's or agent's program gets: its plain `vars` and its secret `env`."""
    return {**(config.get("vars") or {}), **(config.get("env") or {})}


def _rule_of(model: type[BaseModel], loc: tuple[int | str, ...]) -> Rule | None:
    """The Rule of the field at `loc` inside `model` (None when the path leaves the models)."""
    for part in loc[:-1]:
        info = model.model_fields.get(str(part))
        inner = info.annotation if info else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            return None
        model = inner
    info = model.model_fields.get(str(loc[-1])) if loc else None
    return rule_of(info.metadata) if info else None


def refusal(error: ValidationError, where: str, model: type[BaseModel]) -> str:
    """The one sentence that says what is wrong with a config: its first bad field and that field's rule."""
    errors = error.errors()
    unknown = [e["loc"] for e in errors if e["type"] == "extra_forbidden"]
    if unknown and all(len(loc) == 1 for loc in unknown):
        return f"unknown {where} keys: {', '.join(sorted(str(loc[0]) for loc in unknown))}"
    first: ErrorDetails = next((e for e in errors if e["type"] != "extra_forbidden"), errors[0])
    return _sentence(first, where, model)


def refusals(error: ValidationError, where: str, model: type[BaseModel]) -> list[str]:
    """Every sentence of what is wrong with a config, one per bad field in the model's order (`refusal` says the
    first), the unknown keys of the object itself in one."""
    errors = error.errors()
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1)
    said = [f"unknown {where} keys: {', '.join(unknown)}"] if unknown else []
    return said + [
        _sentence(e, where, model) for e in errors if not (e["type"] == "extra_forbidden" and len(e["loc"]) == 1)
    ]


def _sentence(first: ErrorDetails, where: str, model: type[BaseModel]) -> str:
    """One bad field's sentence: its path under `where` and its rule."""
    loc = first["loc"]
    path = ".".join([where, *map(str, loc)])
    if first["type"] == "rule":
        under = (first.get("ctx") or {}).get("under")
        return f"{path}{'.' + under if under else ''} {first['msg']}"
    if first["type"] in {"model_type", "model_attributes_type", "dict_type"}:
        return f"{path} must be a JSON object"
    if first["type"] == "extra_forbidden":
        parent = _rule_of(model, loc[:-1]) if len(loc) > 1 else None
        return f"{path} is unknown" + (f"; {parent.says}" if parent else "")
    rule = _rule_of(model, loc)
    return f"{path} {rule.says}" if rule else f"{path}: {first['msg']}"
