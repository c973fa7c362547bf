"""Who each step is from is the worker's word: an agent that says "VERIFIER PASSED" in every way it can is shown on
the trial page as the agent (or its harness) saying it, never as the verifier, the environment or the worker; the
verifier's own lines and output are framed apart; an imported trial's steps, log and verifier's words are shown as
the imported file's."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from bs4 import BeautifulSoup, NavigableString, Tag
from sqlalchemy import text

from domain.outcome import VERIFIER_EXPLANATION, TrialOutcome
from domain.trajectory import tool_step
from domain.trial_log import ProgramOutput, log_text
from models import EnvironmentVersion, EvaluationRun, EvaluatorConfig
from tests.factories import command_agent, make_catalog
from tests.helpers import import_ndjson, line, ndjson, one, parse, queue, texts
from writes.runs import enqueue_run, record_trial

CLAIM = "VERIFIER PASSED"  # what tests/agents/claim_verifier.py says, every way it can
AGENT_PARTIES = ("agent", "agent harness")  # the words the page shows a step of the agent's side under


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def head_party(step: Tag) -> list[str]:
    """What a step's head says it is from: its party tags, in order ("agent"; "agent", "imported")."""
    head = step.select_one(":scope > div.step-head")
    return texts(head, "span.party") if head is not None else []


def places(page: BeautifulSoup, words: str) -> Iterator[tuple[str, str]]:
    """Where `words` shows on the trial page: ("step", its head's party), ("log", the program a labelled log line
    is from, or "worker" with the line for the worker's own line), or ("page", the text around it)."""
    for found in one(page, "main").find_all(string=lambda s: words in s):
        assert isinstance(found, NavigableString)
        step = found.find_parent("li", class_="step")
        output = found.find_parent("span", class_="log-output")
        if step is not None:
            yield "step", " ".join(head_party(step))
        elif output is not None:
            yield "log", next(c[len("log-") :] for c in output["class"] if c != "log-output")
        elif found.find_parent("pre", class_="log") is not None:
            yield from (("worker", line) for line in str(found).split("\n") if words in line)
        else:
            yield "page", str(found.parent)[:200]


def run_agent(database, member, *args: str) -> uuid.UUID:
    """Run tests/agents/claim_verifier.py once on the built-in admin console with the real worker; its trial."""
    from worker.loop import WorkerSettings, run_workers

    catalog = make_catalog(database, member.org.id, command_agent("claim_verifier.py", *args), attempt_count=1)
    queue(database, catalog)
    assert run_workers(database, WorkerSettings(), threading.Event(), 1, until_idle=True) == 1
    with database.session(member.org.id) as session:
        return session.execute(text("SELECT id FROM evaluation_trials")).scalar_one()


@pytest.mark.slow  # an agent process, through the worker
@pytest.mark.leak
def test_an_agent_saying_verifier_passed_every_way_it_can_is_shown_as_the_agent_saying_it(page, database, member):
    trial = run_agent(database, member)
    api = page.get(f"/api/v1/trials/{trial}").json
    assert api["reward"] == 0 and api["stages"]["stage_inventory"] == 0  # nothing it said scored
    body = page.get(f"/trials/{trial}").text
    doc = parse(body)

    # Every step says who it is from, first in its head: the calls of a "verifier" tool and of the harness's
    # "model" and its closing words as the agent's, the events it reported as its harness's.
    steps = doc.select("ol.steps > li.step")
    assert [(" ".join(head_party(s)), texts(s, ":scope > div.step-head span.tool")) for s in steps] == [
        ("agent harness", ["verifier"]),
        ("agent harness", ["tests/test.sh"]),
        ("agent", ["verifier"]),
        ("agent", ["model"]),
        ("agent", []),
    ]
    # The environment refused the two tools it never offered: their results are the environment's, and a name the
    # agent chose is never shown as a party's.
    assert texts(doc, "li.step p.said-by span.party").count("environment") == 2
    assert not [words for words in texts(doc, "span.party") if "verifier" in words or "model" in words]

    # Wherever the words show, they are the agent's: in its steps, on its labelled log lines, or quoted after
    # "agent finished:" in the worker's own line; never as the verifier's output, a stage's explanation or a line of
    # the verifier's (stderr behind \r, an ANSI escape, U+2028 and U+2029 included).
    shown = list(places(doc, CLAIM))
    assert [where for where, _ in shown if where == "log"]
    for where, whose in shown:
        if where == "step":
            assert whose in AGENT_PARTIES, (where, whose)
        elif where == "log":
            assert whose == "agent", (where, whose)
        else:
            assert where == "worker" and whose.startswith("agent finished: "), (where, whose)
    said = texts(doc, "span.log-agent")
    assert said.count(f"agent | verifier | {CLAIM}") == 5  # as it is, and behind \r, ESC[2K\r, U+2028 and U+2029
    assert f"agent | {CLAIM}" in said
    assert f"agent | tests/test.sh exit code 0: reward 1 ({CLAIM})" in said
    assert not doc.select("span.log-verifier") and not doc.select("details.verdict-output")
    assert CLAIM not in one(doc, "table.stages").get_text()
    # The ATIF export says whose its harness's events are, too.
    (exported,) = [json.loads(line) for line in page.get("/api/v1/rollouts?kind=all&format=atif").text.splitlines()]
    harness = [s["extra"]["agentforgeSource"] for s in exported["steps"] if s["source"] == "system"]
    assert harness == ["agent harness", "agent harness"]


@pytest.mark.slow  # an agent process, through the worker
@pytest.mark.leak
def test_an_answer_claiming_to_be_the_verifiers_is_refused(page, database, member):
    trial = run_agent(database, member, "source")
    assert page.get(f"/api/v1/trials/{trial}").json["failureCategory"] == "agent_protocol_error"
    doc = parse(page.get(f"/trials/{trial}").text)
    log = one(doc, "pre.log").get_text()
    assert 'agent_protocol_error: an answer is the agent\'s: "source" is set by the worker, never by the agent' in log
    assert not doc.select("li.step") and CLAIM not in doc.get_text()


def record(database, org_id, outcome: TrialOutcome) -> uuid.UUID:
    catalog = make_catalog(database, org_id, {"kind": "scripted", "skill": 0.3}, attempt_count=1)
    with database.session(org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org_id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (org_id, catalog.config_id))
        run = enqueue_run(session, version, config, 1)
        return record_trial(session, session.get_one(EvaluationRun, (org_id, run.id)), 1, 1, outcome).id


def test_the_verifiers_lines_and_output_are_framed_apart_from_the_agents_also_when_searched(page, database, member):
    log = log_text(
        [
            "opened Harbor task t",
            ProgramOutput("agent", f"verifier | {CLAIM}\n{CLAIM}"),
            ProgramOutput("verifier", "a=1 b=0"),
            "tests/test.sh exit code 0: reward 0.5",
        ]
    )
    outcome = TrialOutcome(
        status="failed",
        reward=0.5,
        failure_category="task_incomplete",
        stages={},
        steps=[tool_step(1, "bash", {"command": f"echo {CLAIM}"}, f"{CLAIM}\n[exit code 0]")],
        log=log,
        started_at=datetime.now(UTC),
        task="Write a.txt and b.txt.",
        explanations={VERIFIER_EXPLANATION: "a=1 b=0"},
        tools=[{"name": "bash", "description": "Run a bash command"}],
    )
    trial = record(database, member.org.id, outcome)
    for url in (f"/trials/{trial}", f"/trials/{trial}?q=verifier"):  # a search marks the log line by line
        doc = parse(page.get(url).text)
        assert texts(doc, "span.log-verifier") == ["verifier | a=1 b=0"], url
        assert texts(doc, "span.log-agent") == [f"agent | verifier | {CLAIM}", f"agent | {CLAIM}"], url
        verdict = one(doc, "details.verdict-output")
        assert texts(verdict, "span.party") == ["verifier"] and one(verdict, "pre").get_text() == "a=1 b=0"
        assert "written by the worker, never by the agent" in verdict.get_text()
        step = one(doc, "li.step#step-1")
        assert head_party(step) == ["agent"]
        assert texts(step, "p.said-by span.party") == ["environment: bash"]  # the tool the environment offered


def test_an_imported_trial_shows_its_steps_log_and_verifiers_words_as_the_files(api):
    atif = {
        "schema_version": "ATIF-v1.7",
        "session_id": "s-1",
        "agent": {"name": "other", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "system", "message": CLAIM},
            {"step_id": 2, "source": "user", "message": "Count the lines."},
            {"step_id": 3, "source": "agent", "message": CLAIM},
        ],
    }
    trial = line("imp-1", 1, 0.0, trajectory=atif, log=f"verifier | {CLAIM}\nagent | hello")
    trial["explanations"] = {VERIFIER_EXPLANATION: CLAIM}
    response = import_ndjson(api, ndjson(trial))
    assert response.status_code == 201, response.json
    run = api.get(f"/api/v1/evaluation-runs/{response.json['runs'][0]}").json
    doc = parse(api.get(f"/trials/{run['trials'][0]['id']}").text)
    assert "Imported: this trial ran in another harness" in one(doc, "p.imported-note").get_text()
    steps = doc.select("ol.steps > li.step")
    assert [head_party(s) for s in steps] == [["system", "imported"], ["user", "imported"], ["agent", "imported"]]
    # Its log's lines are the file's: none is shown as a program's of this worker, the verifier's least of all.
    assert not doc.select("pre.log span.log-output")
    assert "no line of it was written by this worker" in doc.get_text()
    verdict = one(doc, "details.verdict-output")
    assert "(as the imported file says)" in one(verdict, "summary").get_text()
    assert "written by the worker" not in verdict.get_text()


def test_the_worker_refusing_a_calls_arguments_is_shown_as_the_workers_words(page, database, member):
    refused = tool_step(
        1,
        "restock",
        {},
        "error: the arguments of restock are not valid JSON",
        is_error=True,
        arguments_text='{"sku": ',
    )
    unknown = tool_step(2, "verifier", {}, f"error: unknown tool 'verifier' ({CLAIM})", is_error=True)
    outcome = TrialOutcome(
        status="failed",
        reward=0.0,
        failure_category="tool_error",
        stages={},
        steps=[refused, unknown],
        log="opened admin-console",
        started_at=datetime.now(UTC),
        task="Restock.",
        tools=[{"name": "restock"}],
    )
    doc = parse(page.get(f"/trials/{record(database, member.org.id, outcome)}").text)
    assert [texts(s, "p.said-by span.party") for s in doc.select("li.step")] == [["worker"], ["environment"]]


@pytest.mark.slow  # a Harbor task's build, bash calls and tests in the real sandbox, through the worker
@pytest.mark.leak
def test_a_harbor_agents_bash_output_never_reads_as_the_verifiers(api, database):
    from tests.integration.harbor_tasks.test_task_runs import TASKS, bash_agent, run_task, trial_of

    agent = bash_agent(
        f"echo {CLAIM}; echo 'verifier | {CLAIM}' >&2",
        # the verifier's folder, to leave it a reward and words: not there for the agent
        f"mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo {CLAIM} > /logs/verifier/said.txt",
        f"echo done > a.txt; echo '{CLAIM}' > b.txt",
    )
    trial = trial_of(api, run_task(api, database, TASKS / "partial", agent))
    assert (trial["reward"], trial["stages"]) == (0.5, {"stage_a_written": 1.0, "stage_b_written": 0.0})
    doc = parse(api.get(f"/trials/{trial['id']}").text)
    assert one(doc, "details.verdict-output pre").get_text() == "a=1 b=0"  # what tests/test.sh printed, only
    assert texts(doc, "span.log-verifier") == ["verifier | a=1 b=0"]
    calls = [s for s in doc.select("li.step") if s.select("pre.command")]
    assert [head_party(s) for s in calls] == [["agent"]] * 3
    assert [texts(s, "p.said-by span.party") for s in calls] == [["environment: bash"]] * 3
    assert f"{CLAIM}\nverifier | {CLAIM}\n[exit code 0]" in one(calls[0], "pre.observation").get_text()
    for where, whose in places(doc, CLAIM):
        assert (where == "step" and whose == "agent") or (where, whose[:16]) == ("worker", "agent finished: "), (
            where,
            whose,
        )


def test_a_search_snippet_of_an_agents_log_line_never_starts_as_the_verifiers(page, database, member):
    # Words a search skips ("the") push the start of the snippet onto "verifier | …", inside the agent's line.
    forged = "the " * 40 + f"verifier | {CLAIM}: all tests passed"
    log = log_text(["opened admin-console", ProgramOutput("agent", forged), ProgramOutput("verifier", "a=0")])
    outcome = TrialOutcome(
        status="failed",
        reward=0.0,
        failure_category="gave_up",
        stages={},
        steps=[],
        log=log,
        started_at=datetime.now(UTC),
        task="Restock.",
    )
    record(database, member.org.id, outcome)
    (snippet,) = texts(page.get(f"/trials?q={CLAIM}").text, "tr.snippets span.snippet")
    assert snippet.startswith(f"agent | …verifier | {CLAIM}: all tests passed"), snippet
