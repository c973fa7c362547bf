"""Fair queue: organizations take turns (round robin), one cannot starve another, a per-organization cap holds, trial
time has a ceiling."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from tests.factories import make_catalog
from tests.helpers import queue, rows, work
from worker.loop import WorkerSettings, claim_next_run

PERFECT = {"kind": "scripted", "skill": 1.0}
LONG_LEASE = WorkerSettings(lease_seconds=600, max_runs_per_org=100)


@pytest.fixture
def two_catalogs(database, make_org):
    """Org A and org B, each with an environment version and an evaluator configuration."""
    acme, globex = make_org("Acme RL"), make_org("Globex Research")
    return make_catalog(database, acme.id, PERFECT, 1), make_catalog(database, globex.id, PERFECT, 1)


def claims(database, count: int, settings: WorkerSettings = LONG_LEASE) -> list:
    """Claim `count` times without running anything; the organization id of each claim (None: nothing claimable)."""
    return [(claimed or (None, None))[0] for claimed in (claim_next_run(database, "w", settings) for _ in range(count))]


def test_an_organization_queueing_late_is_served_second_not_eleventh(database, two_catalogs):
    acme, globex = two_catalogs
    queue(database, acme, count=10)
    queue(database, globex, count=1)
    claimed = claims(database, 4)
    assert claimed == [acme.org_id, globex.org_id, acme.org_id, acme.org_id]


def test_claims_alternate_between_organizations_with_queued_runs(database, two_catalogs):
    acme, globex = two_catalogs
    queue(database, acme, count=3)
    queue(database, globex, count=3)
    assert claims(database, 6) == [acme.org_id, globex.org_id] * 3


@pytest.fixture
def observed_claims(monkeypatch):
    """The organization of every run the worker loop claims, in the order it claimed them."""
    import worker.loop

    seen: list = []
    real = worker.loop.claim_next_run

    def observed(database, name, settings):
        claimed = real(database, name, settings)
        if claimed:
            seen.append(claimed[0])
        return claimed

    monkeypatch.setattr(worker.loop, "claim_next_run", observed)
    return seen


@pytest.mark.parametrize("b_runs", [1, 3])
def test_one_worker_serves_the_organizations_in_turn(database, two_catalogs, observed_claims, b_runs):
    """One worker, org A's 6 runs queued before org B's: B's first run is the second claimed, then A, B, A, …"""
    acme, globex = two_catalogs
    queue(database, acme, count=6)
    queue(database, globex, count=b_runs)
    assert work(database) == 6 + b_runs
    a, b = acme.org_id, globex.org_id
    expected = {1: [a, b, a, a, a, a, a], 3: [a, b, a, b, a, b, a, a, a]}[b_runs]
    assert observed_claims == expected
    statuses = rows(database, globex.org_id, "SELECT status, count(*) FROM evaluation_runs GROUP BY 1")
    assert statuses == [("completed", b_runs)]


def test_the_organization_served_longest_ago_goes_first(database, two_catalogs, make_org, observed_claims):
    """Three organizations: the turn goes to the one that waited longest since its last claim, not to the oldest run."""
    acme, globex = two_catalogs
    initech = make_catalog(database, make_org("Initech").id, PERFECT, 1)
    queue(database, initech)
    queue(database, acme)
    queue(database, globex)
    assert work(database) == 3
    assert observed_claims == [initech.org_id, acme.org_id, globex.org_id]
    # Acme and Globex queue first this time, but Initech's last claim is the oldest: its run goes first.
    queue(database, globex)
    queue(database, acme, count=2)
    queue(database, initech)
    assert work(database) == 4
    assert observed_claims[3:] == [initech.org_id, acme.org_id, globex.org_id, acme.org_id]


def test_a_flood_of_runs_does_not_delay_another_organization(database, two_catalogs):
    """Org A queues 40 runs ahead of org B's one; with the cap out of the way B's run is still the second claimed."""
    acme, globex = two_catalogs
    queue(database, acme, count=40)
    queue(database, globex)
    assert claims(database, 3) == [acme.org_id, globex.org_id, acme.org_id]


def test_an_organization_cannot_move_its_own_turn(database, two_catalogs):
    """The turn order lives where only the claim writes it: the runtime role cannot reset its last claim time."""
    acme, _ = two_catalogs
    queue(database, acme)
    claims(database, 1)
    denied = pytest.raises(ProgrammingError, match="permission denied for table organizations")
    with denied, database.session(acme.org_id) as session, session.begin():
        session.execute(text("UPDATE organizations SET last_claimed_at = NULL"))
    assert rows(database, acme.org_id, "SELECT last_claimed_at IS NOT NULL FROM organizations") == [(True,)]


def test_the_cap_on_runs_in_progress_holds_under_concurrent_workers(database, two_catalogs):
    acme, globex = two_catalogs
    queue(database, acme, count=8)
    capped = WorkerSettings(lease_seconds=600, max_runs_per_org=2)
    start = threading.Barrier(6)
    claimed: list = []

    def worker() -> None:
        start.wait()
        for _ in range(3):
            claimed.append(claim_next_run(database, threading.current_thread().name, capped))

    threads = [threading.Thread(target=worker, name=f"w{i}") for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len([c for c in claimed if c]) == 2
    assert rows(database, acme.org_id, "SELECT status, count(*) FROM evaluation_runs GROUP BY 1 ORDER BY 1") == [
        ("queued", 6),
        ("running", 2),
    ]
    queue(database, globex, count=1)
    assert claims(database, 2, capped) == [globex.org_id, None]  # the other organization is not held up by the cap


def test_an_abandoned_run_is_reclaimed_even_at_the_cap(database, two_catalogs, owner_engine):
    acme, _ = two_catalogs
    queue(database, acme, count=3)
    capped = WorkerSettings(lease_seconds=600, max_runs_per_org=1)
    assert claims(database, 2, capped) == [acme.org_id, None]
    with owner_engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :o, true)"), {"o": str(acme.org_id)})
        conn.execute(text("UPDATE evaluation_runs SET lease_expires_at = now() - interval '1 second'"))
    abandoned = rows(database, acme.org_id, "SELECT id FROM evaluation_runs WHERE status = 'running'")[0].id
    assert claim_next_run(database, "rescuer", capped) == (acme.org_id, abandoned)
    run = rows(database, acme.org_id, "SELECT lease_owner, attempts FROM evaluation_runs WHERE id = :i", i=abandoned)
    assert (run[0].lease_owner, run[0].attempts) == ("rescuer", 2)


def test_no_trial_gets_more_time_than_the_ceiling(database, make_org):
    org = make_org("Acme RL")
    slow = {"kind": "scripted", "skill": 1.0, "stepDelayS": 0.3}
    catalog = make_catalog(database, org.id, slow, 1, timeout_s=3600)
    queue(database, catalog)
    assert work(database, max_trial_timeout_s=0.2) == 1
    trial = rows(database, org.id, "SELECT failure_category, log_excerpt FROM evaluation_trials")[0]
    assert trial.failure_category == "timeout"
    assert "time budget of 0.2s used up" in trial.log_excerpt


def test_the_api_refuses_a_time_budget_over_the_ceiling(app, client, auth, make_member, monkeypatch):
    monkeypatch.setitem(app.config, "AGENTFORGE_MAX_TRIAL_TIMEOUT_S", 120.0)
    member = make_member("mike@acme.test", "Acme RL", "member")
    auth.login(member.email)
    headers = {"X-CSRFToken": auth.csrf()}
    body = {"name": "slow", "agent": PERFECT, "attemptCount": 1}
    refused = client.post("/api/v1/evaluator-configs", json={**body, "timeoutS": 121}, headers=headers)
    assert refused.status_code == 400
    assert refused.json == {
        "error": "invalid timeoutS",
        "detail": "timeoutS must be a number of seconds from 0 to 120, not 121",
    }
    assert client.post("/api/v1/evaluator-configs", json={**body, "timeoutS": 120}, headers=headers).status_code == 201
    schema = client.get("/api/v1/openapi.json").json["paths"]["/evaluator-configs"]["post"]["requestBody"]
    assert schema["content"]["application/json"]["schema"]["properties"]["timeoutS"]["maximum"] == 120
