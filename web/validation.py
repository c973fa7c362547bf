"""Request models on domain.rules: the API's bodies and query strings and the pages' query strings read alike.

A model's fields carry domain.rules' rules; `parse()` validates a body or a query string (a `QueryModel` reads its
strings with each rule's query-string reading) and refuses with `Invalid`, whose `error` names the field
("invalid attemptCount") and whose `detail` is "<field> <what the rule says>" (`missing <field>` for a required
field left out). The API answers it as JSON 400 (blueprints.api.schemas.validated), a page as a 400 page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from domain.rules import Refused, rule_of

M = TypeVar("M", bound="ApiModel")


class ApiModel(BaseModel):
    """A body of the API: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)

    def to_json(self) -> dict[str, Any]:
        """The body as JSON types, with the API's (camelCase) names."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def of(cls: type[M], source: object, **values: Any) -> M:
        """The reply made of `source`'s attributes named like its fields (a row, a dataclass, a table's object);
        `values` give the fields `source` has not, or names differently. Validated like any construction."""
        names = (name for name in cls.model_fields if name not in values and hasattr(source, name))
        return cls.model_validate({**{name: getattr(source, name) for name in names}, **values})


class QueryModel(ApiModel):
    """Query-string parameters: each value is a string, read by its rule's query-string reading ("4" is 4).
    A page drops its GET forms' empty fields first (web.params.given_args); the API refuses them."""


class ReportMissing:
    """Marks a field whose absence answers `missing <field>` rather than its rule's `invalid <field>`."""


REPORT_MISSING = ReportMissing()


class Invalid(ValueError):
    """A request refused: `error` ("invalid <field>", "missing <field>"), `detail`, and extra answer keys (`valid`)."""

    def __init__(self, error: str, detail: str, status: int = 400, valid: list[str] | None = None) -> None:
        super().__init__(detail)
        self.error, self.detail, self.status = error, detail, status
        self.extra: dict[str, Any] = {"valid": valid} if valid else {}


def parse(model: type[M], data: Any, **context: Any) -> M:
    """`data` as `model`, or raise Invalid naming the first bad field."""
    query = issubclass(model, QueryModel)
    try:
        return model.model_validate(data, context={"query": query, **context})
    except ValidationError as error:
        raise _invalid(model, error.errors()[0]) from error


def every_refusal(model: type[BaseModel], data: Any, **context: Any) -> list[Invalid]:
    """Every field `data` fails as `model`, each refused as `parse` would refuse it alone ([] when it passes): a
    page form shows them all at once."""
    query = issubclass(model, QueryModel)
    try:
        model.model_validate(data, context={"query": query, **context})
    except ValidationError as error:
        return [_invalid(model, each) for each in error.errors()]
    return []


def _invalid(model: type[BaseModel], first: Any) -> Invalid:
    name = str(first["loc"][0]) if first["loc"] else "body"
    field = next((f for key, f in model.model_fields.items() if name in (key, f.alias)), None)
    ctx = first.get("ctx") or {}
    valid = ctx.get("valid")
    if first["type"] == "missing" and field is not None:
        rule = rule_of(field.metadata)
        if REPORT_MISSING not in field.metadata and rule is not None:
            try:
                rule.apply(None)
            except Refused as refused:
                return Invalid(f"invalid {name}", f"{name} {refused.says}", valid=list(refused.valid or ()))
        checks: list[Callable[..., Any]] = [m.func for m in field.metadata if isinstance(m, BeforeValidator)]
        for check in checks:
            try:
                check(None)
            except PydanticCustomError as refused:
                said = {"loc": (name,), "type": refused.type, "msg": refused.message(), "ctx": {}}
                return _invalid(model, said)
        return Invalid(f"missing {name}", f"{name} is required")
    if first["type"] == "rule":
        return Invalid(f"invalid {name}", f"{name} {first['msg']}", valid=valid)
    return Invalid(f"invalid {name}", first["msg"], valid=valid)
