"""The catalog's request bodies (environments, versions, evaluator configurations): the API validates them and the
pages' create forms are generated from them (web.catalog_forms), so both refuse the same input in the same words."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from domain.agents import AGENT_JSON_SCHEMA, validate_agent
from domain.errors import AgentConfigError, SpecError
from domain.limits import DEFAULT_MAX_TRIAL_TIMEOUT_S
from domain.rules import LARGEST_BIGINT, NAME, Refused, integer_from, number_from, text
from domain.scoring import ATTEMPT_COUNT
from domain.specs import SPEC_JSON_SCHEMA, validate_spec
from web.validation import REPORT_MISSING, ApiModel


def _refuse(detail: str) -> PydanticCustomError:
    """A validation error whose message is `detail` as it is (a spec's or agent's whole sentence)."""
    return PydanticCustomError("api", "{detail}", {"detail": detail})


def _timeout_s(value: Any, info: ValidationInfo) -> float:
    """Seconds per trial, above 0 and at most the operator's AGENTFORGE_MAX_TRIAL_TIMEOUT_S."""
    ceiling = (info.context or {}).get("max_trial_timeout_s", DEFAULT_MAX_TRIAL_TIMEOUT_S)
    rule = number_from(0, ceiling, above=True, says=f"must be a number of seconds from 0 to {ceiling:g}")
    try:
        return float(rule.apply(value))
    except Refused as refused:
        raise PydanticCustomError("rule", "{says}", {"says": refused.says}) from None


def _spec(value: Any) -> dict[str, Any]:
    try:
        return validate_spec(value)
    except SpecError as error:
        raise _refuse(str(error)) from None


def _agent(value: Any) -> dict[str, Any]:
    try:
        return validate_agent(value)
    except AgentConfigError as error:
        raise _refuse(str(error)) from None


Spec = Annotated[dict[str, Any], BeforeValidator(_spec), WithJsonSchema(SPEC_JSON_SCHEMA)]
Agent = Annotated[dict[str, Any], BeforeValidator(_agent), WithJsonSchema(AGENT_JSON_SCHEMA)]
Name = Annotated[str, NAME]


class EnvironmentCreate(ApiModel):
    """POST /environments: a new environment of the organization."""

    name: Name
    description: Annotated[str, text(2000)] = ""


class EnvironmentVersionCreate(ApiModel):
    """POST /environments/{environmentId}/versions: the spec a new immutable version pins."""

    spec: Annotated[Spec, REPORT_MISSING]


class EvaluatorConfigCreate(ApiModel):
    """POST /evaluator-configs: an agent and how many attempts, steps and seconds each run gives it, and optionally the
    training checkpoint it evaluates and that checkpoint's step."""

    name: Name
    attempt_count: Annotated[int, ATTEMPT_COUNT]
    max_steps: Annotated[int, integer_from(1, 500)] = 30
    timeout_s: Annotated[
        float,
        BeforeValidator(_timeout_s),
        # the bounds as JSON Schema says them (the validator applies them, with the operator's ceiling)
        Field(
            json_schema_extra={"exclusiveMinimum": 0, "maximum": DEFAULT_MAX_TRIAL_TIMEOUT_S},
            description="Seconds per trial",
        ),
    ] = 60
    checkpoint: Annotated[
        str | None,
        text(200),
        Field(description="The training checkpoint this evaluator evaluates (a path, a tag), shown beside its step"),
    ] = None
    step: Annotated[
        int | None,
        integer_from(0, LARGEST_BIGINT),
        Field(description="The training step of that checkpoint: the dataset leaderboard charts pass@1 against it"),
    ] = None
    agent: Agent
