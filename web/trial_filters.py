"""The trial filters, declared once: each one's query-string name, TrialFilters field, rule, documentation and chip.

From `TRIAL_FILTERS` come the query model every filtered read takes (`TrialFilterQuery`: the trials explorer
page, GET /api/v1/trials, GET /api/v1/rollouts), its `filters()` (the queries.filters.TrialFilters the one query
builder takes), the explorer's `FILTER_PARAMS`, its removable chips and its filter bar (each filter's `Control`:
the form field the template renders, in this order).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema, create_model

from domain.rules import FAILURE_CATEGORY, MOMENT, REWARD, UUID_RULE, Rule, hex_key, one_of, stage_keys, text
from domain.triage import HUMAN_CATEGORY, LABEL_NAMES, REVIEW_STATE
from domain.vocabulary import REVIEW_STATES, TRIAL_STATUSES, ReviewState, TrialStatus
from queries.filters import MAX_STAGE_FILTERS, REWARD_BANDS, TRIAL_SOURCES, RewardBand, TrialFilters, TrialSource
from queries.search import SEARCH_QUERY_CHARS
from queries.trials import TRIAL_SORTS, ExplorerChoices, TrialSort
from web.validation import QueryModel

BAND_LABELS = {
    "failed": "failed (reward < 1)",
    "recovery": "recovery (0 < reward < 1)",
    "successful": "successful (reward = 1)",
    "unscored": "unscored",
}
Chip = Callable[[str, ExplorerChoices], str]  # a filter's value (one key of a list) → its chip's label
Options = Callable[
    [ExplorerChoices, str], list[tuple[str | None, list[tuple[str, str]]]]
]  # → (group, [(value, label)])


@dataclass(frozen=True)
class Control:
    """How the explorer's filter bar offers a filter: a labelled input (`kind` its type) or a select whose options
    come from `options` (the organization's catalog, and the value given when the catalog lacks it)."""

    label: str
    kind: str = "text"  # "search", "text", "number" or "select"
    attrs: tuple[tuple[str, str], ...] = ()  # the input's other attributes (placeholder, size, min, list, …)
    options: Options | None = None
    css_class: str | None = None


@dataclass(frozen=True)
class TrialFilter:
    """One filter: its query-string name, the type it holds, its rule, its documentation, its chip's label (a
    format string for the value, or a function of the value and the catalog), its control on the filter bar, and
    whether it is a comma-separated list (one chip per key). Its TrialFilters field is its name in snake_case."""

    name: str
    type: Any
    rule: Rule
    description: str | None
    chip: str | Chip
    control: Control
    listed: bool = False

    @property
    def field(self) -> str:
        """The queries.filters.TrialFilters field it fills: minReward → min_reward."""
        return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", self.name).lower()

    def chip_label(self, value: str, choices: ExplorerChoices) -> str:
        """The label of its chip for `value` (one key of a list filter)."""
        return self.chip.format(value) if isinstance(self.chip, str) else self.chip(value, choices)


def _fixed(*pairs: tuple[str, str]) -> Options:
    return lambda _, __: [(None, list(pairs))]


GROUPED = ("versions", "dataset_versions")  # ExplorerChoices' lists shown in groups (a Choice's `group`)


def _catalog(attribute: str) -> Options:
    """The options of one of ExplorerChoices' lists (versions grouped by environment, dataset versions by dataset)."""

    def options(choices: ExplorerChoices, _: str) -> list[tuple[str | None, list[tuple[str, str]]]]:
        items = getattr(choices, attribute)
        if attribute not in GROUPED:
            return [(None, [(c.value, c.label) for c in items])]
        groups: dict[str | None, list[tuple[str, str]]] = {}
        for c in items:
            groups.setdefault(c.group, []).append((c.value, c.label))
        return list(groups.items())

    return options


def _categories(choices: ExplorerChoices, given: str) -> list[tuple[str | None, list[tuple[str, str]]]]:
    known = [(c, c) for c in choices.categories]
    return [(None, known + ([(given, given)] if given and given not in choices.categories else []))]


def _catalog_filter(name: str, attribute: str, label: str, description: str | None = None) -> TrialFilter:
    """A filter on the id of one of the organization's environments, versions, evaluators or dataset versions
    (`attribute`: its list in ExplorerChoices): a select of their names, and a chip that names the chosen one
    ("version: admin-console v2")."""

    def chip(value: str, choices: ExplorerChoices) -> str:
        named = next((c.label for c in getattr(choices, attribute) if c.value == value), value)
        return f"{label.lower()}: {named}"

    control = Control(label, "select", options=_catalog(attribute))
    return TrialFilter(name, uuid.UUID, UUID_RULE, description, chip, control)


def _field(size: int, placeholder: str, label: str) -> Control:
    """A text input of `size` characters with a placeholder."""
    return Control(label, attrs=(("size", str(size)), ("placeholder", placeholder)))


def _stage_keys(label: str, placeholder: str) -> Control:
    """A comma-separated list of stage keys, suggested from the page's <datalist id="stage-keys">."""
    return Control(label, attrs=(("list", "stage-keys"), ("placeholder", placeholder)))


LabelNames = Annotated[tuple[str, ...], WithJsonSchema({"type": "string"})]
StageKeys = Annotated[tuple[str, ...], WithJsonSchema({"type": "string"})]
REWARD_INPUT = (("min", "0"), ("max", "1"), ("step", "any"), ("size", "5"))
STAGE_KEYS = stage_keys(MAX_STAGE_FILTERS)

SEARCH_HELP = (
    "Full-text search over the task, tool names, commands and arguments, observations, agent messages and the log: "
    'words, "a phrase", prefix*, -excluded, or'
)
SEARCH = Control(
    "Search trajectories",
    "search",
    (
        ("maxlength", str(SEARCH_QUERY_CHARS)),
        ("placeholder", '"permission denied", restock*, SKU-7062'),
        ("aria-keyshortcuts", "/"),  # static/keys.js: "/" on any page puts the cursor here
    ),
    css_class="search-field",
)
STATUSES = Control("Status", "select", options=_fixed(*((s, s) for s in ("failed", "error", "succeeded"))))
SOURCES = Control("Source", "select", options=_fixed(("worker", "run by a worker"), ("imported", "imported")))
SOURCE_HELP = "imported: written by an import (it has an externalId); worker: run by a worker"
BAND_HELP = "failed: reward < 1; recovery: 0 < reward < 1; successful: reward = 1; unscored: none"
TASK_KEY = hex_key(32, "must be a task key (the md5 of the task text: 32 hex digits)")
TASK_HELP = "A task: the md5 of its task text (32 hex digits), as compare's `tasks[].task`"
LABEL_HELP = "Comma-separated label names (whatever their case): trials carrying every one"
REVIEW_HELP = "unreviewed (the default), reviewed, or excluded from training exports"
HUMAN_HELP = "The failure category a reviewer set over the verifier's"
REVIEWS = Control("Review", "select", options=_fixed(*((s, s) for s in REVIEW_STATES)))
DATASET_RUN_HELP = (
    "The trials of every evaluation run of that dataset run, the runs a retry replaced included (POST "
    "/api/v1/dataset-runs)"
)
DATASET_VERSION_HELP = "The trials of every dataset run of that dataset version (every evaluator that ran it)"
PASSED_HELP = "Comma-separated stage_* keys the trial passed (value 1)"
FAILED_HELP = "Comma-separated stage_* keys the trial did not pass (a value below 1)"


def _band_chip(value: str, _: ExplorerChoices) -> str:
    return f"reward: {BAND_LABELS.get(value, value)}"


def _source_chip(value: str, _: ExplorerChoices) -> str:
    return "imported trials" if value == "imported" else "trials run by workers"


# In the order the explorer's chips show them (docs/dashboard.md, Trial filters).
# fmt: off
TRIAL_FILTERS = (
    TrialFilter("q", str, text(SEARCH_QUERY_CHARS, what="a search"), SEARCH_HELP, "search: {}", SEARCH),
    TrialFilter("status", TrialStatus, one_of(*TRIAL_STATUSES), "The trial's status", "status: {}", STATUSES),
    TrialFilter("rewardBand", RewardBand, one_of(*REWARD_BANDS), BAND_HELP, _band_chip,
                Control("Reward", "select", options=_fixed(*BAND_LABELS.items()))),
    TrialFilter("minReward", float, REWARD, "Reward at least", "reward ≥ {}",
                Control("Reward from", "number", REWARD_INPUT)),
    TrialFilter("maxReward", float, REWARD, "Reward at most", "reward ≤ {}",
                Control("Reward to", "number", REWARD_INPUT)),
    TrialFilter("failureCategory", str, FAILURE_CATEGORY, "The trial's failure category", "category: {}",
                Control("Category", "select", options=_categories)),
    TrialFilter("stagePassed", StageKeys, STAGE_KEYS, PASSED_HELP, "{} passed",
                _stage_keys("Stages passed", "stage_inventory"), listed=True),
    TrialFilter("stageFailed", StageKeys, STAGE_KEYS, FAILED_HELP, "{} failed",
                _stage_keys("Stages failed", "stage_order"), listed=True),
    _catalog_filter("environmentId", "environments", "Environment"),
    _catalog_filter("environmentVersionId", "versions", "Version"),
    _catalog_filter("evaluatorConfigId", "evaluators", "Evaluator"),
    TrialFilter("evaluationRunId", uuid.UUID, UUID_RULE, None, lambda v, _: f"run {v[-6:]}",
                _field(12, "run UUID", "Run id")),
    TrialFilter("datasetRunId", uuid.UUID, UUID_RULE, DATASET_RUN_HELP, lambda v, _: f"dataset run {v[-6:]}",
                _field(12, "dataset run UUID", "Dataset run id")),
    _catalog_filter("datasetVersionId", "dataset_versions", "Dataset version", DATASET_VERSION_HELP),
    TrialFilter("source", TrialSource, one_of(*TRIAL_SOURCES), SOURCE_HELP, _source_chip, SOURCES),
    TrialFilter("finishedAfter", datetime, MOMENT, "Finished at or after (UTC unless an offset)", "finished from {}",
                _field(16, "2026-05-01T12:00", "Finished from")),
    TrialFilter("finishedBefore", datetime, MOMENT, "Finished before (UTC unless an offset)", "finished before {}",
                _field(16, "2026-05-02", "Finished before")),
    TrialFilter("task", str, TASK_KEY, TASK_HELP, lambda v, _: f"task {v[:8]}", _field(12, "task key (md5)", "Task")),
    TrialFilter("label", LabelNames, LABEL_NAMES, LABEL_HELP, "label: {}",
                Control("Labels", attrs=(("list", "label-names"), ("placeholder", "flaky-verifier"))), listed=True),
    TrialFilter("reviewState", ReviewState, REVIEW_STATE, REVIEW_HELP, "review: {}", REVIEWS),
    TrialFilter("humanCategory", str, HUMAN_CATEGORY, HUMAN_HELP, "human category: {}",
                _field(14, "wrong_customer", "Human category")),
)
# fmt: on
FILTER_PARAMS = tuple(f.name for f in TRIAL_FILTERS)
FILTER_BY_NAME = {f.name: f for f in TRIAL_FILTERS}
RESOLVED = {"label_ids"}  # TrialFilters fields a read fills in itself (TrialFilters.for_session), not parameters
if {f.field for f in TRIAL_FILTERS} != {f.name for f in fields(TrialFilters)} - RESOLVED:  # pragma: no cover
    raise RuntimeError("TRIAL_FILTERS and queries.filters.TrialFilters name different filters")


def _filter_field(spec: TrialFilter) -> Any:
    return (Annotated[spec.type | None, spec.rule, Field(alias=spec.name, description=spec.description)], None)


_FilterFields: Any = create_model(  # the fields of TRIAL_FILTERS, in their order
    "TrialFilterFields", __base__=QueryModel, **{spec.field: _filter_field(spec) for spec in TRIAL_FILTERS}
)


class TrialFilterQuery(_FilterFields):
    """The trial filters every filtered read takes (the trials list and explorer, rollout exports)."""

    def filters(self) -> TrialFilters:
        """The filters as the query builder takes them (an empty value is no filter)."""
        given = {spec.field: getattr(self, spec.field) for spec in TRIAL_FILTERS}
        return TrialFilters(**{name: value for name, value in given.items() if value not in (None, "", ())})


SORT_HELP = "failed: failures first, then newest; a key sorts ascending, -key descending"


class TrialListQuery(TrialFilterQuery):
    """GET /trials: the filters, the order, and where the page starts."""

    sort: Annotated[TrialSort, one_of(*TRIAL_SORTS), Field(description=SORT_HELP)] = "failed"
    after: Annotated[uuid.UUID | None, UUID_RULE, Field(description="The `next` of the previous page")] = None


@dataclass(frozen=True)
class FilterChip:
    """An active filter (one key of a list filter), and the parameters without it."""

    label: str
    without: dict[str, str]


def filter_chips(args: dict[str, str], choices: ExplorerChoices, kept: tuple[str, ...] = ("sort",)) -> list[FilterChip]:
    """One removable chip per active filter (per key of a list filter), in TRIAL_FILTERS' order; `without` keeps
    the other filters and the `kept` parameters."""
    given = {name: value for name, value in args.items() if name in FILTER_BY_NAME or name in kept}
    found = []
    for spec in TRIAL_FILTERS:
        if spec.name not in given:
            continue
        values = given[spec.name].split(",") if spec.listed else [given[spec.name]]
        for value in values:
            rest = [v for v in values if v != value]
            without = {k: v for k, v in given.items() if k != spec.name}
            if rest:
                without[spec.name] = ",".join(rest)
            found.append(FilterChip(spec.chip_label(value, choices), without))
    return found


# The filters the explorer's bar always shows; the others fold under "More filters" (on a phone, one toggle).
BASIC_FILTERS = ("q", "status", "rewardBand", "environmentId", "reviewState")
