"""Trials: one trial with its trajectory for the viewer, and filtered lists that page by keyset."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal, get_args

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.outcome import EXPLANATIONS_KEY, REWARD_EXPLANATION, VERIFIER_EXPLANATION
from domain.trajectory import Step, structured
from queries.conditions import Conditions
from queries.filters import FAILED_RANK, TrialFilters
from queries.outcomes import TrialOutcome
from queries.rows import by_name
from queries.runs import stages_of, version_stages_passed_sql

PAGE_SIZE = 50


@dataclass(frozen=True, kw_only=True)
class TrialDetail(TrialOutcome):
    """Everything the trajectory viewer shows for one trial."""

    stages: dict[str, float]
    seed: int
    task: str
    log: str
    steps: list[Step]
    artifact_id: uuid.UUID | None
    artifact_filename: str | None
    run_id: uuid.UUID
    attempt_count: int
    environment_id: uuid.UUID
    environment_name: str
    version: int
    previous_id: uuid.UUID | None
    next_id: uuid.UUID | None
    run_number: int  # the `#n` of the run's label: its sequence number within the environment version
    explanations: dict[str, str]  # what the verifier said: stage key → words, "verifier" → on the whole trial,
    # "reward" → how the reward was derived from what it wrote
    imported: bool  # it ran in another harness: its steps, log and explanations are as its file said
    offered_tools: frozenset[str]  # the names of the tools the environment offered the agent

    @property
    def verdict(self) -> str | None:
        """The verifier's words on the trial as a whole (Harbor: its output), when it gave any."""
        return self.explanations.get(VERIFIER_EXPLANATION)

    @property
    def reward_derived(self) -> str | None:
        """How the reward was derived from what the verifier wrote ("reward.json's reward", "the mean of 2 rewards
        in reward.json: correctness, performance"), when that was said (Harbor tasks, native or imported)."""
        return self.explanations.get(REWARD_EXPLANATION)

    @property
    def download_name(self) -> str:
        """The name the trial page downloads the trajectory under (see download_name)."""
        return download_name(self.environment_name, self.version, self.run_number, self.trial_number)


def download_name(environment: str, version: int, run_number: int, trial_number: int) -> str:
    """A trajectory's name when downloaded from the trial page: `admin-console-v2-run-3-trial-1-trajectory.json`
    (environment, version, the run's `#n`, the trial); the stored artifact keeps the seed's `trial-{n}-trajectory.json`.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", environment).strip("-.") or "environment"
    return f"{safe}-v{version}-run-{run_number}-trial-{trial_number}-trajectory.json"


TRIAL = text(
    f"""
    SELECT t.id, t.trial_number, t.status, t.reward, t.failure_category, t.metrics, t.seed, t.task,
           t.log_excerpt AS log, t.steps AS stored_steps, a.id AS artifact_id, a.filename AS artifact_filename,
           t.evaluation_run_id AS run_id, er.attempt_count, e.id AS environment_id, e.name AS environment_name,
           v.version, t.started_at, t.finished_at, t.external_id IS NOT NULL AS imported, t.tools,
           (SELECT p.id FROM evaluation_trials p WHERE p.organization_id = t.organization_id
              AND p.evaluation_run_id = t.evaluation_run_id AND p.trial_number < t.trial_number
            ORDER BY p.trial_number DESC LIMIT 1) AS previous_id,
           (SELECT n.id FROM evaluation_trials n WHERE n.organization_id = t.organization_id
              AND n.evaluation_run_id = t.evaluation_run_id AND n.trial_number > t.trial_number
            ORDER BY n.trial_number LIMIT 1) AS next_id, er.sequence_number AS run_number,
           v.spec, {version_stages_passed_sql("v")} AS version_passed
    FROM evaluation_trials t
    JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
    JOIN environment_versions v ON v.organization_id = t.organization_id AND v.id = t.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    LEFT JOIN artifacts a ON a.organization_id = t.organization_id AND a.id = t.trajectory_artifact_id
    WHERE t.id = :id
    """
)


def trial_detail(session: Session, trial_id: uuid.UUID) -> TrialDetail | None:
    """The trial with its run, environment, steps, log and neighbours, or None when not in the organization."""
    row = session.execute(TRIAL, {"id": trial_id}).first()
    if row is None:
        return None
    return by_name(
        TrialDetail,
        row,
        read=("metrics", "stored_steps", "spec", "version_passed", "tools"),
        stages=stages_of(row.metrics, row.spec, row.version_passed),
        steps=[structured(step) for step in row.stored_steps or []],
        explanations=explained(row.metrics),
        offered_tools=tool_names(row.tools),
    )


def tool_names(tools: Any) -> frozenset[str]:
    """The names of the tools a trial's stored `tools` lists (the environment's words); none when it lists none."""
    if not isinstance(tools, list):
        return frozenset()
    return frozenset(tool["name"] for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str))


def explained(metrics: dict[str, Any] | None) -> dict[str, str]:
    """The verifier's explanations kept in a trial's metrics (stage key or "verifier" → text); {} when none."""
    said = (metrics or {}).get(EXPLANATIONS_KEY)
    if not isinstance(said, dict):
        return {}
    return {key: text for key, text in said.items() if isinstance(key, str) and isinstance(text, str)}


TrialSort = Literal[
    "failed", "newest", "reward", "-reward", "steps", "-steps", "duration", "-duration", "time", "-time"
]
TRIAL_SORTS: tuple[str, ...] = get_args(TrialSort)
# Each sort key is indexed as (organization_id, <key>, id) (migration 0019): keep the text the same.
SORT_KEYS = {
    "reward": "coalesce(t.reward, -1)",
    "steps": "trial_agent_steps(t.steps)",
    "duration": "coalesce(t.finished_at - t.started_at, '00:00:00'::interval)",
    "time": "coalesce(t.finished_at, '-infinity'::timestamptz)",
}
RANK = FAILED_RANK.format(t="t")


class UnknownCursor(LookupError):
    """The page cursor names no trial of the organization."""


@dataclass(frozen=True, kw_only=True)
class TrialRow(TrialOutcome):
    """One row of the trials explorer."""

    attempt_count: int
    run_id: uuid.UUID
    evaluator_name: str
    agent_kind: str | None
    environment_id: uuid.UUID
    environment_name: str
    version_id: uuid.UUID
    version: int
    agent_steps: int
    imported: bool
    environment_version_id: uuid.UUID
    review_state: str  # unreviewed, reviewed or excluded; failure_category is a reviewer's over the verifier's
    labels: list[dict[str, str]]  # each label's name and palette colour, by name

    @property
    def run_label(self) -> str:
        """A short readable name of the run: its evaluator and the last six hex digits of its id."""
        return f"{self.evaluator_name} · run {self.run_id.hex[-6:]}"


ROWS = f"""
    SELECT t.id, t.trial_number, er.attempt_count, t.status, t.reward,
           t.failure_category,
           t.evaluation_run_id AS run_id, c.name AS evaluator_name, c.agent ->> 'kind' AS agent_kind,
           e.id AS environment_id, e.name AS environment_name, v.id AS version_id, v.version,
           {SORT_KEYS["steps"]} AS agent_steps, t.started_at, t.finished_at, t.external_id IS NOT NULL AS imported,
           t.environment_version_id, coalesce(tr.review_state, 'unreviewed') AS review_state,
           (SELECT coalesce(json_agg(json_build_object('name', l.name, 'color', l.color) ORDER BY lower(l.name)),
                            '[]'::json)
            FROM trial_labels tl JOIN labels l ON l.organization_id = tl.organization_id AND l.id = tl.label_id
            WHERE tl.organization_id = t.organization_id AND tl.evaluation_trial_id = t.id) AS labels
    FROM evaluation_trials t
    LEFT JOIN trial_reviews tr ON tr.organization_id = t.organization_id AND tr.evaluation_trial_id = t.id
    JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
    JOIN evaluator_configs c ON c.organization_id = er.organization_id AND c.id = er.evaluator_config_id
    JOIN environment_versions v ON v.organization_id = t.organization_id AND v.id = t.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE t.organization_id = :org AND t.id = ANY(:ids)
"""


def list_trials(
    session: Session,
    filters: TrialFilters,
    after: uuid.UUID | None = None,
    sort: str = "failed",
    *,
    where: Conditions | None = None,
) -> tuple[list[TrialRow], uuid.UUID | None]:
    """A page of the trials matching `filters` (and `where`, conditions on `evaluation_trials t`) in `sort`
    order, from after trial `after`, and the cursor of the next page (None on the last).

    Raises UnknownCursor when `after` names no trial the organization can see.
    """
    page_size = PAGE_SIZE
    filters = filters.for_session(session)
    conditions = filters.conditions("t").with_(where or Conditions())
    conditions = conditions.also("t.organization_id = :org", org=session.info["org_id"])
    ids = _page_ids(session, conditions, filters.ranks(), after, sort, page_size + 1)
    rows = session.execute(text(ROWS), {"org": session.info["org_id"], "ids": ids}).all()
    by_id = {row.id: by_name(TrialRow, row) for row in rows}
    trials = [by_id[i] for i in ids[:page_size] if i in by_id]
    return trials, trials[-1].id if len(ids) > page_size and trials else None


def neighbour_ids(
    session: Session, filters: TrialFilters, trial_id: uuid.UUID, sort: str = "failed"
) -> tuple[uuid.UUID | None, uuid.UUID | None]:
    """The trials just before and just after `trial_id` in the list `filters` and `sort` make (the explorer's), or
    None at either end: the trial page's previous and next match. Raises UnknownCursor for a trial not visible."""
    filters = filters.for_session(session)
    where = filters.conditions("t").also("t.organization_id = :org", org=session.info["org_id"])
    ranks = filters.ranks()
    before = _page_ids(session, where, ranks, trial_id, sort, 1, backwards=True)
    after = _page_ids(session, where, ranks, trial_id, sort, 1)
    return (before[0] if before else None), (after[0] if after else None)


def matching_ids(session: Session, filters: TrialFilters, sort: str, limit: int) -> list[uuid.UUID]:
    """The ids of the first `limit` trials matching `filters` in `sort` order (the explorer's list, as one read):
    what a review queue walks."""
    filters = filters.for_session(session)
    where = filters.conditions("t").also("t.organization_id = :org", org=session.info["org_id"])
    return _page_ids(session, where, filters.ranks(), None, sort, limit)


def _page_ids(
    session: Session,
    where: Conditions,
    ranks: tuple[int, ...],
    after: uuid.UUID | None,
    sort: str,
    limit: int,
    *,
    backwards: bool = False,
) -> list[uuid.UUID]:
    """The ids of one page, in order: one index range scan per order (per failure rank for the default order).
    `backwards`: the trials before `after` instead, nearest first."""
    key = RANK if sort == "failed" else SORT_KEYS.get(sort.lstrip("-"))
    cursor = None
    if after is not None:
        cursor = session.execute(
            text(f"SELECT {key or 't.id'} FROM evaluation_trials t WHERE t.id = :after"), {"after": after}
        ).first()
        if cursor is None:
            raise UnknownCursor(after)
    params = {**where.params, "limit": limit, "after": after, "cursor_key": cursor[0] if cursor else None}
    if sort == "failed":
        branches = []
        # Forwards: this rank's older trials, then the lower ranks; backwards: this rank's newer ones, then higher.
        for rank in reversed(ranks) if backwards else ranks:
            if cursor is not None and (rank < cursor[0] if backwards else rank > cursor[0]):
                continue
            same = cursor is not None and rank == cursor[0]
            keyset = (" AND t.id > :after" if backwards else " AND t.id < :after") if same else ""
            branches.append(
                f"(SELECT t.id FROM evaluation_trials t WHERE {where.sql} AND {RANK} = {rank}{keyset} "
                f"ORDER BY t.id {'ASC' if backwards else 'DESC'} LIMIT :limit)"
            )
        if not branches:
            return []
        # Append runs the branches in order and stops once the limit is reached: failures first, each newest first.
        sql = "SELECT id FROM (" + " UNION ALL ".join(branches) + ") page LIMIT :limit"
    else:
        descending = (sort.startswith("-") or sort == "newest") != backwards
        direction, compare = ("DESC", "<") if descending else ("ASC", ">")
        keyset = ""
        if cursor is not None:
            keyset = (
                f" AND t.id {compare} :after" if key is None else f" AND ({key}, t.id) {compare} (:cursor_key, :after)"
            )
        order = f"t.id {direction}" if key is None else f"{key} {direction}, t.id {direction}"
        sql = f"SELECT t.id FROM evaluation_trials t WHERE {where.sql}{keyset} ORDER BY {order} LIMIT :limit"
    return [row[0] for row in session.execute(text(sql), params)]


@dataclass(frozen=True)
class Choice:
    """One option of a filter: its value and what the page shows."""

    value: str
    label: str
    group: str = ""


@dataclass(frozen=True)
class ExplorerChoices:
    """The options of the explorer's filter bar, from the organization's catalog and rollups."""

    environments: list[Choice]
    versions: list[Choice]
    evaluators: list[Choice]
    categories: list[str]
    stage_keys: list[str]
    labels: list[str]
    dataset_versions: list[Choice]


CHOICES_LIMIT = 500


CHOICES = """
    (SELECT 'version' AS kind, e.id::text AS value, e.name AS label, v.id::text AS extra, v.version AS number
     FROM environments e
     LEFT JOIN environment_versions v ON v.organization_id = e.organization_id AND v.environment_id = e.id
     ORDER BY e.name, e.id, v.version DESC LIMIT :limit)
    UNION ALL
    (SELECT 'evaluator', id::text, name, agent ->> 'kind', NULL FROM evaluator_configs ORDER BY name, id LIMIT :limit)
    UNION ALL
    (SELECT DISTINCT 'category', failure_category, failure_category, NULL, NULL::int FROM failure_category_counts
     WHERE trials > 0 ORDER BY 2 LIMIT :limit)
    UNION ALL
    (SELECT DISTINCT 'stage', stage_key, stage_key, NULL, NULL::int FROM stage_metric_rollups ORDER BY 2 LIMIT :limit)
    UNION ALL
    (SELECT 'label', name, name, color, NULL::int FROM labels ORDER BY lower(name) LIMIT :limit)
    UNION ALL
    (SELECT 'dataset', dv.id::text, d.name, NULL, dv.version
     FROM datasets d
     JOIN dataset_versions dv ON dv.organization_id = d.organization_id AND dv.dataset_id = d.id
     ORDER BY d.name, d.id, dv.version DESC LIMIT :limit)
"""


def explorer_choices(session: Session) -> ExplorerChoices:
    """Environments, versions, evaluator configurations, failure categories, stage keys, labels and dataset versions
    to filter by (one statement: the catalog's first CHOICES_LIMIT of each, the categories and stage keys from the
    rollups)."""
    rows = session.execute(text(CHOICES), {"limit": CHOICES_LIMIT}).all()
    versions = [row for row in rows if row.kind == "version"]
    return ExplorerChoices(
        list({row.value: Choice(row.value, row.label) for row in versions}.values()),
        [Choice(row.extra, f"{row.label} v{row.number}", row.label) for row in versions if row.extra is not None],
        [Choice(row.value, f"{row.label} ({row.extra or 'agent'})") for row in rows if row.kind == "evaluator"],
        [row.value for row in rows if row.kind == "category"],
        [row.value for row in rows if row.kind == "stage"],
        [row.value for row in rows if row.kind == "label"],
        [Choice(row.value, f"{row.label} v{row.number}", row.label) for row in rows if row.kind == "dataset"],
    )


class TrajectoryChanged(Exception):
    """A trajectory file rendered from its trial no longer has the sha256 recorded with it: the trial's log or
    steps were changed after it was recorded (by hand: the app never changes them)."""


@dataclass(frozen=True)
class TrajectoryFile:
    """A trial's trajectory file, ready to download."""

    body: bytes
    content_type: str
    download_name: str


def _intact(body: bytes | memoryview, sha256: str) -> bytes:
    """`body` when its sha256 is the recorded one, else TrajectoryChanged."""
    data = bytes(body)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise TrajectoryChanged(f"its sha256 is no longer the recorded {sha256}")
    return data


# A trajectory file's bytes: stored, or (a file recorded since migration 0037) rendered from its trial.
TRAJECTORY_BODY = "coalesce(a.body, trial_trajectory_document(t.log_excerpt, t.steps))"


def trajectory_file(session: Session, trial_id: uuid.UUID) -> TrajectoryFile | None:
    """The trial's trajectory artifact and its download name, or None when the trial (in the organization) has none.
    Raises TrajectoryChanged when the bytes no longer have the recorded sha256."""
    row = session.execute(
        text(
            f"""
            SELECT {TRAJECTORY_BODY} AS body, a.sha256, a.content_type, e.name, v.version, er.sequence_number,
                   t.trial_number
            FROM evaluation_trials t
            JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
            JOIN environment_versions v ON v.organization_id = t.organization_id AND v.id = t.environment_version_id
            JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
            JOIN artifacts a ON a.organization_id = t.organization_id AND a.id = t.trajectory_artifact_id
            WHERE t.id = :id
            """
        ),
        {"id": trial_id},
    ).first()
    if row is None:
        return None
    return TrajectoryFile(
        _intact(row.body, row.sha256),
        row.content_type,
        download_name(row.name, row.version, row.sequence_number, row.trial_number),
    )


def artifact_body(session: Session, artifact_id: uuid.UUID) -> tuple[bytes, str, str] | None:
    """An artifact's bytes, content type and filename, or None when the organization has no such artifact. Raises
    TrajectoryChanged when a rendered trajectory file no longer has its recorded sha256."""
    row = session.execute(
        text(
            f"""
            SELECT {TRAJECTORY_BODY} AS body, a.body IS NULL AS rendered, a.sha256, a.content_type, a.filename
            FROM artifacts a
            LEFT JOIN evaluation_trials t ON a.body IS NULL AND t.organization_id = a.organization_id
                                         AND t.id = a.id AND t.trajectory_artifact_id = a.id
            WHERE a.id = :id
            """
        ),
        {"id": artifact_id},
    ).first()
    if row is None:
        return None
    if row.body is None:  # rendered, and its trial is gone: nothing to render from
        raise TrajectoryChanged("its trial no longer exists")
    body = _intact(row.body, row.sha256) if row.rendered else bytes(row.body)
    return body, row.content_type, row.filename


COUNT_CAP = 10_000  # trials counted exactly; past it the planner's estimate, said as "about"


@dataclass(frozen=True)
class TrialCount:
    """How many trials match a filter: exact up to COUNT_CAP, the planner's estimate beyond it."""

    trials: int
    exact: bool


def count_trials(session: Session, filters: TrialFilters, cap: int = COUNT_CAP) -> TrialCount:
    """How many of the organization's trials match `filters`: counted while at most `cap` (one index range read of
    at most cap + 1 entries), else estimated by the planner from the same statement (never below cap + 1)."""
    filters = filters.for_session(session)
    where = filters.conditions("t").also("t.organization_id = :org", org=session.info["org_id"])
    matching = f"SELECT 1 FROM evaluation_trials t WHERE {where.sql}"
    counted = session.execute(text(f"SELECT count(*) FROM ({matching} LIMIT {cap + 1}) m"), where.params).scalar_one()
    if counted <= cap:
        return TrialCount(counted, True)
    plan = session.execute(text(f"EXPLAIN (FORMAT JSON) {matching}"), where.params).scalar_one()
    estimate = int(plan[0]["Plan"]["Plan Rows"])
    return TrialCount(max(estimate, cap + 1), False)
