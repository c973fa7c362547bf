"""The /api/v1 contract: request and response bodies as pydantic models, the source of /api/v1/openapi.json.

Every field rule is domain.rules' (the same the pages, ingest and the CLI apply); `validated()` answers a refusal as
400 `{"error": "invalid <field>", "detail": "<field> must be …"}`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from blueprints.api import ApiError
from domain.agents import AGENT_JSON_SCHEMA
from domain.rules import UUID_RULE, integer_from, one_of
from domain.scoring import ATTEMPT_COUNT
from domain.specs import SPEC_JSON_SCHEMA
from domain.triage import HUMAN_CATEGORY, LABEL_COLOR, LABEL_DESCRIPTION, LABEL_NAME, NOTE_BODY, REASON, REVIEW_STATE
from domain.vocabulary import RESETS, LabelColor, ReviewState
from importers.ingest import IngestTrial
from queries.export_formats import DEFAULT_FORMAT, KNOWN_FORMAT
from queries.exports import EXPORT_KINDS, RolloutExportKind
from web.export_options import IncludeExcluded
from web.sides import CompareQuery
from web.trial_filters import TrialFilterQuery, TrialListQuery
from web.validation import REPORT_MISSING, ApiModel, Invalid, M, parse

ImportLine = IngestTrial  # one line of POST /evaluation-runs/import
__all__ = ["REPORT_MISSING", "ApiModel", "CompareQuery", "TrialFilterQuery", "TrialListQuery"]


StoredSpec = Annotated[dict[str, Any], WithJsonSchema(SPEC_JSON_SCHEMA)]
StoredAgent = Annotated[dict[str, Any], WithJsonSchema(AGENT_JSON_SCHEMA)]
Stages = dict[str, float]


# Requests


class EvaluationRunCreate(ApiModel):
    """POST /evaluation-runs: run an evaluator configuration against an environment version."""

    environment_version_id: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING]
    evaluator_config_id: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING]
    attempt_count: Annotated[
        int | None, ATTEMPT_COUNT, Field(description="Defaults to the configuration's attemptCount")
    ] = None


class EvaluationRunReset(ApiModel):
    """POST /evaluation-runs/{runId}/reset: how the new run starts over."""

    mode: Annotated[Literal["new_workspace", "new_world"], one_of(*RESETS)]


class RolloutExportQuery(TrialFilterQuery):
    """GET /rollouts: which rollouts, in which format, after which cursor."""

    kind: Annotated[
        RolloutExportKind,
        one_of(*EXPORT_KINDS),
        Field(description="Which rollouts, or preference pairs of them"),
    ] = "all"
    format: Annotated[str, KNOWN_FORMAT, Field(description="Line format")] = DEFAULT_FORMAT
    after: Annotated[
        uuid.UUID | None,
        UUID_RULE,
        Field(description="The X-Next-Cursor of an earlier export: only rollouts committed since"),
    ] = None
    include_excluded: IncludeExcluded = False


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
    """An evaluator configuration: the agent (secrets masked), attempts per run, step and time budget, and the
    training checkpoint it evaluates with that checkpoint's step (null when not given)."""

    id: uuid.UUID
    name: str
    agent: StoredAgent
    attempt_count: int = Field(ge=1, le=8)
    max_steps: int
    timeout_s: float
    checkpoint: str | None = None
    step: int | None = None


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
    """One side's figures: counts, pass@k per k with intervals, mean reward, stages and failure categories.

    A dataset run's figures read the tasks it has finished (from its rollup); `unfinishedTasks` counts the others,
    which the per-task table lists with `finished` false."""

    kind: Literal["run", "version", "dataset_run"]
    id: uuid.UUID
    label: str
    evaluator_config_id: uuid.UUID | None
    dataset_id: uuid.UUID | None = Field(default=None, description="A dataset run's dataset")
    dataset_version_id: uuid.UUID | None = Field(default=None, description="A dataset run's dataset version")
    runs: int
    trials: int
    successes: int
    tasks: int = Field(
        description="Distinct tasks among the trials the task figures read: by task text, or a dataset run's finished "
        "tasks (environment version and world seed)"
    )
    unfinished_tasks: int = Field(default=0, description="A dataset run's tasks whose run has not ended")
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
    shared_tasks: int = Field(description="Tasks both sides hold (0: unpaired, over different draws)")
    no_verdict: str | None = Field(
        default=None,
        description="Why the sides get no verdict at all (dataset runs of different datasets); the tests are then "
        "not run: their figures are null and their verdict says this",
    )
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
    """One side's trials of one task (null for a task that side never attempted); `finished` false for a dataset
    run's task whose run has not ended (its trials so far, left out of every figure and test), with that run's
    status."""

    trials: int
    successes: int
    mean_reward: float | None
    finished: bool = True
    status: str | None = Field(default=None, description="An unfinished task's run status: queued or running")


class CompareTask(ApiModel):
    """One task of the per-task table: its key (md5 of the task text; a dataset run's `<environment version id>:<world
    seed>`), the start of its text, each side's trials."""

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
    tasks: list[CompareTask] = Field(
        description="The first 200 tasks of either side, a dataset run's in its version's order, then by task key"
    )
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
    failure_category: str | None = Field(description="A reviewer's humanCategory when set, else the verifier's")
    review_state: ReviewState
    labels: list[str]
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
    differing: list[str] = Field(
        default_factory=list,
        description="externalIds already there whose trial in this body differs (reward or ATIF trajectory): kept "
        "as imported before",
    )


class Exclusion(ApiModel):
    """Why a reviewer excluded a trial from training exports, and who."""

    reason: str
    reviewer: str | None = Field(description="The email of the reviewer who excluded it (null: no longer a user)")


class Rollout(ApiModel):
    """One rollout: seed, reward, stage_* values and where its trajectory artifact is."""

    id: uuid.UUID
    seed: int
    reward: float | None
    environment_version_id: uuid.UUID
    evaluation_run_id: uuid.UUID
    stages: Stages
    trial_number: int
    failure_category: str | None = Field(description="humanCategory when a reviewer set one, else verifierCategory")
    verifier_category: str | None
    human_category: str | None
    review_state: ReviewState
    labels: list[str]
    notes: list[dict[str, Any]]
    exclusion: Exclusion | None = Field(description="When reviewState is excluded: its reason and reviewer")
    trajectory_artifact_id: uuid.UUID | None


class TrajectoryArtifact(BaseModel):
    """The stored trial-{n}-trajectory.json: the seed's fields, richer fields beside them."""

    model_config = ConfigDict(extra="allow")
    schemaVersion: int
    log: str
    trajectory: str = Field(description='JSON text of {"steps": [{step, tool, command, observation}, …]}')


# Triage


LabelName = Annotated[str, LABEL_NAME, REPORT_MISSING]


class LabelCreate(ApiModel):
    """POST /labels: a label of the organization's set (its name kept in its normal form: unique, and like no other
    label's)."""

    name: LabelName
    color: Annotated[LabelColor, LABEL_COLOR, Field(description="A colour of the fixed palette")] = "gray"
    description: Annotated[str, LABEL_DESCRIPTION] = ""


class Label(ApiModel):
    """A label of the set, and how many trials carry it."""

    id: uuid.UUID
    name: str
    color: LabelColor
    description: str
    trials: int


class TrialLabels(ApiModel):
    """PUT /trials/{trialId}/labels: the trial's labels, by name (each a label of the set); the reply, after."""

    labels: Annotated[list[LabelName], Field(max_length=100, description="Label names, each at most once")]


class TrialReviewChange(ApiModel):
    """PATCH /trials/{trialId}: any of the review state (excluded needs `reason`) and the human failure category
    (null clears it: the verifier's shows again)."""

    review_state: Annotated[ReviewState | None, REVIEW_STATE] = None
    reason: Annotated[str | None, REASON, Field(description="Why the trial is excluded")] = None
    human_category: Annotated[str | None, HUMAN_CATEGORY, Field(description="Overrides failureCategory")] = None


class NoteCreate(ApiModel):
    """POST /trials/{trialId}/notes: a plain-text note on the trial, or on its step `step`."""

    body: Annotated[str, NOTE_BODY, REPORT_MISSING]
    step: Annotated[int | None, integer_from(1, 100_000), Field(description="The step it is about")] = None


class NoteEdit(ApiModel):
    """PATCH /trials/{trialId}/notes/{noteId}: the note's new text."""

    body: Annotated[str, NOTE_BODY, REPORT_MISSING]


class Note(ApiModel):
    """A note, with its author's email (null once they left the organization)."""

    id: uuid.UUID
    step: int | None
    body: str
    author: str | None
    created_at: datetime
    updated_at: datetime


class AuditEntry(ApiModel):
    """One change of a trial's triage: who, when, what, the value before and after."""

    at: datetime
    actor: str | None
    action: str
    before: Any
    after: Any


class TrialReview(ApiModel):
    """What reviewers recorded on a trial."""

    labels: list[str]
    review_state: ReviewState
    reason: str
    human_category: str | None
    verifier_category: str | None = Field(description="The failure category the verifier gave")
    failure_category: str | None = Field(description="humanCategory when set, else verifierCategory")
    notes: list[Note]


class TrialDetail(TrialReview):
    """One trial: its outcome, stages, steps and triage (with the audit trail, newest first)."""

    id: uuid.UUID
    evaluation_run_id: uuid.UUID
    environment_id: uuid.UUID
    trial_number: int = Field(ge=1)
    attempt_count: int
    status: str
    reward: float | None
    stages: Stages
    seed: int
    task: str
    steps: list[dict[str, Any]]
    audit: list[AuditEntry]


def validated(model: type[M], data: Any, **context: Any) -> M:
    """`data` as `model`, or answer 400 naming the first bad field the way the rest of the API does."""
    try:
        return parse(model, data, **context)
    except Invalid as error:
        raise ApiError(error.status, error.error, error.detail, **error.extra) from error
