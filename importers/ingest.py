"""Ingest results from other harnesses: validate every trial, then write the same rows the worker writes.

One NDJSON line (or one Harbor trial directory) is one trial. Everything is
validated before anything is written, and all of it is written in the
caller's single transaction, so one bad line leaves the database untouched.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from atif import Trajectory
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.session import secrets_key_of
from domain.errors import SpecError
from domain.outcome import (
    LOG_CAP_CHARS,
    REWARD_EXPLANATION,
    VERIFIER_EXPLANATION,
    TrialOutcome,
    truncate_keep_end,
)
from domain.rules import FAILURE_CATEGORY, MOMENT, NAME, REWARD, STAGE_KEY, Refused, integer_from
from domain.secret_env import hidden_env_names, resubmitted_mask
from domain.specs import spec_sha256, validate_spec
from domain.trajectory import Content, Step, command_text, step, structured
from models.environments import MAX_ATTEMPTS, Environment, EnvironmentVersion, EvaluatorConfig
from models.evaluations import Artifact, EvaluationTrial
from writes.environments import create_environment, create_environment_version, create_evaluator_config
from writes.runs import add_imported_run, atif_bytes, complete_run, record_trial


class IngestError(ValueError):
    """A trial that cannot be ingested: which line and field, and why."""

    def __init__(self, line: int, field_name: str, detail: str) -> None:
        super().__init__(f"line {line}, {field_name}: {detail}")
        self.line, self.field, self.detail = line, field_name, detail


# Strict, like every JSON body: a string is never a number ("3" is refused), while an integer follows
# domain.rules' one integer policy (3.0 is 3); times are domain.rules' moments, names its names (stripped, 1 to 200
# characters), rewards and stages its rewards and stage keys.
STRICT = ConfigDict(extra="forbid", strict=True)
Name = Annotated[str, NAME]


class IngestEnvironment(BaseModel):
    """The environment a trial ran in: found by name, its version found by spec hash (or created)."""

    model_config = STRICT
    name: Name
    spec: dict[str, Any]


class AtifShapedStep(BaseModel):
    """One step in the spec's atif-shaped form."""

    model_config = ConfigDict(extra="ignore", strict=True)
    step: Annotated[int, integer_from(1, 2**31 - 1)]
    tool: str
    command: str
    observation: str


class IngestTrial(BaseModel):
    """One trial of another harness, as a line of POST /api/v1/evaluation-runs/import."""

    model_config = STRICT
    externalId: str = Field(min_length=1, max_length=200)
    environment: IngestEnvironment
    run: str | None = Field(default=None, max_length=200)
    attempt: Annotated[int, integer_from(1, MAX_ATTEMPTS)]
    reward: Annotated[float | None, REWARD] = None
    stages: dict[str, float] = Field(default_factory=dict)
    failureCategory: Annotated[str | None, FAILURE_CATEGORY] = None
    log: str = ""
    task: str = ""
    seed: Annotated[int, integer_from(-(2**31), 2**31 - 1)] = 0
    agent: Name = "imported"
    trajectory: dict[str, Any] | list[Any] | None = None
    # What the verifier said: a stage key → its words on that stage, "verifier" → on the trial as a whole, "reward" →
    # how the reward was derived from what it wrote
    explanations: dict[str, str] = Field(default_factory=dict)
    startedAt: Annotated[datetime | None, MOMENT] = None  # when the trial ran (without a zone: UTC); default: now
    finishedAt: Annotated[datetime | None, MOMENT] = None

    @field_validator("explanations")
    @classmethod
    def _explained_keys(cls, explanations: dict[str, str]) -> dict[str, str]:
        for key in explanations:
            if not (STAGE_KEY.check(key) or key in (VERIFIER_EXPLANATION, REWARD_EXPLANATION)):
                raise ValueError(
                    f"explanations are keyed by a stage_* key, {VERIFIER_EXPLANATION!r} or {REWARD_EXPLANATION!r}, "
                    f"not {key!r}"
                )
        return explanations

    @field_validator("stages")
    @classmethod
    def _stage_keys(cls, stages: dict[str, float]) -> dict[str, float]:
        for key, value in stages.items():
            try:
                STAGE_KEY.apply(key)
            except Refused as refused:
                raise ValueError(f"a key {refused.says}") from None
            try:
                REWARD.apply(value)
            except Refused as refused:
                raise ValueError(f"{key} {refused.says}") from None
        return stages


@dataclass
class ParsedTrial:
    """A validated trial with its trajectory as structured steps (and the original ATIF, when given)."""

    line: int
    trial: IngestTrial
    spec: dict[str, Any]
    steps: list[Step]
    atif: dict[str, Any] | None
    task: str


def _content(value: Any) -> Content | None:
    """An ATIF message or observation content (text, or content parts) as the structured step keeps it."""
    if value is None or isinstance(value, str):
        return value
    return [part.model_dump(mode="json", exclude_none=True) for part in value]


def atif_step(number: int, atif: Any) -> Step:
    """One ATIF step (an `atif.Step`) as a structured step: nothing it says is dropped.

    Every observation result is kept (with its `source_call_id` as the call id, or none), the message and
    reasoning are kept, a step without tool calls is a message step, and the timestamp and token metrics
    become `startedAt` and `tokens`.
    """
    calls = [
        {"id": call.tool_call_id, "name": call.function_name, "arguments": call.arguments or {}}
        for call in atif.tool_calls or []
    ]
    results = [
        {"callId": result.source_call_id, "content": _content(result.content) or ""}
        for result in (atif.observation.results if atif.observation else [])
    ]
    metrics = atif.metrics
    tokens = {
        key: value
        for key, value in {
            "prompt": metrics and metrics.prompt_tokens,
            "completion": metrics and metrics.completion_tokens,
            "cached": metrics and metrics.cached_tokens,
        }.items()
        if isinstance(value, int)
    }
    extra = {"model": atif.model_name, "costUsd": metrics and metrics.cost_usd}
    return step(
        number,
        source=atif.source,
        tool=calls[0]["name"] if calls else None,
        command="\n".join(command_text(call["name"], call["arguments"]) for call in calls),
        calls=calls,
        results=results,
        message=_content(atif.message),
        reasoning=atif.reasoning_content,
        started_at=atif.timestamp,
        tokens=tokens,
        extra={key: value for key, value in extra.items() if value is not None},
    )


def steps_from_atif(document: dict[str, Any], line: int) -> tuple[list[Step], str, dict[str, Any]]:
    """Validate an ATIF trajectory; return every step as a structured step, the task, and the document."""
    try:
        trajectory = Trajectory.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise IngestError(line, f"trajectory.{where}" if where else "trajectory", first["msg"]) from error
    task = next(
        (s.message for s in trajectory.steps if s.source == "user" and isinstance(s.message, str) and s.message), ""
    )
    steps = [atif_step(number, atif) for number, atif in enumerate(trajectory.steps, start=1)]
    return steps, task, document


def parse_trial(raw: Any, line: int) -> ParsedTrial:
    """Validate one trial (a decoded JSON line); raise IngestError naming the line and the field."""
    try:
        trial = IngestTrial.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "line"
        raise IngestError(line, where, first["msg"]) from error
    spec = dict(trial.environment.spec)
    spec.setdefault("kind", "external")
    try:
        spec = validate_spec(spec)
    except SpecError as error:
        raise IngestError(line, "environment.spec", str(error)) from error
    if hidden_env_names(spec):
        raise IngestError(line, "environment.spec", resubmitted_mask("spec", hidden_env_names(spec)))
    steps: list[Step] = []
    task, atif = trial.task, None
    if isinstance(trial.trajectory, dict) and "schema_version" in trial.trajectory:
        steps, atif_task, atif = steps_from_atif(trial.trajectory, line)
        task = task or atif_task
    elif trial.trajectory is not None:
        raw_steps = trial.trajectory.get("steps") if isinstance(trial.trajectory, dict) else trial.trajectory
        if not isinstance(raw_steps, list):
            raise IngestError(line, "trajectory", 'expected an ATIF document, a list of steps or {"steps": [...]}')
        for index, raw_step in enumerate(raw_steps):
            try:
                steps.append(structured(AtifShapedStep.model_validate(raw_step).model_dump()))
            except ValidationError as error:
                raise IngestError(line, f"trajectory.steps.{index}", error.errors()[0]["msg"]) from error
    return ParsedTrial(line, trial, spec, steps, atif, task)


@dataclass
class IngestResult:
    """What an ingest wrote."""

    imported: int = 0
    skipped: int = 0
    already_there: set[str] = field(default_factory=set)  # the externalIds skipped: imported before
    run_ids: list[uuid.UUID] = field(default_factory=list)
    # externalIds already there whose incoming trial differs (another reward or trajectory): kept as they were
    differing: list[str] = field(default_factory=list)


def _environment_version(session: Session, org_id: uuid.UUID, name: str, spec: dict[str, Any]) -> EnvironmentVersion:
    environment = session.scalar(select(Environment).where(Environment.name == name))
    if environment is None:
        environment = create_environment(session, org_id, name, "imported")
    sha256 = spec_sha256(spec, secrets_key_of(session))
    version = session.scalar(
        select(EnvironmentVersion).where(
            EnvironmentVersion.environment_id == environment.id, EnvironmentVersion.spec_sha256 == sha256
        )
    )
    return version or create_environment_version(session, environment, spec)


def _evaluator(session: Session, org_id: uuid.UUID, agent: str) -> EvaluatorConfig:
    config = session.scalar(select(EvaluatorConfig).where(EvaluatorConfig.name == agent))
    return config or create_evaluator_config(session, org_id, agent, {"kind": "external", "name": agent}, MAX_ATTEMPTS)


def _fingerprint(reward: float | None, atif: dict[str, Any] | None) -> tuple[float | None, str | None]:
    """What tells two imports of one trial apart: its reward, and the sha256 of its ATIF trajectory as its artifact
    keeps it (steps of another shape are stored capped, so only their reward is compared)."""
    body = atif_bytes(atif)
    return reward, hashlib.sha256(body).hexdigest() if body is not None else None


def _existing(session: Session, external_ids: set[str]) -> dict[str, tuple[float | None, str | None]]:
    """The trials already imported under these externalIds, each with its fingerprint (the stored artifact's sha256:
    no body is read again)."""
    rows = session.execute(
        select(EvaluationTrial.external_id, EvaluationTrial.reward, Artifact.sha256)
        .outerjoin(
            Artifact,
            (Artifact.organization_id == EvaluationTrial.organization_id)
            & (Artifact.id == EvaluationTrial.atif_artifact_id),
        )
        .where(EvaluationTrial.external_id.in_(external_ids))
    ).all()
    return {row.external_id: (row.reward, row.sha256) for row in rows}


def ingest(session: Session, org_id: uuid.UUID, trials: list[ParsedTrial]) -> IngestResult:
    """Write every trial not ingested before (by externalId), grouped into runs, with pass@k and rollups."""
    result = IngestResult()
    first_line: dict[str, int] = {}
    for parsed in trials:  # one trial per externalId in a body: a second one is refused, naming both lines
        earlier = first_line.setdefault(parsed.trial.externalId, parsed.line)
        if earlier != parsed.line:
            raise IngestError(
                parsed.line,
                "externalId",
                f"{parsed.trial.externalId!r} is also the externalId of line {earlier}: each trial appears once",
            )
    seen = set(first_line)
    existing = _existing(session, seen)
    groups: dict[tuple[str, str, str, str], list[ParsedTrial]] = {}
    for parsed in trials:
        if parsed.trial.externalId in existing:
            result.skipped += 1
            result.already_there.add(parsed.trial.externalId)
            if existing[parsed.trial.externalId] != _fingerprint(parsed.trial.reward, parsed.atif):
                result.differing.append(parsed.trial.externalId)
            continue
        sha256 = spec_sha256(parsed.spec, secrets_key_of(session))
        key = (parsed.trial.environment.name, sha256, parsed.trial.agent, parsed.trial.run or "")
        group = groups.setdefault(key, [])
        if any(other.trial.attempt == parsed.trial.attempt for other in group):
            raise IngestError(parsed.line, "attempt", f"attempt {parsed.trial.attempt} appears twice in this run")
        group.append(parsed)
    for (name, _, agent, _), group in groups.items():
        version = _environment_version(session, org_id, name, group[0].spec)
        config = _evaluator(session, org_id, agent)
        run = add_imported_run(session, org_id, version, config, max(p.trial.attempt for p in group))
        for parsed in sorted(group, key=lambda p: p.trial.attempt):
            trial = parsed.trial
            outcome = TrialOutcome(
                status="error" if trial.reward is None else "succeeded" if trial.reward == 1 else "failed",
                reward=trial.reward,
                failure_category=None if trial.reward == 1 else trial.failureCategory or "unknown",
                stages=trial.stages,
                steps=parsed.steps,
                log=truncate_keep_end(trial.log, LOG_CAP_CHARS, "log"),
                started_at=trial.startedAt or datetime.now(UTC),
                finished_at=trial.finishedAt or trial.startedAt or datetime.now(UTC),
                task=parsed.task,
                explanations=trial.explanations,
            )
            record_trial(
                session,
                run,
                trial.attempt,
                trial.seed,
                outcome,
                external_id=trial.externalId,
                atif_document=parsed.atif,
            )
            result.imported += 1
        complete_run(session, run)
        result.run_ids.append(run.id)
    return result
