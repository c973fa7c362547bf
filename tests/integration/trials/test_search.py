"""Full-text search over trials: phrases, prefixes, identifiers, messages and logs; hostile queries; snippets that
escape what they show; the trial page marking its matches; no trial of another organization, ever."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from domain.outcome import TrialOutcome
from domain.trajectory import message_step, search_text, tool_step
from queries.filters import TrialFilters
from queries.search import (
    first_matching_step,
    parse_query,
    search_conditions,
    search_source,
    snippets,
    text_matches,
    trial_marks,
)
from tests.conftest import PASSWORD, AuthActions
from tests.factories import make_catalog, record_rewards, typed_steps
from tests.helpers import attr, marked, one, parse, trial_links
from tests.worlds import shared_world
from writes.accounts import add_membership, create_organization, create_user

HOSTILE_OBSERVATION = "<script>alert('x')</script> permission denied & <b>bold</b>"


def outcome(steps: list, *, log: str = "opened admin-console", task: str = "Fill the shelf.") -> TrialOutcome:
    return TrialOutcome(
        status="failed",
        reward=0.0,
        failure_category="gave_up",
        stages={"stage_inventory": 0.0},
        steps=typed_steps(steps),
        log=log,
        started_at=datetime.now(UTC),
        task=task,
    )


STEPS = {
    "observation": [
        tool_step(1, "list_inventory", {}, "3 items\nshelf A: 4 boxes"),
        tool_step(2, "write_file", {"path": "/etc/shelf"}, "error: Permission denied while writing /etc/shelf"),
    ],
    "command": [
        tool_step(1, "list_inventory", {}, "3 items"),
        tool_step(2, "restock_item", {"sku": "A-1", "quantity": 12}, "restocked"),
    ],
    "message": [
        tool_step(1, "list_inventory", {}, "3 items"),
        message_step(2, "I cannot finish: the warehouse ledger is unreachable."),
    ],
    "hostile": [
        tool_step(1, "list_inventory", {}, "3 items"),
        tool_step(2, "read_file", {"path": "notes.html"}, HOSTILE_OBSERVATION),
    ],
    "plain": [tool_step(1, "list_inventory", {}, "nothing to see")],
}
LOGS = {"log": "worker: restock of SKU-7062 refused by the warehouse"}


def record(database, org_id, names: list[str]) -> dict[str, uuid.UUID]:
    """One run with a trial per name (steps from STEPS, log from LOGS); the trial ids by name."""
    catalog = make_catalog(database, org_id, {"kind": "scripted"}, attempt_count=len(names))
    outcomes = iter(
        [outcome(STEPS.get(name, STEPS["plain"]), log=LOGS.get(name, "opened admin-console")) for name in names]
    )
    record_rewards(database, catalog, [0.0] * len(names), lambda _reward: next(outcomes))
    with database.session(org_id) as session:
        ids = session.execute(text("SELECT trial_number, id FROM evaluation_trials ORDER BY trial_number")).all()
    return {name: trial_id for name, (_, trial_id) in zip(names, ids, strict=True)}


def found(database, org_id, q: str, filters: TrialFilters | None = None) -> set[uuid.UUID]:
    """The ids of the organization's trials matching `q` (and `filters`), as the lists read them."""
    where = (filters or TrialFilters()).conditions("t")
    search = search_conditions(q, "t")
    for clause in search.clauses:
        where = where.also(clause, **search.params)
    with database.session(org_id) as session:
        rows = session.execute(text(f"SELECT t.id FROM evaluation_trials t WHERE {where.sql}"), where.params)
        return set(rows.scalars())


@shared_world
def shared_search(request):
    """Acme RL with a trial per kind of text (an observation, a command, a message, hostile markup, a log line, plain
    steps); built once for the tests that only search it."""
    acme = request.getfixturevalue("make_org")("Acme RL")
    names = ["observation", "command", "message", "hostile", "log", "plain"]
    return acme, record(request.getfixturevalue("database"), acme.id, names)


@pytest.fixture
def trials(shared_search):
    return shared_search[1]


@pytest.fixture
def acme(request, make_org):
    """The organization of `trials` in a test that searches them; else a new, empty Acme RL."""
    if "trials" in request.fixturenames:
        return request.getfixturevalue("shared_search")[0]
    return make_org("Acme RL")


def test_a_phrase_in_an_observation_is_found(database, acme, trials):
    assert found(database, acme.id, '"permission denied"') == {trials["observation"], trials["hostile"]}
    assert found(database, acme.id, '"denied permission"') == set()  # a phrase keeps its order


def test_a_prefix_in_a_command_is_found(database, acme, trials):
    assert found(database, acme.id, "restoc*") == {trials["command"], trials["log"]}
    assert found(database, acme.id, "restock_it*") == {trials["command"]}
    assert found(database, acme.id, "restoc") == set()  # without the star, a whole word


def test_an_identifier_in_a_log_is_found_whole_by_prefix_and_by_its_number(database, acme, trials):
    for q in ("SKU-7062", "sku-7062", "SKU-70*", "7062", "70*", '"of SKU-7062 refused"'):
        assert found(database, acme.id, q) == {trials["log"]}, q
    assert found(database, acme.id, "SKU-7063") == set()


def test_an_agent_message_and_the_task_are_found(database, acme, trials):
    assert found(database, acme.id, "warehouse ledger") == {trials["message"]}
    assert found(database, acme.id, "shelf") == set(trials.values())  # every task says "Fill the shelf."


def test_words_or_and_negation_follow_web_search_syntax(database, acme, trials):
    assert found(database, acme.id, "ledger or 7062") == {trials["message"], trials["log"]}
    assert found(database, acme.id, "permission -bold") == {trials["observation"]}


def test_search_is_scoped_by_the_filters(database, acme, trials):
    other = make_catalog(database, acme.id, {"kind": "scripted"}, attempt_count=1, config_name="other")
    record_rewards(database, other, [0.0], lambda _r: outcome(STEPS["observation"]))
    assert len(found(database, acme.id, '"permission denied"')) == 3
    scoped = found(database, acme.id, '"permission denied"', TrialFilters(environment_version_id=other.version_id))
    assert len(scoped) == 1 and scoped.isdisjoint(trials.values())


HOSTILE_QUERIES = [
    "",
    "   ",
    "'",
    '"',
    '"unterminated phrase',
    "a:b",
    "&|!",
    "!!a & | b",
    "(a | b",
    "a <-> b",
    "a:*",
    "***",
    "-",
    "- -",
    "or",
    "\\",
    "\\'\\\"",
    "'; DROP TABLE evaluation_trials; --",
    ":search_0",
    "%(x)s",
    "café naïve ΣΑΣ 日本語 🙂",
    "x" * 200,
    "a* b* c* d* e* f* g* h* i* j*",
    "''':*'''",
    "1:*&2",
    "restock*'",
]


@pytest.mark.bad_input
@pytest.mark.parametrize("q", HOSTILE_QUERIES)
def test_hostile_queries_never_raise(database, acme, trials, q):
    found(database, acme.id, q)  # any error in PostgreSQL would raise here
    with database.session(acme.id) as session:
        snippets(session, list(trials.values()), q)
        trial_marks(session, trials["hostile"], q)
        first_matching_step(session, trials["hostile"], q)


@pytest.mark.bad_input
@given(q=st.text(max_size=60))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_is_a_query_that_never_raises(database, acme, q):
    query = parse_query(q)
    if query is None:
        return
    with database.session(acme.id) as session:
        session.execute(text(f"SELECT {query.sql} AS q"), query.params).scalar()


# Words as stored text holds them: apostrophes, backslashes, LIKE's own % and _, URLs, paths, identifiers, numbers
# after hyphens, letters whose lower case differs (Turkish, Greek, German).
TEXT_WORDS = st.sampled_from(
    [
        "Permission", "denied", "O'Brien", "it's", "a\\b", "C:\\Temp\\x_1", "100%", "50%_off", "snake_case",
        "http://example.com/a_b%20c?x=1", "/etc/shelf", "SKU-7062", "-7062", "7062", "3.14", "İstanbul", "ΟΔΟΣ",
        "Straße", "QUOTA", "exceeded", "for", "warehouse", "<b>bold</b>", "&amp;", "x--y", "_", "%", "'", "\\",
        "/etc/a_b", "foo@bar_x.com", "x.y_z", "example.com/a_b",
    ]
)  # fmt: skip


@st.composite
def text_and_query(draw) -> tuple[str, str]:
    """A text, and a query made of some of its words (or other words) with web-search syntax around them."""
    words = draw(st.lists(TEXT_WORDS, min_size=1, max_size=8))
    body = draw(st.sampled_from([" ", "\n", ", "])).join(words)
    terms = []
    for word in draw(st.lists(st.one_of(st.sampled_from(words), TEXT_WORDS, st.text(max_size=6)), max_size=4)):
        shape = draw(st.sampled_from(["{}", "{}*", '"{}"', "-{}", "or {}", '"{} {}"']))
        terms.append(shape.format(word, draw(TEXT_WORDS)))
    return body, " ".join(terms)


@given(pair=text_and_query())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_text_is_passed_over_only_when_it_cannot_match(database, acme, pair):
    """Snippets and marks parse a text only when its lower case holds a word of the query: whatever the text and
    the query, that shortcut never changes whether the text matches."""
    body, q = pair
    query = parse_query(q)
    if query is None:
        return
    with database.session(acme.id) as session:
        row = session.execute(
            text(
                f"""SELECT to_tsvector('simple', b.body) @@ q.query AS parsed, {text_matches("b.body")} AS shortcut,
                           q.patterns IS NOT NULL AND NOT lower(b.body) LIKE ANY (q.patterns) AS passed_over
                    FROM {search_source(query)} CROSS JOIN (SELECT CAST(:body AS text) AS body) b"""
            ),
            {**query.params, "body": body},
        ).one()
    assert row.shortcut == row.parsed
    assert not (row.passed_over and row.parsed)


def test_the_words_a_text_is_checked_for_are_those_of_the_query_without_its_negations(database, acme):
    with database.session(acme.id) as session:

        def patterns(q: str) -> list[str] | None:
            query = parse_query(q)
            assert query is not None
            return session.execute(text(f"SELECT q.patterns FROM {search_source(query)}"), query.params).scalar()

        assert patterns('"quota exceeded" -warehouse') == ["%quota%", "%exceeded%"]
        assert patterns("SKU-70*") == ["%sku%", "%-70%"]
        assert patterns("7062") == ["%7062%", "%-7062%"]  # a number also finds itself after a hyphen
        assert patterns("/etc/a_b foo@bar_x.com") == ["%/etc/a\\_b%", "%foo@bar\\_x.com%"]  # LIKE's _ escaped
        assert patterns("-warehouse") is None  # negations alone: every text is parsed


def test_punctuation_alone_matches_nothing_and_empty_is_no_search(database, acme, trials):
    assert found(database, acme.id, "&|!") == set()
    assert found(database, acme.id, "") == set(trials.values())
    assert search_conditions("  ").clauses == ()


def test_snippets_escape_hostile_text_and_mark_only_the_match(database, acme, trials):
    with database.session(acme.id) as session:
        shown = snippets(session, [trials["hostile"], trials["plain"]], '"permission denied"')
    assert list(shown) == [trials["hostile"]]
    (snippet,) = shown[trials["hostile"]]
    assert snippet.part == "step" and snippet.step == 2
    assert [run for run, matched in snippet.segments if matched] == ["permission", "denied"]
    assert "alert('x')" in snippet.text and "&" in snippet.text  # text as stored (tags dropped): pages escape it


def test_snippets_name_the_task_step_and_log_in_page_order(database, acme, trials):
    with database.session(acme.id) as session:
        shown = snippets(session, [trials["log"], trials["command"]], "restock*")
        everywhere = snippets(session, [trials["observation"]], "shelf")
    assert [(s.part, s.step) for s in shown[trials["log"]]] == [("log", None)]
    assert [(s.part, s.step) for s in shown[trials["command"]]] == [("step", 2)]
    # "shelf" is in the task and step 1; step 2's /etc/shelf is one word, a path
    assert [(s.part, s.step) for s in everywhere[trials["observation"]]] == [("task", None), ("step", 1)]
    assert found(database, acme.id, "/etc/shelf") == found(database, acme.id, "/etc/sh*") == {trials["observation"]}


def test_first_matching_step_and_marks_cover_every_match(database, acme, trials):
    with database.session(acme.id) as session:
        assert first_matching_step(session, trials["observation"], "shelf") == 1
        assert first_matching_step(session, trials["observation"], '"permission denied"') == 2
        assert first_matching_step(session, trials["log"], "7062") is None  # only its log matches
        marks = trial_marks(session, trials["hostile"], "permission")
    assert marks is not None and marks.first_step == 2 and set(marks.steps) == {2}
    observation = marks.steps[2]["observation"]
    assert "".join(run for run, _ in observation) == HOSTILE_OBSERVATION  # the whole text, unchanged
    assert [run for run, matched in observation if matched] == ["permission"]
    assert marks.task is None and marks.log is None


def test_a_trial_recorded_after_the_migration_is_indexed_in_the_same_transaction(database, acme):
    trial = record(database, acme.id, ["log"])["log"]
    with database.session(acme.id) as session:
        vector = session.execute(text("SELECT search_vector FROM evaluation_trials WHERE id = :id"), {"id": trial})
        assert "'-7062'" in vector.scalar()
    assert found(database, acme.id, "SKU-7062") == {trial}


def test_the_trials_list_searches_and_shows_escaped_snippets_linking_the_matching_step(
    database, client, auth, member, trials
):
    auth.login(member.email)
    page = client.get('/trials?q="permission denied"')
    assert page.status_code == 200
    body = page.get_data(as_text=True)
    listed = [link.split()[1] for link in trial_links(body)]
    assert listed.count("1") == 1 and "4" in listed and "6" not in listed
    assert one(body, f'a[href="/trials/{trials["hostile"]}?q=%22permission+denied%22&sort=failed#step-2"]')
    snippets = [marked(snippet) for snippet in parse(body).select("tr.snippets span.snippet")]
    assert any("[permission] [denied]" in snippet for snippet in snippets), snippets
    main = one(body, "main")
    assert main.select("script") == [] and any("alert('x')" in snippet for snippet in snippets)  # shown, not run
    assert attr(one(body, 'form#trial-filters input[name="q"]'), "value") == '"permission denied"'  # the box keeps it


def test_the_trials_list_keeps_its_filters_and_the_search_together(database, client, auth, member, trials):
    with database.session(member.org.id) as session:
        run_id = session.execute(text("SELECT evaluation_run_id FROM evaluation_trials LIMIT 1")).scalar()
    auth.login(member.email)
    body = client.get(f"/trials?q=7062&evaluationRunId={run_id}").get_data(as_text=True)
    listed = [link.split()[1] for link in trial_links(body)]
    assert "5" in listed and "1" not in listed
    assert one(body, f'[name="evaluationRunId"][value="{run_id}"]')  # the filter bar keeps the run
    assert "No trials match the search" in client.get(f"/trials?q=nowhere&evaluationRunId={run_id}").text


@pytest.mark.bad_input
@pytest.mark.parametrize("q", [q for q in HOSTILE_QUERIES if len(q) <= 200] + ["x" * 201, "a\x00b"])
def test_hostile_searches_answer_a_page_or_400_never_500(client, auth, member, trials, q):
    auth.login(member.email)
    for url in ("/trials", f"/trials/{trials['hostile']}"):
        response = client.get(url, query_string={"q": q})
        assert response.status_code == (400 if len(q.strip()) > 200 or "\x00" in q else 200), (url, q)


def test_the_trial_page_marks_the_matches_and_links_the_first_matching_step(client, auth, member, trials):
    auth.login(member.email)
    body = client.get(f"/trials/{trials['hostile']}?q=permission+bold").get_data(as_text=True)
    assert one(body, 'p.search-hits a[href="#step-2"]').get_text() == "first match at step 2"
    assert (
        attr(one(body, "li#step-2"), "class") == "step match first-match"
        and attr(one(body, "li#step-1"), "class") == "step"
    )
    step = one(body, "li#step-2")
    assert step.select("script, b") == []  # the hostile text is shown as text, with its matches marked
    assert "<script>alert('x')</script> [permission] denied & <b>[bold]</b>" in marked(step)
    plain = client.get(f"/trials/{trials['hostile']}").get_data(as_text=True)
    assert parse(plain).select("mark") == [] and "first match" not in plain


def test_the_trial_page_marks_a_match_in_the_task_or_the_log(client, auth, member, trials):
    auth.login(member.email)
    body = client.get(f"/trials/{trials['log']}?q=SKU-7062").get_data(as_text=True)
    assert "no step matches" in body and one(body, 'p.search-hits a[href="#log"]').get_text() == "the log matches"
    assert "restock of [SKU-7062] refused" in marked(one(body, "pre.log"))
    assert "Fill the [shelf]." in marked(one(client.get(f"/trials/{trials['log']}?q=shelf").text, "p.task"))


# Property test: two organizations with random step text sharing a secret word; a member of B searching for
# anything (the word, a prefix of it, A's ids) never sees a trial of A, through the query or the page.
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=10)


def org_with_trials(database, label: str, words: list[str]) -> tuple[uuid.UUID, str, list[uuid.UUID]]:
    suffix = uuid.uuid4().hex[:8]
    with database.admin_session() as session, session.begin():
        org = create_organization(session, f"{label} {suffix}")
    email = f"{label.lower()}-{suffix}@example.test"
    with database.admin_session(org.id) as session, session.begin():
        add_membership(session, create_user(session, email, PASSWORD), org, "member")
    catalog = make_catalog(database, org.id, {"kind": "scripted"}, attempt_count=len(words))
    outcomes = iter([outcome([tool_step(1, "grep", {"pattern": word}, f"found {word} twice")]) for word in words])
    record_rewards(database, catalog, [0.0] * len(words), lambda _r: next(outcomes))
    with database.session(org.id) as session:
        ids = list(session.execute(text("SELECT id FROM evaluation_trials")).scalars())
    return org.id, email, ids


@pytest.mark.leak
@pytest.mark.slow
@given(words_a=st.lists(WORDS, min_size=1, max_size=3), words_b=st.lists(WORDS, min_size=1, max_size=3))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_search_never_finds_a_trial_of_another_organization(app, database, words_a, words_b):
    org_a, _, ids_a = org_with_trials(database, "SearchA", words_a)
    org_b, email_b, ids_b = org_with_trials(database, "SearchB", words_b)
    client = app.test_client()
    AuthActions(client).login(email_b)
    for word in {*words_a, *words_b}:
        for q in (word, word[:2] + "*", f'"found {word}"', "found", "grep*"):
            seen = found(database, org_b, q)
            assert seen <= set(ids_b) and seen.isdisjoint(ids_a)
            with database.session(org_b) as session:
                assert set(snippets(session, ids_a + ids_b, q)) <= set(ids_b)
                for trial in ids_a:
                    marks = trial_marks(session, trial, q)
                    assert marks is not None and not marks.steps and marks.task is None and marks.log is None
                    assert first_matching_step(session, trial, q) is None
            body = client.get("/trials", query_string={"q": q}).get_data(as_text=True)
            assert not any(str(trial) in body for trial in ids_a)
        for trial in ids_a:
            assert client.get(f"/trials/{trial}", query_string={"q": word}).status_code == 404
    assert found(database, org_a, "found") == set(ids_a)


def test_the_search_operator_is_leakproof_so_the_gin_index_serves_row_level_security(database, acme):
    """Under RLS only LEAKPROOF operators use an index; the embedded cluster marks tsvector @@ tsquery so (bench:
    a rare term at 200k trials reads the GIN index in ms instead of scanning the organization's trials)."""
    with database.session(acme.id) as session:
        leakproof = session.execute(
            text("SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq(tsvector, tsquery)'::regprocedure")
        )
        assert leakproof.scalar() is True


def test_the_trials_api_searches_with_snippets_and_the_export_holds_exactly_the_found_trials(
    database, client, auth, member, trials
):
    auth.login(member.email)
    page = client.get("/api/v1/trials", query_string={"q": '"permission denied"'})
    assert page.status_code == 200
    listed = {row["id"]: row for row in page.json["trials"]}
    assert set(listed) == {str(trials["observation"]), str(trials["hostile"])}
    snippet = listed[str(trials["observation"])]["snippets"][0]
    assert (snippet["part"], snippet["step"], snippet["matches"]) == ("step", 2, ["Permission", "denied"])
    assert "Permission denied while writing" in snippet["text"]
    unsearched = client.get("/api/v1/trials").json["trials"]
    assert len(unsearched) == len(trials) and all(row["snippets"] is None for row in unsearched)

    export = client.get("/api/v1/rollouts", query_string={"kind": "failed", "q": '"permission denied"'})
    assert export.status_code == 200
    exported = {json.loads(line)["trialNumber"] for line in export.get_data(as_text=True).splitlines()}
    numbers = {row["trialNumber"] for row in listed.values()}
    assert exported == numbers  # the explorer's export links carry q: the same trials, as rollouts
    assert client.get("/api/v1/trials", query_string={"q": "a\x00b"}).status_code == 400


ODD_STEPS: dict[str, list[Any]] = {  # steps as odd writers stored them
    "parts": [
        {
            "step": 1,
            "tool": "say",
            "command": "",
            "observation": "",
            "message": [{"type": "text", "text": "first"}, {"type": "image"}, "loose", {"text": "second part"}],
        },
        {"step": 2, "tool": "restock", "command": 'restock {"sku": "SKU-7062"}', "reasoning": ""},
        {"step": 3, "tool": "", "command": "x", "message": None},
    ],
    "numbers": [{"step": 1, "tool": "count", "command": 42, "observation": {"b": 1, "a": [1.5, True]}}],
    "not objects": [{"step": 1, "tool": "ok", "command": "ok go"}, "a bare string step"],
    "message number": [{"step": 1, "tool": "t", "message": 7, "reasoning": "why"}],
    "no steps": [],
}


def test_the_vector_recorded_from_python_text_is_the_one_sql_computes_from_the_stored_steps(database, acme):
    """record_trial builds the search text in Python (or leaves it to SQL); either way the stored vector equals
    trial_search_vector over the stored task, log and steps, which snippets and marks read."""
    catalog = make_catalog(database, acme.id, {"kind": "scripted"}, attempt_count=len(ODD_STEPS))
    # (a step that is no object is left out: steps are typed, so no writer can record one any more)
    recordable = [[step for step in steps if isinstance(step, dict)] for steps in ODD_STEPS.values()]
    outcomes = iter([outcome(steps, log="log\x00 with a NUL") for steps in recordable])
    record_rewards(database, catalog, [0.0] * len(ODD_STEPS), lambda _reward: next(outcomes))
    with database.session(acme.id) as session:
        rows = session.execute(
            text("""SELECT search_vector = trial_search_vector(task, log_excerpt, steps), search_vector::text
                    FROM evaluation_trials ORDER BY trial_number""")
        ).all()
    assert len(rows) == len(ODD_STEPS) and all(same for same, _ in rows), rows
    assert "'second'" in rows[0][1] and "'-7062'" in rows[0][1] and "'42'" in rows[1][1]
    # strings (and lists of parts) are rendered in Python; numbers and objects, and steps that are not objects, by SQL
    rendered = {name: search_text("task", "log", steps) for name, steps in ODD_STEPS.items()}
    assert [name for name, value in rendered.items() if value is None] == ["numbers", "not objects"]
    assert rendered["parts"] == 'task\nlog\nsay\nfirst\nsecond part\nrestock {"sku": "SKU-7062"}\n\nx'
