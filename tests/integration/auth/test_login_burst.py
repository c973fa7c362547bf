"""The login throttle holds under concurrent bursts: at most the allowed attempts are checked, every failure counts."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy import text

from tests.conftest import PASSWORD, csrf_token_from

pytestmark = pytest.mark.slow  # concurrent scrypt bursts


@pytest.fixture
def mike(make_member):
    """A member whose account the burst aims at."""
    return make_member("mike@acme.test", "Acme RL", "member")


def burst(app, attempts: list[tuple[str, str]]):
    """Send every (email, password) login at once from its own client (own cookies, same address); the responses."""
    clients = [app.test_client() for _ in attempts]
    tokens = [csrf_token_from(client.get("/login").text) for client in clients]
    start = threading.Barrier(len(attempts))
    responses: list = [None] * len(attempts)

    def attempt(n: int) -> None:
        email, password = attempts[n]
        start.wait()
        responses[n] = clients[n].post("/login", data={"email": email, "password": password, "csrf_token": tokens[n]})

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(len(attempts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return responses


def failures(owner_engine, key: str) -> int:
    """Failed logins the throttle holds for `key` ('account:<email>' or 'address:<ip>')."""
    with owner_engine.connect() as conn:
        return conn.execute(text("SELECT failures FROM login_throttle WHERE key = :k"), {"k": key}).scalar() or 0


def test_a_burst_of_wrong_passwords_and_the_right_one_checks_at_most_five_wrong(app, mike, owner_engine):
    attempts = [(mike.email, f"wrong password {n}") for n in range(30)]
    attempts.insert(17, (mike.email, PASSWORD))
    responses = burst(app, attempts)
    codes = Counter(r.status_code for r in responses)
    assert set(codes) <= {303, 401, 429}, codes
    assert codes[401] <= 5 and codes[303] <= 1, codes  # at most five wrong passwords checked, whatever the order
    assert codes[429] >= 25, codes
    right = responses[17].status_code
    assert right in (303, 429)  # in only if it was checked before the fifth failure
    for response in responses:
        if response.status_code == 429:
            assert int(response.headers["Retry-After"]) > 0
            assert "Too many failed logins. Try again in" in response.text
    assert failures(owner_engine, "address:127.0.0.1") == codes[401]  # every failure counted
    assert failures(owner_engine, f"account:{mike.email}") == codes[401]  # a success erases none
    if codes[401] == 5:
        after = app.test_client()
        token = csrf_token_from(after.get("/login").text)
        late = after.post("/login", data={"email": mike.email, "password": PASSWORD, "csrf_token": token})
        assert late.status_code == 429 and int(late.headers["Retry-After"]) > 800  # locked for the window


def test_a_burst_from_one_address_checks_at_most_thirty(app, make_member, owner_engine):
    attempts = [(f"guess{n}@acme.test", "wrong password") for n in range(36)]
    codes = Counter(r.status_code for r in burst(app, attempts))
    assert set(codes) <= {401, 429}, codes
    assert codes[401] == 30 and codes[429] == 6, codes
    assert failures(owner_engine, "address:127.0.0.1") == 30


def test_attempts_one_after_another_are_all_checked_up_to_the_limit(client, auth, mike, owner_engine):
    codes = [auth.login(mike.email, "wrong password").status_code for _ in range(7)]
    assert codes == [401] * 5 + [429] * 2
    assert failures(owner_engine, f"account:{mike.email}") == 5
