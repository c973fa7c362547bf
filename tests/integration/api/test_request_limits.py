"""One user's searches, comparisons and exports in flight at once are capped (429, Retry-After); nobody else waits."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import blueprints.api.compare
import blueprints.compare
import blueprints.trials
from db.session import slot_key
from db.urls import libpq_url
from tests.conftest import AuthActions
from tests.factories import make_catalog
from tests.integration.exports.test_exports import STEPS, record_run
from web.limits import SCOPE

LIMIT = 2
EXPORT = "/api/v1/rollouts?kind=all"


@pytest.fixture(autouse=True)
def limit(app, monkeypatch):
    monkeypatch.setitem(app.config, "AGENTFORGE_MAX_EXPENSIVE_REQUESTS", LIMIT)


@pytest.fixture
def run_id(database, viewer):
    """A run of the viewer's organization with three recorded trials (rewards 0, 0.5, 1)."""
    catalog = make_catalog(database, viewer.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=3)
    return record_run(database, catalog, [0.0, 0.5, 1.0], steps_for=lambda reward: STEPS)[0]


@pytest.fixture
def other_run_id(database, viewer, run_id):
    """A second run of the viewer's organization (compare refuses a run against itself)."""
    catalog = make_catalog(
        database, viewer.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=3, config_name="second"
    )
    return record_run(database, catalog, [1.0, 0.5, 1.0], steps_for=lambda reward: STEPS)[0]


def logged_in(app, member):
    client = app.test_client()
    AuthActions(client).login(member.email)
    return client


def streams(client, count: int) -> list:
    """`count` exports whose answers are open and unread (each holds its slot until closed)."""
    return [client.get(EXPORT, buffered=False) for _ in range(count)]


def assert_busy(response, *, api: bool) -> None:
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    words = f"You already have {LIMIT} searches, comparisons, exports or task uploads running"
    if api:
        assert response.json["error"] == "too many requests"
        assert response.json["detail"].startswith(words)
    else:
        assert response.mimetype == "text/html" and "Too Many Requests" in response.text and words in response.text


class Gate:
    """Holds every call of a view's expensive query until opened, counting the calls inside."""

    def __init__(self, monkeypatch, module, name: str) -> None:
        self.opened, self.inside, self.real = threading.Event(), threading.Semaphore(0), getattr(module, name)
        monkeypatch.setattr(module, name, self)

    def __call__(self, *args, **kwargs):
        self.inside.release()
        assert self.opened.wait(10)
        return self.real(*args, **kwargs)

    def wait_inside(self, count: int) -> None:
        for _ in range(count):
            assert self.inside.acquire(timeout=10)


def in_threads(calls) -> tuple[list, list[threading.Thread]]:
    """Start each call in a thread; the answers list fills as they return."""
    answers: list = []
    threads = [threading.Thread(target=lambda c=call: answers.append(c())) for call in calls]
    for thread in threads:
        thread.start()
    return answers, threads


@pytest.mark.leak
def test_one_export_over_the_limit_answers_429_and_nobody_else_waits(app, run_id, viewer, make_member, make_org):
    mine = logged_in(app, viewer)
    held = streams(mine, LIMIT)
    assert [s.status_code for s in held] == [200] * LIMIT
    assert_busy(mine.get(EXPORT), api=True)
    assert_busy(logged_in(app, viewer).get(EXPORT), api=True)  # another login of the same person: the same slots
    # Another member of the same organization, and a user of another organization, are not held up.
    colleague = logged_in(app, make_member("carl@acme.test", viewer.org, "viewer"))
    assert colleague.get(EXPORT).status_code == 200
    stranger = logged_in(app, make_member("gus@globex.test", make_org("Globex Research"), "viewer"))
    assert [s.status_code for s in streams(stranger, LIMIT)] == [200] * LIMIT
    # The stream that ends gives its slot back.
    held[0].get_data()
    held[0].close()
    again = mine.get(EXPORT)
    assert again.status_code == 200 and again.get_data(as_text=True).count("\n") == 3


@pytest.mark.fault
def test_a_client_that_disconnects_mid_export_frees_its_slot(app, run_id, viewer):
    mine = logged_in(app, viewer)
    held = streams(mine, LIMIT)
    next(held[1].response)  # the first chunk, then the client goes away
    held[1].close()
    assert mine.get(EXPORT).status_code == 200
    replacement = mine.get(EXPORT, buffered=False)
    assert replacement.status_code == 200
    assert_busy(mine.get(EXPORT), api=True)
    for stream in (held[0], replacement):
        stream.close()


def test_comparisons_over_the_limit_answer_429_pages_and_json(app, monkeypatch, run_id, other_run_id, viewer):
    gate = Gate(monkeypatch, blueprints.compare, "compare")
    api_gate = Gate(monkeypatch, blueprints.api.compare, "compare")
    page, api = f"/compare?a={run_id}&b={other_run_id}", f"/api/v1/compare?a={run_id}&b={other_run_id}"
    clients = [logged_in(app, viewer) for _ in range(LIMIT)]
    answers, threads = in_threads([lambda c=c: c.get(page) for c in clients])
    gate.wait_inside(LIMIT)
    mine = logged_in(app, viewer)
    assert_busy(mine.get(page), api=False)
    assert_busy(mine.get(api), api=True)
    gate.opened.set()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [200] * LIMIT
    api_gate.opened.set()
    assert mine.get(api).status_code == 200 and mine.get(page).status_code == 200  # both slots are free again


def test_thirty_two_searches_at_once_run_the_limit_and_refuse_the_rest(app, monkeypatch, run_id, viewer):
    gate = Gate(monkeypatch, blueprints.trials, "snippets")
    clients = [logged_in(app, viewer) for _ in range(4)]
    answers, threads = in_threads([lambda i=i: clients[i % 4].get("/trials?q=restock") for i in range(32)])
    gate.wait_inside(LIMIT)
    deadline = time.monotonic() + 10
    while len(answers) < 32 - LIMIT and time.monotonic() < deadline:  # the refusals come back at once,
        time.sleep(0.01)  # while the admitted searches are still held
    assert [a.status_code for a in answers] == [429] * (32 - LIMIT)
    assert gate.inside.acquire(timeout=0.2) is False  # no third search got in
    gate.opened.set()
    for thread in threads:
        thread.join()
    assert sorted(a.status_code for a in answers) == [200] * LIMIT + [429] * (32 - LIMIT)
    assert all(a.headers["Retry-After"] == "2" for a in answers if a.status_code == 429)


def test_only_searches_count_among_trial_lists(app, run_id, viewer):
    mine = logged_in(app, viewer)
    held = streams(mine, LIMIT)
    assert mine.get("/trials").status_code == 200
    assert mine.get("/api/v1/trials?status=failed").status_code == 200
    assert_busy(mine.get("/trials?q=restock"), api=False)
    assert_busy(mine.get("/api/v1/trials?q=restock"), api=True)
    for stream in held:
        stream.close()
    assert "Restock" in mine.get("/trials?q=restock").text


@pytest.mark.fault
def test_a_request_that_fails_gives_its_slot_back(app, monkeypatch, run_id, other_run_id, viewer):
    def broken(*args):
        raise RuntimeError("comparison failed")

    monkeypatch.setattr(blueprints.api.compare, "compare", broken)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    try:
        mine = logged_in(app, viewer)
        for _ in range(LIMIT + 1):
            assert mine.get(f"/api/v1/compare?a={run_id}&b={other_run_id}").status_code == 500
        assert mine.get(f"/api/v1/compare?a={run_id}&b=not-a-uuid").status_code == 400
    finally:
        app.config["PROPAGATE_EXCEPTIONS"] = None
    assert [s.status_code for s in streams(mine, LIMIT)] == [200] * LIMIT


@pytest.mark.fault
def test_slots_are_shared_by_every_process_and_die_with_a_process(app, database_urls, run_id, viewer):
    """Slots another web process holds (its own connections) count here; when that process dies, they are free."""
    other_process = psycopg.connect(libpq_url(database_urls.runtime), autocommit=True)
    try:
        for index in range(LIMIT):
            taken = other_process.execute("SELECT pg_try_advisory_lock(%s)", (slot_key(SCOPE, viewer.user.id, index),))
            assert taken.fetchone() == (True,)
        mine = logged_in(app, viewer)
        assert_busy(mine.get(EXPORT), api=True)
    finally:
        other_process.close()  # as when the process is killed: PostgreSQL releases what the connection held
    assert mine.get(EXPORT).status_code == 200
