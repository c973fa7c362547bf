"""How many lines each export of an environment holds now: the Export page's counts, equal to its downloads.

The rollups count every rollout; an export leaves out the trials a reviewer excluded (unless includeExcluded) and,
in TRL, the rollouts without a turn of the agent's own. Both are few, and each is read from its own index (the
excluded reviews, the agent-steps expression index) and taken from the rollups' figures, so the page never scans an
environment's rollouts. TRL preference pairs are the exception: whether a pair is a TRL row depends on both sides'
prompts, so they are counted on request (trl_preference_rows) by building them as the download does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

from queries.exports import (
    ALL_LIMIT,
    EXPORT_KINDS,
    KIND_CONDITIONS,
    NOT_EXCLUDED,
    WITHOUT_AGENT_TURN,
    excluded_rollouts,
    preference_pairs_sql,
    preference_sides,
    select_rollouts,
)
from queries.filters import TrialFilters
from queries.training_formats import trl_preference


@dataclass(frozen=True)
class KindCount:
    """What the downloads of one export kind hold: `lines` (its NDJSON and ATIF lines), `trl` (its TRL rows; None
    for preference pairs, counted on request) and `without_agent_turn` (the rollouts TRL leaves out)."""

    lines: int
    trl: int | None
    without_agent_turn: int


@dataclass(frozen=True)
class ExportCounts:
    """Each kind's counts for an environment, and how many rollouts of excluded trials they leave out (or hold,
    `include_excluded`)."""

    kinds: dict[str, KindCount]
    excluded: int
    include_excluded: bool


ROLLUP = text(
    """
    SELECT coalesce(sum(s.rollouts), 0) AS "all", coalesce(sum(s.successes), 0) AS successful,
           coalesce(sum(s.scored - s.successes), 0) AS failed,
           coalesce(sum(s.scored - s.successes - s.zero_rewards), 0) AS recovery,
           count(*) FILTER (WHERE s.max_reward > s.min_reward) AS preference
    FROM environment_versions v
    JOIN environment_version_stats s ON s.organization_id = v.organization_id AND s.environment_version_id = v.id
    WHERE v.organization_id = :org AND v.environment_id = :environment_id
    """
)
ROLLOUT_KINDS = tuple(kind for kind in EXPORT_KINDS if kind != "preference")


def _without_agent_turn(
    session: Session, org_id: uuid.UUID, environment_id: uuid.UUID, since_seq: int | None, include_excluded: bool
) -> dict[str, int]:
    """Per rollout kind, the environment's rollouts without a turn of the agent's own (`all`: from `since_seq`, the
    oldest of its newest 1000), read from the agent-steps index."""
    counted = ", ".join(
        f'count(*) FILTER (WHERE {"r.seq >= :since" if kind == "all" else KIND_CONDITIONS[kind]}) AS "{kind}"'
        for kind in ROLLOUT_KINDS
    )
    excluded = "" if include_excluded else f"AND {NOT_EXCLUDED}"
    row = session.execute(
        text(
            f"""SELECT {counted}
            FROM evaluation_trials a
            JOIN rollouts r ON r.organization_id = a.organization_id AND r.evaluation_trial_id = a.id
            WHERE a.organization_id = :org AND {WITHOUT_AGENT_TURN.format(t="a")}
              AND r.environment_version_id = ANY(ARRAY(
                  SELECT id FROM environment_versions WHERE environment_id = :environment_id))
              {excluded}"""
        ),
        {"org": org_id, "environment_id": environment_id, "since": since_seq or 0},
    ).one()
    return dict(row._mapping)


def _oldest_of_all(session: Session, org_id: uuid.UUID, filters: TrialFilters, include_excluded: bool) -> int | None:
    """The export position of the oldest rollout kind=all holds when the cap leaves some out, else None."""
    selection = select_rollouts(org_id, "all", filters, include_excluded=include_excluded)
    sql = f"SELECT r.seq {selection.source()} ORDER BY r.seq DESC OFFSET {ALL_LIMIT - 1} LIMIT 1"
    seq: int | None = session.execute(text(sql), selection.params).scalar()
    return seq


def export_counts(
    session: Session, org_id: uuid.UUID, environment_id: uuid.UUID, *, include_excluded: bool = False
) -> ExportCounts:
    """The lines each export kind of an environment holds now, as its downloads do (`all` capped at 1000)."""
    filters = TrialFilters(environment_id=environment_id)
    rollup = session.execute(ROLLUP, {"org": org_id, "environment_id": environment_id}).one()._mapping
    excluded = excluded_rollouts(session, org_id, filters)
    held = {kind: rollup[kind] - (0 if include_excluded else getattr(excluded, kind)) for kind in ROLLOUT_KINDS}
    pairs = rollup["preference"]
    if excluded.all and not include_excluded:  # an excluded side changes a version's pair: they are drawn again
        query = preference_pairs_sql(org_id, filters)
        pairs = session.execute(text(f"SELECT count(*) FROM ({query.sql}) p"), query.params).scalar_one()
    capped = held["all"] > ALL_LIMIT
    oldest = _oldest_of_all(session, org_id, filters, include_excluded) if capped else None
    left_out = _without_agent_turn(session, org_id, environment_id, oldest, include_excluded)
    kinds = {}
    for kind in ROLLOUT_KINDS:
        lines = min(held[kind], ALL_LIMIT) if kind == "all" else held[kind]
        kinds[kind] = KindCount(lines, lines - left_out[kind], left_out[kind])
    kinds["preference"] = KindCount(pairs, None, 0)
    return ExportCounts(kinds, excluded.all, include_excluded)


def trl_preference_rows(
    session: Session, org_id: uuid.UUID, environment_id: uuid.UUID, *, include_excluded: bool = False
) -> int:
    """How many rows the environment's TRL preference export holds: its pairs within a task, each built as the
    download builds it (a pair whose two prompts differ is no row)."""
    query = preference_pairs_sql(
        org_id, TrialFilters(environment_id=environment_id), within_task=True, include_excluded=include_excluded
    )
    return sum(1 for _, preferred, rejected in preference_sides(session, query) if trl_preference(preferred, rejected))
