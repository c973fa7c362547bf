"""Full-text search over trials: the condition a filtered list adds, snippets of the matching steps, marked steps.

Every trial's task, log and steps are indexed in evaluation_trials.search_vector
(PostgreSQL's 'simple' configuration, GIN-indexed, written by the statement that
records the trial: migration 0018). A step's searchable text is
trial_step_text(step): its tool, command with JSON arguments, observation,
message and reasoning.

What a user's `q` means (parsed here, turned into a tsquery by PostgreSQL itself,
so no input can produce a malformed tsquery or an error):
* words: every one must occur (`permission denied` finds both words anywhere);
* "a quoted phrase": the words next to each other, in order;
* `-word`: not that word; `a or b`: either (websearch_to_tsquery's syntax);
* `word*`: a prefix (`restoc*`, `SKU-70*`), every word of it a prefix;
* identifiers: the parser splits `SKU-7062` into `sku` and `-7062`; a number
  also finds itself after a hyphen, so `7062` finds `SKU-7062`.
Punctuation alone (`&|!:*`) has no words and matches nothing.
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.trial_log import FRAGMENT, piece_label
from queries.conditions import Conditions

SEARCH_QUERY_CHARS = 200  # the longest `q` a page or the API accepts
MAX_PREFIXES = 8  # prefix terms past these are searched as whole words
SNIPPETS_PER_TRIAL = 3
CONFIG = "'simple'"

# A lexeme in tsquery's text form ('…', quotes inside doubled), as PostgreSQL writes a parsed query out.
_LEXEME = r"('(?:[^']|'')*')"
# A lexeme of digits only (with its prefix mark), standing alone: not the tail of another lexeme.
_NUMBER = r"(^|[ (!])'([0-9]+)'(:\*)?(?!')"
_NUMBER_EITHER = r"\1('\2'\3 | '-\2'\3)"
_TERMS = re.compile(r'"[^"]*"?|[^\s"]+')


def _literal(value: str) -> str:
    """A constant of ours as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class SearchQuery:
    """A user's search, as SQL for its tsquery and the parameters it binds."""

    sql: str
    params: dict[str, str]


def parse_query(q: str | None, name: str = "search") -> SearchQuery | None:
    """`q` as a tsquery expression (binding parameters `<name>_0`, …), None when `q` is empty.

    Words and quoted phrases go to websearch_to_tsquery as typed; each `word*` is
    parsed alone and every lexeme of it is made a prefix (`:*`) on PostgreSQL's
    own text form of the parsed query; then every lexeme of digits also matches
    the same digits after a hyphen. Nothing of `q` is ever written into SQL text.
    """
    q = (q or "").replace("\x00", " ")  # PostgreSQL text cannot hold NUL; it separates words like a space
    if not q.strip():
        return None
    plain: list[str] = []
    prefixes: list[str] = []
    for term in _TERMS.findall(q):
        if term.endswith("*") and not term.startswith('"') and len(prefixes) < MAX_PREFIXES:
            prefixes.append(term.rstrip("*"))
        else:
            plain.append(term)
    params = {f"{name}_0": " ".join(plain)}
    parts = [f"websearch_to_tsquery({CONFIG}, :{name}_0)"]
    for index, prefix in enumerate(prefixes, start=1):
        params[f"{name}_{index}"] = prefix
        parts.append(
            f"CAST(regexp_replace(CAST(websearch_to_tsquery({CONFIG}, :{name}_{index}) AS text), "
            f"{_literal(_LEXEME)}, {_literal(chr(92) + '1:*')}, 'g') AS tsquery)"
        )
    combined = " && ".join(parts)
    numbers = f"regexp_replace(CAST({combined} AS text), {_literal(_NUMBER)}, {_literal(_NUMBER_EITHER)}, 'g')"
    return SearchQuery(f"CAST({numbers} AS tsquery)", params)


def search_conditions(q: str | None, rows: str = "t") -> Conditions:
    """The condition that trials (the evaluation_trials aliased `rows`) match `q`; none when `q` is empty."""
    query = parse_query(q)
    if query is None:
        return Conditions()
    return Conditions().also(f"{rows}.search_vector @@ {query.sql}", **query.params)


@dataclass(frozen=True)
class Snippet:
    """Where a trial matched (its task, a step, its log) and the text around the match, split into runs.

    `segments` are (text, matched) pairs in order: a template writes matched runs
    inside <mark> and escapes every run as usual.
    """

    part: Literal["task", "step", "log"]
    step: int | None  # the step's number (its anchor on the trial page is #step-N)
    segments: tuple[tuple[str, bool], ...]

    @property
    def text(self) -> str:
        return "".join(run for run, _ in self.segments)


FRAGMENT_GAP = " … "  # between two fragments of one snippet


class _Marks:
    """Sentinels that ts_headline puts around matches, unguessable so no stored text can forge one."""

    def __init__(self) -> None:
        token = secrets.token_hex(8)
        self.start, self.stop, self.gap = f"qs{token}", f"qe{token}", f"qg{token}"  # gap: between two fragments
        self._split = re.compile(f"({self.start}|{self.stop})")

    def options(self, extra: str) -> str:
        return f"{extra}, StartSel={self.start}, StopSel={self.stop}"

    def segments(self, marked: str) -> tuple[tuple[str, bool], ...]:
        """The headline split at the sentinels into (text, matched) runs, touching runs of a kind joined."""
        runs: list[tuple[str, bool]] = []
        inside = False
        for piece in self._split.split(marked):
            if piece == self.start:
                inside = True
            elif piece == self.stop:
                inside = False
            elif piece and runs and runs[-1][1] == inside:  # SKU and -7062 are two words, one run
                runs[-1] = (runs[-1][0] + piece, inside)
            elif piece:
                runs.append((piece, inside))
        return tuple(runs)

    def fragments(self, marked: str, log: str | None) -> tuple[tuple[str, bool], ...]:
        """A headline of fragments (each ended by the gap sentinel) as runs, the fragments joined by FRAGMENT_GAP;
        `log`: the log the headline was cut from, and then each fragment that starts inside a line is shown after
        that line's label (domain.trial_log.piece_label), so no piece of an agent's line reads as the verifier's."""
        runs: list[tuple[str, bool]] = []
        found = 0
        for fragment in marked.split(self.gap):
            fragment_runs = self.segments(fragment)
            if not fragment_runs:
                continue
            if log is not None:
                at = log.find("".join(text for text, _ in fragment_runs), found)
                label = piece_label(log, at) if at != -1 else FRAGMENT
                found = max(found, at)
                fragment_runs = ((label, False), *fragment_runs) if label else fragment_runs
            runs += [(FRAGMENT_GAP, False)] if runs else []
            runs += fragment_runs
        return tuple(runs)


# The steps of trial `t` in order (s.step, s.n) and each one's number as the trial page anchors it (#step-N).
_STEPS = (
    "jsonb_array_elements(CASE WHEN jsonb_typeof(t.steps) = 'array' THEN t.steps END) WITH ORDINALITY AS s(step, n)"
)
_STEP_NUMBER = "CASE WHEN s.step ->> 'step' ~ '^[0-9]{1,9}$' THEN (s.step ->> 'step')::int ELSE s.n::int END"

# The searchable pieces of a trial in page order: its task, each step's text (with its number), its log. OFFSET 0
# keeps them a subquery of their own, so each step's text is built once however many conditions read it.
_PIECES = f"""
    SELECT * FROM (
        SELECT 'task' AS part, NULL::int AS step, 0::bigint AS n, t.task AS body
        UNION ALL
        SELECT 'step', {_STEP_NUMBER}, s.n, trial_step_text(s.step) FROM {_STEPS}
        UNION ALL
        SELECT 'log', NULL, 2147483647, t.log_excerpt
    ) pieces OFFSET 0
"""

# Parsing a text into its tsvector is most of what showing a match costs, so a text is parsed only when it may
# match. querytree is the query without its negations, and every match holds its words (each a lower-case run of
# the text; a prefix too): all of them when it joins them with & and <-> alone, else at least one. The words come
# from PostgreSQL's text form of it ('…' with ' and \ doubled) as LIKE patterns; a query of negations alone has
# none, and then every text is parsed.
_LEXEME_SQL = r"'''((?:[^''\\]|''''|\\\\)*)'''"
_WORDS = rf"""SELECT array_agg('%' || replace(replace(replace(
                replace(replace(m[1], '''''', ''''), '\\', '\'), '\', '\\'), '%', '\%'), '_', '\_') || '%') AS patterns,
            regexp_replace(querytree(q0.query), {_LEXEME_SQL}, '', 'g') !~ '\|' AS all_needed
        FROM regexp_matches(querytree(q0.query), {_LEXEME_SQL}, 'g') AS m"""


def search_source(query: SearchQuery) -> str:
    """The FROM item `q` of a statement that shows matches: the tsquery (q.query) and its words (see _WORDS)."""
    return f"(SELECT q0.query, w.* FROM (SELECT {query.sql} AS query) q0 CROSS JOIN LATERAL ({_WORDS}) w) q"


def text_matches(body: str) -> str:
    """SQL: the text `body` matches the search `q` (of search_source), parsed only when it may."""
    return f"""CASE WHEN q.patterns IS NULL
                  OR CASE WHEN q.all_needed THEN lower({body}) LIKE ALL (q.patterns)
                          ELSE lower({body}) LIKE ANY (q.patterns) END
             THEN to_tsvector({CONFIG}, {body}) @@ q.query ELSE false END"""


def snippets(session: Session, trial_ids: Iterable[uuid.UUID], q: str | None) -> dict[uuid.UUID, list[Snippet]]:
    """For each of `trial_ids` (a page of results), up to SNIPPETS_PER_TRIAL highlighted matches in page order."""
    ids = list(trial_ids)
    query = parse_query(q)
    if query is None or not ids:
        return {}
    marks = _Marks()
    rows = session.execute(
        text(
            f"""
            SELECT m.id, m.part, m.step, CASE WHEN m.part = 'log' THEN m.body END AS log,
                   ts_headline({CONFIG}, m.body, m.query, :options) AS headline
            FROM (SELECT t.id, p.part, p.step, p.n, p.body, q.query,
                         row_number() OVER (PARTITION BY t.id ORDER BY p.n) AS rank
                  FROM {search_source(query)}
                  CROSS JOIN evaluation_trials t
                  CROSS JOIN LATERAL ({_PIECES}) p
                  WHERE t.id = ANY(:ids) AND p.body <> '' AND {text_matches("p.body")}) m
            WHERE m.rank <= :per_trial
            ORDER BY m.id, m.n
            """
        ),
        {
            **query.params,
            "ids": ids,
            "per_trial": SNIPPETS_PER_TRIAL,
            "options": marks.options(f"MaxFragments=2, MaxWords=16, MinWords=6, FragmentDelimiter={marks.gap}"),
        },
    ).all()
    found: dict[uuid.UUID, list[Snippet]] = {}
    for row in rows:
        found.setdefault(row.id, []).append(Snippet(row.part, row.step, marks.fragments(row.headline, row.log)))
    return found


def first_matching_step(session: Session, trial_id: uuid.UUID, q: str | None) -> int | None:
    """The number of the first step of the trial whose text matches `q`, None when none does."""
    query = parse_query(q)
    if query is None:
        return None
    return session.execute(
        text(
            f"""
            SELECT p.step FROM {search_source(query)} CROSS JOIN evaluation_trials t CROSS JOIN LATERAL ({_PIECES}) p
            WHERE t.id = :trial_id AND p.part = 'step' AND {text_matches("p.body")}
            ORDER BY p.n LIMIT 1
            """
        ),
        {**query.params, "trial_id": trial_id},
    ).scalar()


@dataclass(frozen=True)
class TrialMarks:
    """A trial's text with the matches of a search marked: what the trial page shows for `?q=`.

    `steps` maps a matching step's number to its fields ("tool", "command",
    "observation", "message", "reasoning") as (text, matched) runs; `task` and
    `log` are runs when they match, else None.
    """

    first_step: int | None
    steps: dict[int, dict[str, tuple[tuple[str, bool], ...]]]
    task: tuple[tuple[str, bool], ...] | None
    log: tuple[tuple[str, bool], ...] | None


_STEP_FIELDS = ("tool", "command", "observation", "message", "reasoning")

# A step's message as the trial page shows it: the text, or its text parts joined by newlines.
_MESSAGE = """CASE jsonb_typeof(s.step -> 'message') WHEN 'string' THEN s.step ->> 'message'
    WHEN 'array' THEN (SELECT string_agg(part ->> 'text', E'\\n') FROM jsonb_array_elements(s.step -> 'message') part)
    END"""


def trial_marks(session: Session, trial_id: uuid.UUID, q: str | None) -> TrialMarks | None:
    """The trial's matching steps, task and log with every match of `q` marked; None when `q` is empty."""
    query = parse_query(q)
    if query is None:
        return None
    marks = _Marks()
    fields = ", ".join(
        f"CASE WHEN coalesce({value}, '') <> '' THEN ts_headline({CONFIG}, {value}, q.query, :options) END AS {name}"
        for name, value in (
            ("tool", "s.step ->> 'tool'"),
            ("command", "s.step ->> 'command'"),
            ("observation", "s.step ->> 'observation'"),
            ("message", _MESSAGE),
            ("reasoning", "s.step ->> 'reasoning'"),
        )
    )
    params = {**query.params, "trial_id": trial_id, "options": marks.options("HighlightAll=true")}
    steps: dict[int, dict[str, tuple[tuple[str, bool], ...]]] = {}
    first = None
    for row in session.execute(
        text(
            f"""
            SELECT {_STEP_NUMBER} AS step, {fields}
            FROM {search_source(query)} CROSS JOIN evaluation_trials t CROSS JOIN LATERAL {_STEPS}
            WHERE t.id = :trial_id AND {text_matches("trial_step_text(s.step)")}
            ORDER BY s.n
            """
        ),
        params,
    ).all():
        first = row.step if first is None else first
        steps[row.step] = {name: marks.segments(value) for name in _STEP_FIELDS if (value := getattr(row, name))}
    whole = session.execute(
        text(
            f"""
            SELECT CASE WHEN {text_matches("t.task")} THEN ts_headline({CONFIG}, t.task, q.query, :options) END AS task,
                   CASE WHEN {text_matches("t.log_excerpt")}
                        THEN ts_headline({CONFIG}, t.log_excerpt, q.query, :options) END AS log
            FROM {search_source(query)} CROSS JOIN evaluation_trials t WHERE t.id = :trial_id
            """
        ),
        params,
    ).first()
    task = marks.segments(whole.task) if whole is not None and whole.task is not None else None
    log = marks.segments(whole.log) if whole is not None and whole.log is not None else None
    return TrialMarks(first, steps, task, log)
