"""PRIVATE rollout exports: which rollouts each kind holds, in which order, and their NDJSON lines.

The default (atif-shaped) line is built by PostgreSQL itself, so the export
streams nearly as fast as `COPY (same query) TO STDOUT`; the ATIF and TRL
documents are built in Python from the same rows (queries.training_formats).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal, get_args

from pydantic import TypeAdapter
from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.json_depth import OMITTED
from queries.conditions import Conditions
from queries.export_formats import DEFAULT_FORMAT
from queries.filters import BAND_RANKS, TrialFilters
from queries.rows import by_name

RolloutExportKind = Literal["all", "successful", "failed", "recovery", "preference"]
RolloutExportKindSchema = TypeAdapter(RolloutExportKind)
EXPORT_KINDS: tuple[str, ...] = get_args(RolloutExportKind)

ALL_LIMIT = 1000
STREAM_BATCH = 2000
FILENAMES = {
    "all": "agentforge-rollouts-all.jsonl",
    "successful": "agentforge-rollouts-successful.jsonl",
    "failed": "agentforge-rollouts-failed.jsonl",
    "recovery": "agentforge-rollouts-recovery.jsonl",
    "preference": "agentforge-preferences.jsonl",
}
KIND_CONDITIONS = {
    "all": "TRUE",
    "successful": "r.reward = 1",
    "failed": "r.reward IS NOT NULL AND r.reward < 1",
    "recovery": "r.reward > 0 AND r.reward < 1",
    "scored": "r.reward IS NOT NULL",  # what preference pairs are drawn from
}
# The failed-first ranks (queries.filters.FAILED_RANK) each kind holds: those of the reward band of its name, and
# for the others both scored ranks (a rollout is scored, so never rank 1).
KIND_RANKS = {kind: BAND_RANKS.get(kind, (2, 0)) for kind in KIND_CONDITIONS}


def export_filename(kind: str, export_format: str) -> str:
    """The download name: agentforge-rollouts-<kind>.jsonl, with .atif/.trl (the format's name) before .jsonl for
    the variants."""
    name = FILENAMES[kind]
    return name if export_format == DEFAULT_FORMAT else name.replace(".jsonl", f".{export_format}.jsonl")


@dataclass(frozen=True)
class Selection:
    """Which rollouts an export holds: conditions on `rollouts r` (and its trial `t`, when `joins_trial`)."""

    where: Conditions
    joins_trial: bool = False

    @property
    def params(self) -> dict[str, Any]:
        """The parameters the conditions bind."""
        return self.where.params

    def source(self, extra_joins: str = "", *, with_trial: bool = False) -> str:
        """FROM … WHERE … over `rollouts r` (joined to its trial `t` when asked or filtered by it), with
        `extra_joins` for the columns a query needs."""
        trial = TRIAL_JOIN if with_trial or self.joins_trial else ""
        return f"FROM rollouts r {trial} {extra_joins} WHERE {self.where.sql}"


@dataclass(frozen=True)
class Query:
    """A finished SQL statement with its bound parameters."""

    sql: str
    params: dict[str, Any]


# A trial a reviewer excluded stays out of training exports unless includeExcluded=true (a hash anti-join of the
# few excluded trials, read once per export).
NOT_EXCLUDED = """NOT EXISTS (SELECT 1 FROM trial_reviews xr WHERE xr.organization_id = r.organization_id
    AND xr.evaluation_trial_id = r.evaluation_trial_id AND xr.review_state = 'excluded')"""


def select_rollouts(
    org_id: uuid.UUID,
    kind: str,
    filters: TrialFilters,
    after_seq: int | None = None,
    *,
    include_excluded: bool = False,
) -> Selection:
    """The rollouts of `kind` in the organization, narrowed by `filters`, newer than `after_seq`, without the
    trials a reviewer excluded unless `include_excluded`."""
    where = filters.conditions("r", trials="t", within=KIND_RANKS[kind]).also("r.organization_id = :org", org=org_id)
    where = where.also(KIND_CONDITIONS[kind])
    if not include_excluded:
        where = where.also(NOT_EXCLUDED)
    if after_seq is not None:
        where = where.also("r.seq > :after_seq", after_seq=after_seq)
    return Selection(where, filters.reads_trials)


def cursor_seq_of(session: Session, rollout_id: uuid.UUID) -> int | None:
    """The export position of a rollout the organization can see (None when it cannot)."""
    return session.execute(text("SELECT seq FROM rollouts WHERE id = :id"), {"id": rollout_id}).scalar()


@dataclass(frozen=True)
class Cursor:
    """Where the next incremental pull continues: the newest rollout this response holds."""

    rollout_id: uuid.UUID
    seq: int


def next_cursor(session: Session, kind: str, selection: Selection, newest_first: bool) -> Cursor | None:
    """The newest rollout the export will stream (kind=all without a cursor is capped at the newest 1000)."""
    if kind == "all" and not newest_first:  # oldest first, capped: the last of the first 1000
        sql = f"SELECT id, seq FROM (SELECT r.id, r.seq {selection.source()} ORDER BY r.seq LIMIT {ALL_LIMIT}) s "
        sql += "ORDER BY seq DESC LIMIT 1"
    else:
        sql = f"SELECT r.id, r.seq {selection.source()} ORDER BY r.seq DESC LIMIT 1"
    row = session.execute(text(sql), selection.params).first()
    return Cursor(rollout_id=row.id, seq=row.seq) if row else None


def ordering(kind: str, newest_first: bool) -> str:
    """ORDER BY/LIMIT of a rollout export: `all` is the newest 1000 (or the 1000 after a cursor)."""
    if kind == "all":
        return f"ORDER BY r.seq DESC LIMIT {ALL_LIMIT}" if newest_first else f"ORDER BY r.seq LIMIT {ALL_LIMIT}"
    return "ORDER BY r.seq"


TRIAL_JOIN = """
    JOIN evaluation_trials t ON t.organization_id = r.organization_id AND t.id = r.evaluation_trial_id"""
# A trial's stage_* values: its metrics hold them and the verifier's "explanations" only (a CHECK, migration 0036).
STAGES = "(t.metrics - 'explanations')"

# What reviewers recorded on the rollout's trial (migration 0032), as scalar subqueries of the line, each one probe
# of an (organization_id, trial) index evaluated on the lines in the export's order (joins of these tables let
# PostgreSQL hash them and then sort the finished lines on disk). Only a triaged trial (migration 0033) is probed:
# an untouched one answers its defaults without reading a triage table. The trial's failure_category already is the
# reviewer's when one was set.
_OF_TRIAL = "WHERE {a}.organization_id = r.organization_id AND {a}.evaluation_trial_id = r.evaluation_trial_id"


def _if_triaged(subquery: str, otherwise: str = "NULL") -> str:
    return f"CASE WHEN t.triaged THEN coalesce({subquery}, {otherwise}) ELSE {otherwise} END"


_REVIEW = "(SELECT rv.{column} FROM trial_reviews rv " + _OF_TRIAL.format(a="rv") + ")"
HUMAN = _if_triaged(_REVIEW.format(column="human_category"))
VERIFIER = f"""CASE WHEN t.triaged AND {_REVIEW.format(column="evaluation_trial_id")} IS NOT NULL
    THEN {_REVIEW.format(column="verifier_category")} ELSE t.failure_category END"""
REVIEW_STATE = _if_triaged(_REVIEW.format(column="review_state"), "'unreviewed'")
_LABELS_OF = f"""(SELECT json_agg(l.name ORDER BY lower(l.name))
    FROM trial_labels tl JOIN labels l ON l.organization_id = tl.organization_id AND l.id = tl.label_id
    {_OF_TRIAL.format(a="tl")})"""
_NOTES_OF = f"""(SELECT json_agg(json_build_object('step', n.step, 'body', n.body) ORDER BY n.id)
    FROM trial_notes n {_OF_TRIAL.format(a="n")})"""
LABELS = _if_triaged(_LABELS_OF, "'[]'::json")
NOTES = _if_triaged(_NOTES_OF, "'[]'::json")
# Why an excluded trial was excluded, and by whom: the reason, and the email of the reviewer whose change of the review
# (the trial's newest `review` audit entry, which every change of state or reason writes) made it what it is; the
# review's last writer when no entry is left. Read only for an excluded trial (`rv`, its review), so only an export
# with includeExcluded=true ever reads it.
_EXCLUDER = """(SELECT u.email FROM users u WHERE u.id = coalesce(
    (SELECT a.actor_user_id FROM trial_audit a WHERE a.organization_id = rv.organization_id
       AND a.evaluation_trial_id = rv.evaluation_trial_id AND a.action = 'review' ORDER BY a.id DESC LIMIT 1),
    rv.updated_by_user_id))"""
EXCLUSION_OF_REVIEW = f"""CASE WHEN rv.review_state = 'excluded'
    THEN json_build_object('reason', rv.reason, 'reviewer', {_EXCLUDER}) END"""
EXCLUSION = _if_triaged(f"(SELECT {EXCLUSION_OF_REVIEW} FROM trial_reviews rv {_OF_TRIAL.format(a='rv')})")
TRIAGE_COLUMNS = f"""t.failure_category, {VERIFIER} AS verifier_category, {HUMAN} AS human_category,
    {REVIEW_STATE} AS review_state, {LABELS} AS labels, {NOTES} AS notes, {EXCLUSION} AS exclusion"""


def _json(expression: str) -> str:
    """An SQL value as JSON text, `null` for NULL (to_json quotes and escapes text as JSON does)."""
    return f"coalesce(to_json({expression})::text, 'null')"


def _quoted(uuid_expression: str) -> str:
    """A uuid as a JSON string (its text holds nothing to escape)."""
    return f"""'"' || {uuid_expression} || '"'"""


def _members(*pairs: tuple[str, str]) -> str:
    """SQL text of JSON object members `"key": value, …` from (key, SQL yielding JSON text) pairs."""
    return " || ', ' || ".join(f"""'"{key}": ' || {value}""" for key, value in pairs)


# The line's triage members. An untriaged trial's are constants beside its category; a triaged one's come from one
# probe of its review (with its labels and notes), made only for it: probing each member apart cost the export a
# fifth of its time with 5% of trials triaged.
_TRIAGED = _members(
    (
        "verifierCategory",
        _json("CASE WHEN rv.evaluation_trial_id IS NULL THEN t.failure_category ELSE rv.verifier_category END"),
    ),
    ("humanCategory", _json("rv.human_category")),
    ("reviewState", _json("coalesce(rv.review_state, 'unreviewed')")),
    ("labels", f"coalesce({_LABELS_OF}::text, '[]')"),
    ("notes", f"coalesce({_NOTES_OF}::text, '[]')"),
    ("exclusion", _json(EXCLUSION_OF_REVIEW)),
)
_REVIEW_OF_TRIAL = _OF_TRIAL.format(a="rv").replace("WHERE", "ON", 1)
_UNTRIAGED = _members(
    ("verifierCategory", _json("t.failure_category")),
    ("humanCategory", "'null'"),
    ("reviewState", "'\"unreviewed\"'"),
    ("labels", "'[]'"),
    ("notes", "'[]'"),
    ("exclusion", "'null'"),
)
TRIAGE_MEMBERS = (
    f"CASE WHEN t.triaged THEN (SELECT {_TRIAGED} FROM (VALUES (1)) AS one (x) "
    f"LEFT JOIN trial_reviews rv {_REVIEW_OF_TRIAL}) ELSE {_UNTRIAGED} END"
)

ROLLOUT_MEMBERS = " || ', ' || ".join(
    (
        _members(
            # ids, integers and rewards (finite: a CHECK holds them to 0..1) need no escaping
            ("rolloutId", _quoted("r.id")),
            ("seed", "r.seed::text"),
            ("reward", "coalesce(r.reward::text, 'null')"),
            ("evaluationRunId", _quoted("r.evaluation_run_id")),
            ("environmentVersionId", _quoted("r.environment_version_id")),
            ("trialNumber", "t.trial_number::text"),
            ("failureCategory", _json("t.failure_category")),
        ),
        f"({TRIAGE_MEMBERS})",
        _members(("stages", f"{STAGES}::text")),
    )
)

# The line is built by concatenating JSON text PostgreSQL writes (to_json of each value, the stored steps as they
# are), in one pass over each trial: json_build_object over the same values cost the export a third of its time.
# Whether a trial has steps, and whether they nest too deep, are read from flags a trigger keeps (migration 0036), not
# from the steps, which are read once. Steps stored nested deeper than MAX_STORED_JSON_DEPTH (before JSON that comes
# in was held to MAX_JSON_DEPTH, or written by hand) are left out of the line, which says so in
# `trajectoryOmitted`: every line stays JSON that any reader parses.
_OMITTED_WORDS = json.dumps(f"its steps are {OMITTED[1:-1]}").replace("'", "''")
ATIF_SHAPED_LINE = f"""
    '{{"schemaVersion": 1, "privacyClass": "PRIVATE", '
    || CASE WHEN t.no_steps OR t.steps_too_deep THEN '' ELSE '"format": "atif-shaped", ' END
    || {ROLLOUT_MEMBERS}
    || CASE WHEN t.no_steps THEN '}}'
            WHEN t.steps_too_deep THEN ', "trajectoryOmitted": {_OMITTED_WORDS}}}'
            ELSE ', "trajectory": ' || t.steps::text || '}}' END"""


def rollout_lines_sql(kind: str, selection: Selection, newest_first: bool) -> str:
    """SQL whose single column is one finished atif-shaped NDJSON line per rollout."""
    return f"SELECT {ATIF_SHAPED_LINE} {selection.source(with_trial=True)} {ordering(kind, newest_first)}"


EVALUATOR = """
    JOIN evaluation_runs er ON er.organization_id = r.organization_id AND er.id = r.evaluation_run_id
    JOIN evaluator_configs c ON c.organization_id = er.organization_id AND c.id = er.evaluator_config_id
"""


ORIGINAL_ATIF = """
    LEFT JOIN artifacts ta ON ta.organization_id = t.organization_id AND ta.id = t.atif_artifact_id
"""


# A TRL row needs a turn of the agent's own: a rollout whose trajectory holds no agent step (an imported oracle run
# without a trajectory, a job whose trajectory is the task alone) would be the task and the closing "Done.", which
# teaches a model to answer any task with "Done.". trial_agent_steps (migration 0019) counts those steps, and its
# index (organization_id, trial_agent_steps(steps), id) finds the trials without one.
WITHOUT_AGENT_TURN = "trial_agent_steps({t}.steps) = 0"


def rollout_rows_sql(kind: str, selection: Selection, newest_first: bool, *, agent_turns_only: bool = False) -> str:
    """SQL returning the columns the ATIF and TRL builders need, one row per rollout; `agent_turns_only`: of the
    rollouts the kind holds (`all`: its newest 1000), those with a turn of the agent's own (the TRL rows)."""
    columns = f"""r.id, r.seed, r.reward, r.evaluation_run_id, r.environment_version_id, t.trial_number,
        {TRIAGE_COLUMNS}, {STAGES} AS stages, t.steps, t.tools, t.task, c.name AS evaluator_name,
        c.agent ->> 'kind' AS agent_kind, r.created_at, ta.body AS atif_body, r.seq"""
    source = selection.source(EVALUATOR + ORIGINAL_ATIF, with_trial=True)
    rows = f"SELECT {columns} {source} {ordering(kind, newest_first)}"
    if not agent_turns_only:
        return rows
    order = "DESC" if kind == "all" and newest_first else ""
    return f"SELECT * FROM ({rows}) s WHERE NOT {WITHOUT_AGENT_TURN.format(t='s')} ORDER BY s.seq {order}"


def rollouts_without_agent_turn_sql(kind: str, selection: Selection, newest_first: bool) -> str:
    """SQL counting the rollouts of `kind` (`all`: of its newest 1000) whose trajectory holds no turn of the agent's
    own: the rows a TRL export leaves out. Each is one probe of the agent-steps index, no trial's steps are read."""
    capped = ordering(kind, newest_first) if kind == "all" else ""
    rollouts = f"SELECT r.organization_id, r.evaluation_trial_id {selection.source()} {capped}"
    return f"""SELECT count(*) FROM ({rollouts}) s WHERE EXISTS (SELECT 1 FROM evaluation_trials a
        WHERE a.organization_id = s.organization_id AND {WITHOUT_AGENT_TURN.format(t="a")}
          AND a.id = s.evaluation_trial_id)"""


def preference_pairs_sql(
    org_id: uuid.UUID,
    filters: TrialFilters,
    after_seq: int | None = None,
    upto_seq: int | None = None,
    *,
    within_task: bool = False,
    include_excluded: bool = False,
) -> Query:
    """Per environment version (and, `within_task`, per task text of it), the highest- versus the lowest-scored
    rollout, where the two rewards differ.

    Ties are broken by export order: the preferred side is the latest of the
    highest-scored rollouts, the rejected side the earliest of the lowest-scored
    ones. Per version, each side is one backward or forward step of the
    (organization_id, environment_version_id, reward, seq) index (a version the
    filters leave out is passed over without a step). Per task, one range scan
    of that index (joined to each trial by its key) is aggregated in a hash of
    (version, task) groups: max/min of [reward, seq] name each side by its seq,
    which the unique (organization_id, seq) index finds. Under a dataset filter,
    the versions' groups are made the same way from the dataset's rollouts, read
    once by their runs (a dataset of Harbor tasks runs a version per task: a step
    per version would read them once per version).
    """
    side = (
        filters.conditions("r", versions="v", trials="t", within=KIND_RANKS["scored"])
        .also("r.organization_id = :org", org=org_id)
        .also("r.environment_version_id = v.id")
        .also("r.reward IS NOT NULL")
    )
    if after_seq is not None:
        side = side.also("r.seq > :after_seq", after_seq=after_seq)
    if upto_seq is not None:
        side = side.also("r.seq <= :upto_seq", upto_seq=upto_seq)
    if not include_excluded:
        side = side.also(NOT_EXCLUDED)
    if within_task:  # training pairs: both sides took a turn of their own (a trial without one teaches nothing)
        side = side.also("trial_agent_steps(t.steps) > 0")
        return Query(_grouped_pairs_sql(side.sql, by_task=True), side.params)
    if filters.names_datasets:  # a dataset's rollouts, read once by run: never once per version it ran
        return Query(_grouped_pairs_sql(side.sql, by_task=False, trials=filters.reads_trials), side.params)
    trial = TRIAL_JOIN if filters.reads_trials else ""
    rollouts = f"SELECT r.id, r.reward FROM rollouts r {trial} WHERE {side.sql}"
    sql = f"""
        SELECT v.id AS environment_version_id, b.id AS preferred_id, b.reward AS preferred_reward,
               w.id AS rejected_id, w.reward AS rejected_reward
        FROM environment_versions v
        CROSS JOIN LATERAL ({rollouts} ORDER BY r.reward DESC, r.seq DESC LIMIT 1) b
        CROSS JOIN LATERAL ({rollouts} ORDER BY r.reward ASC, r.seq ASC LIMIT 1) w
        WHERE v.organization_id = :org AND b.reward > w.reward
        ORDER BY v.id"""
    return Query(sql, side.params)


def _grouped_pairs_sql(rollouts: str, *, by_task: bool, trials: bool = True) -> str:
    """Preference pairs within (environment version, task) groups, or `by_task` False within versions, from one
    pass over the rollouts `rollouts` selects (joined to their trials when `by_task` or `trials`): see
    preference_pairs_sql."""
    trial = TRIAL_JOIN if by_task or trials else ""
    return f"""
        WITH sides AS (
            SELECT r.environment_version_id,
                   (max(ARRAY[r.reward, r.seq::float8]))[2]::bigint AS best,
                   (min(ARRAY[r.reward, r.seq::float8]))[2]::bigint AS worst
            FROM environment_versions v
            JOIN rollouts r ON r.organization_id = v.organization_id AND r.environment_version_id = v.id
            {trial}
            WHERE v.organization_id = :org AND {rollouts}
            GROUP BY r.environment_version_id{", t.task" if by_task else ""}
            HAVING max(r.reward) > min(r.reward)
        )
        SELECT s.environment_version_id, b.id AS preferred_id, b.reward AS preferred_reward,
               w.id AS rejected_id, w.reward AS rejected_reward
        FROM sides s
        JOIN rollouts b ON b.organization_id = :org AND b.seq = s.best
        JOIN rollouts w ON w.organization_id = :org AND w.seq = s.worst
        ORDER BY s.environment_version_id, b.seq"""


# JSON text never holds a raw control character (every one is escaped), so CSV with U+0002 between fields and
# U+0001 as the quote never quotes or escapes a line: COPY sends each line exactly as PostgreSQL built it.
COPY_LINES = "COPY ({sql}) TO STDOUT WITH (FORMAT csv, DELIMITER E'\\x02', QUOTE E'\\x01')"
COPY_CHUNK = 1 << 20


def psycopg_sql(sql: str) -> str:
    """SQLAlchemy's `:name` binds as psycopg's `%(name)s` (and `%` escaped), for statements run on the raw cursor."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql.replace("%", "%%"))


def copy_lines(session: Session, sql: str, params: dict[str, Any]) -> Iterator[bytes]:
    """Stream the single text column of `sql` as newline-ended lines through COPY, in chunks of about 1 MiB.

    It runs in the session's transaction (its organization and snapshot), as fast as PostgreSQL's own COPY: the
    lines are never decoded or re-encoded here.
    """
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor, cursor.copy(COPY_LINES.format(sql=psycopg_sql(sql)), params) as copy:
        pending, size = [], 0
        for data in copy:
            pending.append(data)
            size += len(data)
            if size >= COPY_CHUNK:
                yield b"".join(pending)
                pending, size = [], 0
        if pending:
            yield b"".join(pending)


def stream_rows(session: Session, sql: str, params: dict[str, Any]) -> Iterator[Any]:
    """Run `sql` through a server-side cursor and yield its rows one by one."""
    result = session.execute(
        text(sql), params, execution_options={"stream_results": True, "max_row_buffer": STREAM_BATCH}
    )
    yield from result


def rollout_rows_by_id(session: Session, ids: list[uuid.UUID]) -> dict[uuid.UUID, Any]:
    """The ATIF/TRL columns of the given rollouts, keyed by rollout id."""
    selection = Selection(Conditions().also("r.id = ANY(:ids)", ids=ids))
    rows = session.execute(text(rollout_rows_sql("preference", selection, newest_first=False)), selection.params)
    return {row.id: row for row in rows}


PAIR_BATCH = 200  # preference pairs whose rollouts are read in one statement


def preference_sides(session: Session, pairs: Query) -> Iterator[tuple[Any, Any, Any]]:
    """Each pair `pairs` selects with the ATIF/TRL columns of its preferred and rejected rollouts, streamed: pairs
    come through a server-side cursor, their rollouts a batch at a time."""
    pairs_stream = stream_rows(session, pairs.sql, pairs.params)
    while batch := list(islice(pairs_stream, PAIR_BATCH)):
        rows = rollout_rows_by_id(session, [p.preferred_id for p in batch] + [p.rejected_id for p in batch])
        for pair in batch:
            yield pair, rows[pair.preferred_id], rows[pair.rejected_id]


@dataclass(frozen=True)
class ExcludedRollouts:
    """The rollouts of trials a reviewer excluded, among those some filters select, by the kind that holds them."""

    all: int
    successful: int
    failed: int
    recovery: int


def excluded_rollouts(session: Session, org_id: uuid.UUID, filters: TrialFilters) -> ExcludedRollouts:
    """How many rollouts of excluded trials the filters select, per kind (`all` uncapped): read from the excluded
    reviews (ix_trial_reviews_state), each joined to its rollout, never by scanning the filters' rollouts."""
    where = filters.conditions("r", trials="t").also("x.organization_id = :org", org=org_id)
    trial = TRIAL_JOIN if filters.reads_trials else ""
    row = session.execute(
        text(
            f"""SELECT count(*) AS "all", count(*) FILTER (WHERE {KIND_CONDITIONS["successful"]}) AS successful,
                   count(*) FILTER (WHERE {KIND_CONDITIONS["failed"]}) AS failed,
                   count(*) FILTER (WHERE {KIND_CONDITIONS["recovery"]}) AS recovery
            FROM trial_reviews x
            JOIN rollouts r ON r.organization_id = x.organization_id AND r.evaluation_trial_id = x.evaluation_trial_id
            {trial}
            WHERE x.review_state = 'excluded' AND {where.sql}"""
        ),
        where.params,
    ).one()
    return by_name(ExcludedRollouts, row)


@dataclass(frozen=True)
class RolloutDetail:
    """One rollout as GET /api/v1/rollouts/<id> shows it."""

    id: uuid.UUID
    seed: int
    reward: float | None
    environment_version_id: uuid.UUID
    evaluation_run_id: uuid.UUID
    stages: dict[str, Any]
    trial_number: int
    failure_category: str | None
    verifier_category: str | None
    human_category: str | None
    review_state: str
    labels: list[str]
    notes: list[dict[str, Any]]
    exclusion: dict[str, Any] | None
    trajectory_artifact_id: uuid.UUID | None


def rollout_detail(session: Session, rollout_id: uuid.UUID) -> RolloutDetail | None:
    """The rollout with its trial's number, failure category, stage_* values and artifact id, or None."""
    row = session.execute(
        text(
            f"""SELECT r.id, r.seed, r.reward, r.environment_version_id, r.evaluation_run_id,
                      coalesce((SELECT jsonb_object_agg(key, value) FROM jsonb_each(t.metrics)
                                WHERE key LIKE 'stage\\_%'), '{{}}'::jsonb) AS stages,
                      t.trial_number, {TRIAGE_COLUMNS}, t.trajectory_artifact_id
               FROM rollouts r
               JOIN evaluation_trials t ON t.organization_id = r.organization_id AND t.id = r.evaluation_trial_id
               WHERE r.id = :id"""
        ),
        {"id": rollout_id},
    ).first()
    return by_name(RolloutDetail, row) if row else None
