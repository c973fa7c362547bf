"""Trial filters: what a trials list, a rollout export or a failure count is narrowed to, as SQL conditions.

One builder for every read that takes filters: the trials explorer (/trials,
GET /api/v1/trials), the rollout exports (GET /api/v1/rollouts, preference
pairs included) and the capability gap's counts. A trial is named by what it
belongs to (environment, environment version, evaluator configuration,
evaluation run, dataset run, dataset version), by how it ended (status, reward
band or range, failure category, stage_* results), by where it ran (imported or
by a worker) and when it finished, and by its task (the md5 of its task text:
compare's task key). A rollout is a scored trial and a rollup row counts a
version's trials, so the same filters read on each of those tables: the
columns only trials have are read on the trial a query joins (`trials`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Literal, get_args

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.rules import normal_name
from queries.conditions import Conditions
from queries.search import search_conditions

RewardBand = Literal["failed", "recovery", "successful", "unscored"]
REWARD_BANDS: tuple[str, ...] = get_args(RewardBand)
TrialSource = Literal["imported", "worker"]
TRIAL_SOURCES: tuple[str, ...] = get_args(TrialSource)
MAX_STAGE_FILTERS = 8  # stage keys per stagePassed / stageFailed

# The trials explorer's default order puts failures first: 2 = scored below 1, 1 = unscored, 0 = reward 1. The rule
# is one SQL function (migration 0031) that the planner inlines, indexed as (organization_id, <this>, id) and
# written into trial_stages.failed_rank by the triggers.
FAILED_RANK = "trial_failed_rank({t}.reward)"
BAND_RANKS: dict[str, tuple[int, ...]] = {"failed": (2,), "recovery": (2,), "successful": (0,), "unscored": (1,)}
# The evaluation runs of a dataset run (those a retry replaced too: a retry's run names the same dataset run) and of
# every dataset run of a dataset version, by ix_evaluation_runs_dataset_run (and dataset_runs' index by version); and
# the environment versions they ran (dataset_tasks: a dataset version's tasks).
DATASET_RUNS = {
    "dataset_run_id": "SELECT id FROM evaluation_runs WHERE dataset_run_id = :dataset_run_id",
    "dataset_version_id": (
        "SELECT id FROM evaluation_runs WHERE dataset_run_id = "
        "ANY(ARRAY(SELECT id FROM dataset_runs WHERE dataset_version_id = :dataset_version_id))"
    ),
}
DATASET_VERSIONS = {
    "dataset_run_id": "SELECT environment_version_id FROM evaluation_runs WHERE dataset_run_id = :dataset_run_id",
    "dataset_version_id": (
        "SELECT environment_version_id FROM dataset_tasks WHERE dataset_version_id = :dataset_version_id"
    ),
}
BAND_CONDITIONS = {
    "failed": "{r}.reward < 1",
    "recovery": "{r}.reward > 0 AND {r}.reward < 1",
    "successful": "{r}.reward = 1",
    "unscored": "{r}.reward IS NULL",
}


@dataclass(frozen=True)
class TrialFilters:
    """Which trials a read covers (each optional; none given: every trial of the organization)."""

    environment_id: uuid.UUID | None = None
    environment_version_id: uuid.UUID | None = None
    evaluation_run_id: uuid.UUID | None = None
    dataset_run_id: uuid.UUID | None = None  # every evaluation run of the dataset run (a retried task's earlier too)
    dataset_version_id: uuid.UUID | None = None  # every evaluation run of every dataset run of the dataset version
    failure_category: str | None = None
    evaluator_config_id: uuid.UUID | None = None
    status: str | None = None
    reward_band: str | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    stage_passed: tuple[str, ...] = ()
    stage_failed: tuple[str, ...] = ()
    source: str | None = None
    finished_after: datetime | None = None
    finished_before: datetime | None = None
    q: str | None = None  # a full-text search (queries.search) over the trial's task, steps and log
    task: str | None = None  # md5 of the task text, 32 lowercase hex digits (the task key compare groups by)
    label: tuple[str, ...] = ()  # label names (compared in their normal form): trials carrying every one
    label_ids: tuple[uuid.UUID | None, ...] | None = None  # `label` resolved (for_session): None, not yet
    review_state: str | None = None  # unreviewed, reviewed or excluded (queries/triage.py)
    human_category: str | None = None  # the failure category a reviewer set over the verifier's

    @property
    def active(self) -> bool:
        """True when any filter is given."""
        return any(getattr(self, f.name) not in (None, ()) for f in fields(self))

    @property
    def reads_trials(self) -> bool:
        """True when a filter reads a column only evaluation_trials has (a rollout read then joins its trial)."""
        return bool(
            self.failure_category
            or self.status
            or self.stage_passed
            or self.stage_failed
            or self.source
            or self.finished_after
            or self.finished_before
            or self.q
            or self.task
            or self.label
            or self.review_state
            or self.human_category
        )

    @property
    def names_datasets(self) -> bool:
        """True when a dataset run or a dataset version filter is given."""
        return self.dataset_run_id is not None or self.dataset_version_id is not None

    def for_session(self, session: Session) -> TrialFilters:
        """The filters ready for one read in `session`: label names resolved to ids (one statement), so PostgreSQL
        plans each label by its own frequency, and statements planned for their own values when a filter's
        selectivity lies in its value (a search, a label, a review state), not one generic plan for every value."""
        if self.q or self.label or self.review_state or self.human_category:
            session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
        if not self.label or self.label_ids is not None:
            return self
        rows = session.execute(
            text("SELECT name, id FROM labels WHERE name = ANY(:names)"),
            {"names": [normal_name(name) for name in self.label]},
        )
        found = {row.name: row.id for row in rows}
        return replace(self, label_ids=tuple(found.get(normal_name(name)) for name in self.label))

    def ranks(self) -> tuple[int, ...]:
        """The FAILED_RANK values the reward filters leave, highest first."""
        ranks: tuple[int, ...] = BAND_RANKS.get(self.reward_band or "", (2, 1, 0))
        if self.min_reward is not None or self.max_reward is not None:
            ranks = tuple(r for r in ranks if r != 1)  # a reward range holds scored trials only
            if self.min_reward is not None and self.min_reward >= 1:
                ranks = tuple(r for r in ranks if r == 0)
            if self.max_reward is not None and self.max_reward < 1:
                ranks = tuple(r for r in ranks if r == 2)
        return ranks

    def conditions(
        self, rows: str, versions: str | None = None, trials: str | None = None, within: tuple[int, ...] = (2, 1, 0)
    ) -> Conditions:
        """The filters as conditions on the table aliased `rows`.

        `rows` is evaluation_trials, rollouts or a per-version rollup: any table
        with environment_version_id, and with evaluation_run_id, reward or
        failure_category when filtered by them. `versions` is the alias of the
        environment_versions row a query already joins to each of `rows`; the
        environment and version filters then read on it (once per version).
        `trials` is the alias of the evaluation_trials row joined to each of
        `rows` (`rows` itself when not given): status, failure category,
        stages, source and time read on it. `within` are the FAILED_RANK values
        the caller's own conditions leave (an export of failed rollouts: 2).
        """
        t = trials or rows
        conditions = Conditions()
        if self.environment_id is not None:
            if versions:
                clause = f"{versions}.environment_id = :environment_id"
            else:
                # The versions as an array computed once: PostgreSQL then never plans a join of each row to them.
                clause = (
                    f"{rows}.environment_version_id = "
                    "ANY(ARRAY(SELECT id FROM environment_versions WHERE environment_id = :environment_id))"
                )
            conditions = conditions.also(clause, environment_id=self.environment_id)
        if self.environment_version_id is not None:
            version = f"{versions}.id" if versions else f"{rows}.environment_version_id"
            conditions = conditions.also(
                f"{version} = :environment_version_id", environment_version_id=self.environment_version_id
            )
        if self.evaluation_run_id is not None:
            conditions = conditions.also(
                f"{rows}.evaluation_run_id = :evaluation_run_id", evaluation_run_id=self.evaluation_run_id
            )
        conditions = self._datasets(conditions, rows, versions)
        if self.evaluator_config_id is not None:
            conditions = conditions.also(
                f"EXISTS (SELECT 1 FROM evaluation_runs fr WHERE fr.organization_id = {rows}.organization_id "
                f"AND fr.id = {rows}.evaluation_run_id AND fr.evaluator_config_id = :evaluator_config_id)",
                evaluator_config_id=self.evaluator_config_id,
            )
        if self.failure_category is not None:
            conditions = conditions.also(
                f"{t}.failure_category = :failure_category", failure_category=self.failure_category
            )
        if self.status is not None:
            conditions = conditions.also(f"{t}.status = :status", status=self.status)
        if self.reward_band is not None:
            conditions = conditions.also(BAND_CONDITIONS[self.reward_band].format(r=rows))
        if self.min_reward is not None:
            conditions = conditions.also(f"{rows}.reward >= :min_reward", min_reward=self.min_reward)
        if self.max_reward is not None:
            conditions = conditions.also(f"{rows}.reward <= :max_reward", max_reward=self.max_reward)
        # A stage result is a row of trial_stages (migration 0024), one per trial and stage (its key, migration
        # 0038), so PostgreSQL plans the EXISTS as a join it may run from either side: in the failed-first order's
        # branches (one rank each) a page walks the trials with that result newest first (ix_trial_stages_results)
        # where that is shorter than walking the trials, and otherwise probes the key once per trial.
        # The ranks the reward filters leave are said on the stage row too, so PostgreSQL's statistics of
        # trial_stages (which results occur in which rank) tell it when few trials match in any order.
        rank = FAILED_RANK.format(t=t)
        left = tuple(r for r in self.ranks() if r in within)
        in_ranks = f" AND ts.failed_rank IN ({', '.join(map(str, left))})" if 0 < len(left) < 3 else ""
        results = (("stage_passed", "", self.stage_passed), ("stage_failed", "NOT ", self.stage_failed))
        for name, result, keys in results:
            for number, key in enumerate(keys):
                conditions = conditions.also(
                    f"EXISTS (SELECT 1 FROM trial_stages ts WHERE ts.organization_id = {t}.organization_id "
                    f"AND ts.stage_key = :{name}_{number} AND {result}ts.passed AND ts.failed_rank = {rank}{in_ranks} "
                    f"AND ts.evaluation_trial_id = {t}.id)",
                    **{f"{name}_{number}": key},
                )
        if self.source is not None:
            conditions = conditions.also(f"{t}.external_id IS {'NOT ' if self.source == 'imported' else ''}NULL")
        if self.finished_after is not None:
            conditions = conditions.also(f"{t}.finished_at >= :finished_after", finished_after=self.finished_after)
        if self.finished_before is not None:
            conditions = conditions.also(f"{t}.finished_at < :finished_before", finished_before=self.finished_before)
        if self.task is not None:
            conditions = conditions.also(f"md5({t}.task) = :task", task=self.task)
        if self.q:
            conditions = conditions.with_(search_conditions(self.q, t))
        return self._triage(conditions, t, in_ranks.replace("ts.", "{a}."))

    def _datasets(self, conditions: Conditions, rows: str, versions: str | None) -> Conditions:
        """Dataset run and dataset version conditions: the row's run is one of theirs (and, when the query joins
        each row's environment version, that version is one they ran, so a version they never ran is passed over
        at once).

        The runs are an array computed once, from ix_evaluation_runs_dataset_run: PostgreSQL then reads the rows
        of those runs by their run (uq_evaluation_trials_trial_number_per_run, ix_rollouts_org_run) and orders
        those alone, at a cost that follows the dataset run's trials and never the organization's history. (An
        EXISTS on the row's run is planned as a walk of the order index newest first, which for an older dataset
        run reads every newer trial.)
        """
        for name in ("dataset_run_id", "dataset_version_id"):
            value = getattr(self, name)
            if value is None:
                continue
            conditions = conditions.also(
                f"{rows}.evaluation_run_id = ANY(ARRAY({DATASET_RUNS[name]}))", **{name: value}
            )
            if versions:
                conditions = conditions.also(f"{versions}.id = ANY(ARRAY({DATASET_VERSIONS[name]}))")
        return conditions

    def _triage(self, conditions: Conditions, t: str, in_ranks: str) -> Conditions:
        """Label, review state and human category conditions. trial_labels and trial_reviews are keyed like
        trial_stages (migration 0032): a label's trials, or the reviewed or excluded ones, in failed-first rank."""
        rank = FAILED_RANK.format(t=t)
        for number, name in enumerate(self.label):
            if self.label_ids is not None and self.label_ids[number] is None:
                conditions = conditions.also("FALSE")  # no label of that name: no trial carries it
                continue
            label = (
                f":label_{number}"
                if self.label_ids is not None
                else f"(SELECT l.id FROM labels l WHERE l.name = :label_{number})"
            )
            conditions = conditions.also(
                f"EXISTS (SELECT 1 FROM trial_labels tl WHERE tl.organization_id = {t}.organization_id "
                f"AND tl.label_id = {label} AND tl.failed_rank = {rank}{in_ranks.format(a='tl')} "
                f"AND tl.evaluation_trial_id = {t}.id)",
                **{f"label_{number}": self.label_ids[number] if self.label_ids is not None else normal_name(name)},
            )
        review = (
            f"FROM trial_reviews tr WHERE tr.organization_id = {t}.organization_id AND tr.evaluation_trial_id = {t}.id"
        )
        if self.review_state == "unreviewed":
            conditions = conditions.also(f"NOT EXISTS (SELECT 1 {review} AND tr.review_state <> 'unreviewed')")
        elif self.review_state is not None:
            ranked = f"tr.failed_rank = {rank}{in_ranks.format(a='tr')}"
            reviewed = f"EXISTS (SELECT 1 {review} AND tr.review_state = :review_state AND {ranked})"
            conditions = conditions.also(reviewed, review_state=self.review_state)
        if self.human_category is not None:
            human = f"EXISTS (SELECT 1 {review} AND tr.human_category = :human_category)"
            conditions = conditions.also(human, human_category=self.human_category)
        return conditions
