"""The /api/v1 contract: request and response bodies as pydantic models, the source of /api/v1/openapi.json."""

from __future__ import annotations

import contextlib
import math
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from blueprints.api import ApiError
from domain.agents import AGENT_JSON_SCHEMA, validate_agent
from domain.errors import AgentConfigError, RunError, SpecError
from domain.outcome import FAILURE_CATEGORY_CHARS, STAGE_KEY_CHARS
from domain.scoring import check_attempt_count
from domain.specs import SPEC_JSON_SCHEMA, validate_spec
from domain.vocabulary import RESETS, TRIAL_STATUSES, TrialStatus
from importers.ingest import IngestTrial
from queries.exports import EXPORT_FORMATS, EXPORT_KINDS, RolloutExportFormat, RolloutExportKind
from queries.filters import MAX_STAGE_FILTERS, REWARD_BANDS, TRIAL_SOURCES, RewardBand, TrialFilters, TrialSource
from queries.search import SEARCH_QUERY_CHARS
from queries.trials import TRIAL_SORTS, TrialSort

NO_NUL = "^[^\\u0000]*$"  # PostgreSQL text cannot hold NUL characters (the database answers 400)
NAME_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"  # some text besides spaces, no NUL
DEFAULT_MAX_TRIAL_TIMEOUT_S = 3600.0
M = TypeVar("M", bound="ApiModel")
ImportLine = IngestTrial  # one line of POST /evaluation-runs/import


class ReportMissing:
    """Marks a field whose absence answers `missing <field>` rather than its validator's `invalid <field>`."""


REPORT_MISSING = ReportMissing()


def _refuse(detail: str, **extra: Any) -> PydanticCustomError:
    """A validation error whose message is `detail` as it is (the field's `invalid <field>` answer)."""
    return PydanticCustomError("api", "{detail}", {"detail": detail, **extra})


def text(name: str, limit: int, *, required: bool) -> BeforeValidator:
    """Text of at most `limit` characters (non-blank when required), stripped."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or (required and not value.strip()) or len(value) > limit:
            raise _refuse(f"{name} must be text of 1 to {limit} characters")
        return value.strip()

    return BeforeValidator(check)


def integer(name: str, low: int, high: int) -> BeforeValidator:
    """An integer in low..high (JSON's 4.0 is the integer 4)."""

    def check(value: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _refuse(f"{name} must be an integer from {low} to {high}, not {value!r}")
        return value

    return BeforeValidator(check)


def choice(name: str, valid: tuple[str, ...]) -> BeforeValidator:
    """One of `valid`; the answer lists them (also as `valid`)."""

    def check(value: Any) -> str:
        if value not in valid:
            raise _refuse(f"{name} must be one of {', '.join(valid)}, not {value!r}", valid=list(valid))
        return value

    return BeforeValidator(check)


def uuid_of(name: str) -> BeforeValidator:
    """A UUID."""

    def check(value: Any) -> uuid.UUID:
        try:
            return uuid.UUID(str(value))
        except ValueError:
            raise _refuse(f"{name} must be a UUID, not {value!r}") from None

    return BeforeValidator(check)


def reward_bound(name: str) -> BeforeValidator:
    """A reward from 0 to 1 (a query string's "0.5" too)."""

    def check(value: Any) -> float:
        number = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str) and value.isascii():
            with contextlib.suppress(ValueError):
                number = float(value)
        if number is None or not math.isfinite(number) or not 0 <= number <= 1:
            raise _refuse(f"{name} must be a number from 0 to 1, not {value!r}")
        return number

    return BeforeValidator(check)


_MOMENT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?([Zz]|[+-][0-9]{2}:?[0-9]{2})?)?"
)


def moment(name: str) -> BeforeValidator:
    """A date (2026-05-01) or date and time (2026-05-01T12:00, with an offset or in UTC)."""

    def check(value: Any) -> datetime:
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            if not isinstance(value, str) or not _MOMENT.fullmatch(value):
                raise ValueError(value)
            # Python reads at most 6 fraction digits: the rest of a finer time is dropped
            value = re.sub(r"(\.[0-9]{6})[0-9]+", r"\1", value)
            parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        except ValueError:
            raise _refuse(f"{name} must be a date or date-time such as 2026-05-01T12:00Z, not {value!r}") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

    return BeforeValidator(check)


STAGE_KEY = f"stage_[^,\\u0000]{{1,{STAGE_KEY_CHARS - len('stage_')}}}"


def stage_keys(name: str) -> BeforeValidator:
    """Comma-separated stage_* keys (at most MAX_STAGE_FILTERS)."""

    def check(value: Any) -> tuple[str, ...]:
        keys = tuple(value.split(",")) if isinstance(value, str) else ()
        if not keys or len(keys) > MAX_STAGE_FILTERS or not all(re.fullmatch(STAGE_KEY, key) for key in keys):
            raise _refuse(
                f"{name} must be up to {MAX_STAGE_FILTERS} comma-separated stage keys (stage_…), not {value!r}"
            )
        return keys

    return BeforeValidator(check)


def _category(value: Any) -> str:
    if not isinstance(value, str) or len(value) > FAILURE_CATEGORY_CHARS or "\x00" in value:
        raise _refuse(
            f"failureCategory must be text of at most {FAILURE_CATEGORY_CHARS} characters without NUL, not {value!r}"
        )
    return value.strip()


def _search(value: Any) -> str:
    if not isinstance(value, str) or len(value.strip()) > SEARCH_QUERY_CHARS or "\x00" in value:
        raise _refuse(f"q must be a search of at most {SEARCH_QUERY_CHARS} characters without NUL, not {value!r}")
    return value.strip()


def _task_key(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch("[0-9a-fA-F]{32}", value.strip()):
        raise _refuse(f"task must be a task key (the md5 of the task text: 32 hex digits), not {value!r}")
    return value.strip().lower()


def _attempt_count(value: Any) -> int:
    try:
        return check_attempt_count(value)
    except RunError as error:
        raise _refuse(str(error)) from None


def _optional_attempt_count(value: Any) -> int | None:
    return None if value is None else _attempt_count(value)


def _timeout_s(value: Any, info: ValidationInfo) -> float:
    ceiling = (info.context or {}).get("max_trial_timeout_s", DEFAULT_MAX_TRIAL_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= ceiling:
        raise _refuse(f"timeoutS must be a number of seconds from 0 to {ceiling:g}, not {value!r}")
    return float(value)


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


class ApiModel(BaseModel):
    """A body of this API: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)

    def to_json(self) -> dict[str, Any]:
        """The body as JSON types, with the API's (camelCase) names."""
        return self.model_dump(mode="json", by_alias=True)


Spec = Annotated[dict[str, Any], BeforeValidator(_spec), WithJsonSchema(SPEC_JSON_SCHEMA)]
Agent = Annotated[dict[str, Any], BeforeValidator(_agent), WithJsonSchema(AGENT_JSON_SCHEMA)]
StoredSpec = Annotated[dict[str, Any], WithJsonSchema(SPEC_JSON_SCHEMA)]
StoredAgent = Annotated[dict[str, Any], WithJsonSchema(AGENT_JSON_SCHEMA)]
Name = Annotated[
    str,
    text("name", 200, required=True),
    # The pattern is documented only: a NUL reaches PostgreSQL, whose refusal (400) names it.
    Field(min_length=1, max_length=200, json_schema_extra={"pattern": NAME_PATTERN}),
]
Stages = dict[str, float]


# Requests


class EnvironmentCreate(ApiModel):
    """POST /environments: a new environment of the organization."""

    name: Name
    description: Annotated[
        str, text("description", 2000, required=False), Field(max_length=2000, json_schema_extra={"pattern": NO_NUL})
    ] = ""


class EnvironmentVersionCreate(ApiModel):
    """POST /environments/{environmentId}/versions: the spec a new immutable version pins."""

    spec: Annotated[Spec, REPORT_MISSING]


class EvaluatorConfigCreate(ApiModel):
    """POST /evaluator-configs: an agent and how many attempts, steps and seconds each run gives it."""

    name: Name
    attempt_count: Annotated[int, BeforeValidator(_attempt_count), Field(ge=1, le=8)]
    max_steps: Annotated[int, integer("maxSteps", 1, 500), Field(ge=1, le=500)] = 30
    timeout_s: Annotated[
        float,
        BeforeValidator(_timeout_s),
        Field(gt=0, json_schema_extra={"maximum": DEFAULT_MAX_TRIAL_TIMEOUT_S}, description="Seconds per trial"),
    ] = 60
    agent: Agent


class EvaluationRunCreate(ApiModel):
    """POST /evaluation-runs: run an evaluator configuration against an environment version."""

    environment_version_id: Annotated[uuid.UUID, uuid_of("environmentVersionId"), REPORT_MISSING]
    evaluator_config_id: Annotated[uuid.UUID, uuid_of("evaluatorConfigId"), REPORT_MISSING]
    attempt_count: Annotated[
        Annotated[int, Field(ge=1, le=8)] | None,
        BeforeValidator(_optional_attempt_count),
        Field(description="Defaults to the configuration's attemptCount"),
    ] = None


class EvaluationRunReset(ApiModel):
    """POST /evaluation-runs/{runId}/reset: how the new run starts over."""

    mode: Annotated[Literal["new_workspace", "new_world"], choice("mode", RESETS)]


Reward = Annotated[float, WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1})]
StageKeys = Annotated[
    tuple[str, ...],
    WithJsonSchema({"type": "string", "pattern": f"^{STAGE_KEY}(,{STAGE_KEY}){{0,{MAX_STAGE_FILTERS - 1}}}$"}),
]


class TrialFilterQuery(ApiModel):
    """The trial filters every filtered read takes (the trials list and explorer, rollout exports)."""

    status: Annotated[TrialStatus | None, choice("status", TRIAL_STATUSES), Field(description="The trial's status")] = (
        None
    )
    reward_band: Annotated[
        RewardBand | None,
        choice("rewardBand", REWARD_BANDS),
        Field(description="failed: reward < 1; recovery: 0 < reward < 1; successful: reward = 1; unscored: none"),
    ] = None
    min_reward: Annotated[Reward | None, reward_bound("minReward"), Field(description="Reward at least")] = None
    max_reward: Annotated[Reward | None, reward_bound("maxReward"), Field(description="Reward at most")] = None
    failure_category: Annotated[
        str | None,
        BeforeValidator(_category),
        # The pattern is documented only: the validator's refusal names the NUL.
        Field(max_length=64, json_schema_extra={"pattern": NO_NUL}),
    ] = None
    stage_passed: Annotated[
        StageKeys | None,
        stage_keys("stagePassed"),
        Field(description="Comma-separated stage_* keys the trial passed (value 1)"),
    ] = None
    stage_failed: Annotated[
        StageKeys | None,
        stage_keys("stageFailed"),
        Field(description="Comma-separated stage_* keys the trial did not pass (a value below 1)"),
    ] = None
    environment_id: Annotated[uuid.UUID | None, uuid_of("environmentId")] = None
    environment_version_id: Annotated[uuid.UUID | None, uuid_of("environmentVersionId")] = None
    evaluator_config_id: Annotated[uuid.UUID | None, uuid_of("evaluatorConfigId")] = None
    evaluation_run_id: Annotated[uuid.UUID | None, uuid_of("evaluationRunId")] = None
    source: Annotated[
        TrialSource | None,
        choice("source", TRIAL_SOURCES),
        Field(description="imported: written by an import (it has an externalId); worker: run by a worker"),
    ] = None
    finished_after: Annotated[
        datetime | None, moment("finishedAfter"), Field(description="Finished at or after (UTC unless an offset)")
    ] = None
    finished_before: Annotated[
        datetime | None, moment("finishedBefore"), Field(description="Finished before (UTC unless an offset)")
    ] = None
    q: Annotated[
        str | None,
        BeforeValidator(_search),
        Field(
            max_length=SEARCH_QUERY_CHARS,
            description="Full-text search over the task, tool names, commands and arguments, observations, agent "
            'messages and the log: words, "a phrase", prefix*, -excluded, or',
            json_schema_extra={"pattern": NO_NUL},
        ),
    ] = None

    task: Annotated[
        str | None,
        BeforeValidator(_task_key),
        Field(
            description="A task: the md5 of its task text (32 hex digits), as compare's `tasks[].task`",
            json_schema_extra={"pattern": "^[0-9a-fA-F]{32}$"},
        ),
    ] = None

    def filters(self) -> TrialFilters:
        """The filters as the query builder takes them."""
        return TrialFilters(
            environment_id=self.environment_id,
            environment_version_id=self.environment_version_id,
            evaluation_run_id=self.evaluation_run_id,
            failure_category=self.failure_category or None,
            evaluator_config_id=self.evaluator_config_id,
            status=self.status,
            reward_band=self.reward_band,
            min_reward=self.min_reward,
            max_reward=self.max_reward,
            stage_passed=self.stage_passed or (),
            stage_failed=self.stage_failed or (),
            source=self.source,
            finished_after=self.finished_after,
            finished_before=self.finished_before,
            q=self.q or None,
            task=self.task,
        )


class TrialListQuery(TrialFilterQuery):
    """GET /trials: the filters, the order, and where the page starts."""

    sort: Annotated[
        TrialSort,
        choice("sort", TRIAL_SORTS),
        Field(description="failed: failures first, then newest; a key sorts ascending, -key descending"),
    ] = "failed"
    after: Annotated[uuid.UUID | None, uuid_of("after"), Field(description="The `next` of the previous page")] = None


class RolloutExportQuery(TrialFilterQuery):
    """GET /rollouts: which rollouts, in which format, after which cursor."""

    kind: Annotated[
        RolloutExportKind,
        choice("kind", EXPORT_KINDS),
        Field(description="Which rollouts, or preference pairs of them"),
    ] = "all"
    format: Annotated[RolloutExportFormat, choice("format", EXPORT_FORMATS), Field(description="Line format")] = (
        "atif-shaped"
    )
    after: Annotated[
        uuid.UUID | None,
        uuid_of("after"),
        Field(description="The X-Next-Cursor of an earlier export: only rollouts committed since"),
    ] = None


class CompareQuery(ApiModel):
    """GET /compare: two sides, each a run or an environment version (optionally narrowed to one evaluator)."""

    a: Annotated[uuid.UUID, uuid_of("a"), REPORT_MISSING, Field(description="A run id or an environment version id")]
    b: Annotated[uuid.UUID, uuid_of("b"), REPORT_MISSING, Field(description="A run id or an environment version id")]
    a_evaluator_config_id: Annotated[
        uuid.UUID | None, uuid_of("aEvaluatorConfigId"), Field(description="Narrow version side A to one evaluator")
    ] = None
    b_evaluator_config_id: Annotated[
        uuid.UUID | None, uuid_of("bEvaluatorConfigId"), Field(description="Narrow version side B to one evaluator")
    ] = None


# Responses


class Error(ApiModel):
    """Every 4xx/5xx of this API: what went wrong, and in `detail` the valid values."""

    error: str
    detail: str
    valid: list[str] | None = Field(default=None, description="The valid values, when there is a fixed set")
    line: int | None = Field(default=None, description="The NDJSON line an import refused")
    field: str | None = Field(
        default=None, description="The field of that line, or of the body, refused (e.g. nested too deep)"
    )


class Membership(ApiModel):
    """One organization the user belongs to, with the role there."""

    organization_id: uuid.UUID
    organization_name: str
    role: Literal["owner", "member", "viewer"]


class Me(ApiModel):
    """The authenticated user, the organization requests are scoped to, and every membership."""

    id: uuid.UUID
    email: str
    name: str
    organization_id: uuid.UUID
    role: Literal["owner", "member", "viewer"]
    memberships: list[Membership]


class Environment(ApiModel):
    """An environment with its latest version number (null before the first version)."""

    id: uuid.UUID
    name: str
    description: str
    latest_version: int | None


class EnvironmentVersion(ApiModel):
    """An immutable environment version: its number, spec (secrets masked) and the spec's hash."""

    id: uuid.UUID
    environment_id: uuid.UUID
    version: int = Field(ge=1)
    spec: StoredSpec
    spec_sha256: str = Field(
        pattern="^[0-9a-f]{64}$",
        description="sha256 of the canonical spec JSON, each env value replaced by its HMAC-SHA256 under the "
        "server's secrets key",
    )


class EvaluatorConfig(ApiModel):
    """An evaluator configuration: the agent (secrets masked), attempts per run, step and time budget."""

    id: uuid.UUID
    name: str
    agent: StoredAgent
    attempt_count: int = Field(ge=1, le=8)
    max_steps: int
    timeout_s: float


class Trial(ApiModel):
    """One attempt of a run: status, reward, failure category and stage_* credit."""

    id: uuid.UUID
    trial_number: int = Field(ge=1)
    status: str
    reward: float | None
    failure_category: str | None
    stages: Stages


class EvaluationRun(ApiModel):
    """A run: its status, pass@k, per-stage pass@k and every trial written so far."""

    id: uuid.UUID
    status: Literal["queued", "running", "completed", "failed", "cancelled"]
    attempt_count: int = Field(ge=1, le=8)
    reset_mode: Literal["initial", "new_workspace", "new_world"]
    reset_of_run_id: uuid.UUID | None
    environment_version_id: uuid.UUID
    evaluator_config_id: uuid.UUID
    pass_at_k: dict[str, float] | None
    stage_pass_at_k: dict[str, dict[str, float]] | None
    error: str | None
    created_at: datetime
    trials: list[Trial]


Interval = Annotated[list[float], Field(min_length=2, max_length=2, description="[low, high], 95%")]


class CompareEstimate(ApiModel):
    """A figure with its 95% interval (null when the sample cannot give one), its standard error (clustered by task;
    null when none) and, for pass@k, how many tasks it read (pass@k for k >= 2 reads only tasks with k attempts)."""

    value: float | None
    ci95: Interval | None
    stderr: float | None = Field(default=None, description="Standard error (cluster-robust CR0 over tasks)")
    tasks: int | None = Field(default=None, description="The tasks the figure read")


class CompareEvaluator(ApiModel):
    """One evaluator of a side: its runs and trials among those the task figures read."""

    id: uuid.UUID
    label: str
    runs: int
    trials: int


class CompareStage(ApiModel):
    """One stage_* key of a side: trials that reported it, trials that passed it (value 1), and the share."""

    trials: int
    passed: int
    rate: float | None


class CompareCategory(ApiModel):
    """One failure category of a side: its trials and their share of all the side's trials."""

    trials: int
    rate: float | None


class CompareSide(ApiModel):
    """One side's figures: counts, pass@k per k with intervals, mean reward, stages and failure categories."""

    kind: Literal["run", "version"]
    id: uuid.UUID
    label: str
    evaluator_config_id: uuid.UUID | None
    runs: int
    trials: int
    successes: int
    tasks: int = Field(description="Distinct tasks (by task text) among the trials the task figures read")
    evaluators: list[CompareEvaluator]
    mean_reward: CompareEstimate
    pass_at_k: dict[str, CompareEstimate]
    stages: dict[str, CompareStage]
    stage_order: list[str] = Field(description="The side's stage_* keys in pipeline order")
    failure_categories: dict[str, CompareCategory]


class CompareTest(ApiModel):
    """A two-sided test of B - A: the method, the difference with its 95% interval and standard error, the p-value,
    the verdict."""

    method: str
    difference: float | None
    ci95: Interval | None
    stderr: float | None = Field(default=None, description="Standard error of the difference")
    p_value: float | None
    verdict: str


class CompareEvaluatorTest(ApiModel):
    """pass@1's B - A over one evaluator's trials alone (an evaluator both sides ran, when a side mixes several)."""

    evaluator_config_id: uuid.UUID
    label: str
    pass_at1: CompareTest


class CompareTests(ApiModel):
    """The tests of pass@1 and of mean reward: the task is the unit, paired by task when the sides share their tasks
    (`unit` "trial" when a side holds one task: the exact tests over that task's trials)."""

    paired: bool
    unit: Literal["task", "trial"]
    paired_tasks: int = Field(description="Tasks both sides hold that the tests pair (0 when unpaired)")
    pass_at1: CompareTest
    mean_reward: CompareTest
    by_evaluator: list[CompareEvaluatorTest] = Field(
        description="Like compared with like: pass@1 per evaluator both sides ran (empty when each side has one)"
    )


class CompareWarning(ApiModel):
    """Why a comparison's pooled figures may mislead: `evaluator-mix`, `attempts-differ` or `one-task`."""

    code: str
    message: str


class CompareTaskSide(ApiModel):
    """One side's trials of one task (null for a task that side never attempted)."""

    trials: int
    successes: int
    mean_reward: float | None


class CompareTask(ApiModel):
    """One task of the per-task table: its key (md5 of the task text), the start of its text, each side's trials."""

    task: str
    text: str
    a: CompareTaskSide | None
    b: CompareTaskSide | None


class Comparison(ApiModel):
    """Two sides side by side, the tests of their difference, the warnings and the per-task table."""

    a: CompareSide
    b: CompareSide
    tests: CompareTests
    warnings: list[CompareWarning]
    tasks: list[CompareTask] = Field(description="The first 200 tasks of either side by task key")
    tasks_truncated: bool


class TrialSnippet(ApiModel):
    """Where a searched trial matched: its task, a step (with its number) or its log, the text around the match."""

    part: Literal["task", "step", "log"]
    step: int | None = Field(description="The matching step's number (null for the task and the log)")
    text: str
    matches: list[str] = Field(description="The matched words of `text`, in order")


class TrialSummary(ApiModel):
    """One trial of a filtered list (with `snippets` when the list is a search, `q`)."""

    id: uuid.UUID
    evaluation_run_id: uuid.UUID
    environment_version_id: uuid.UUID
    trial_number: int = Field(ge=1)
    status: str
    reward: float | None
    failure_category: str | None
    snippets: list[TrialSnippet] | None = None


class TrialPage(ApiModel):
    """A page of trials and the `after` of the next page (null on the last)."""

    trials: list[TrialSummary]
    next: uuid.UUID | None


class ImportResult(ApiModel):
    """What an import wrote: trials imported, trials already known (by externalId), the runs written."""

    imported: int
    skipped: int
    runs: list[uuid.UUID]


class Rollout(ApiModel):
    """One rollout: seed, reward, stage_* values and where its trajectory artifact is."""

    id: uuid.UUID
    seed: int
    reward: float | None
    environment_version_id: uuid.UUID
    evaluation_run_id: uuid.UUID
    stages: Stages
    trial_number: int
    failure_category: str | None
    trajectory_artifact_id: uuid.UUID | None


class TrajectoryArtifact(BaseModel):
    """The stored trial-{n}-trajectory.json: the seed's fields, richer fields beside them."""

    model_config = ConfigDict(extra="allow")
    schemaVersion: int
    log: str
    trajectory: str = Field(description='JSON text of {"steps": [{step, tool, command, observation}, …]}')


def validated(model: type[M], data: Any, **context: Any) -> M:
    """`data` as `model`, or answer 400 naming the first bad field the way the rest of the API does."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as error:
        raise _api_error(model, error.errors()[0]) from error


def _api_error(model: type[ApiModel], first: Any) -> ApiError:
    name = str(first["loc"][0]) if first["loc"] else "body"
    field = next((f for key, f in model.model_fields.items() if name in (key, f.alias)), None)
    if first["type"] == "missing" and field is not None:
        if REPORT_MISSING in field.metadata:
            return ApiError(400, f"missing {name}", f"{name} is required")
        checks: list[Callable[..., Any]] = [m.func for m in field.metadata if isinstance(m, BeforeValidator)]
        try:
            for check in checks:
                check(None)
        except PydanticCustomError as refused:
            return _api_error(model, {"loc": (name,), "type": "api", "msg": refused.message(), "ctx": refused.context})
        return ApiError(400, f"missing {name}", f"{name} is required")
    extra = {"valid": first["ctx"]["valid"]} if "valid" in (first.get("ctx") or {}) else {}
    return ApiError(400, f"invalid {name}", first["msg"], **extra)
