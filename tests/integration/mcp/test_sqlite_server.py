"""mcp-server-sqlite from the registry, with the mcp 1.x it was written for (a virtualenv of its own), as an
environment: the agent's writes reach the real database in the trial's workspace, and the verifier reads it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.integration.mcp.test_mcp import listed_by_the_server
from tests.paths import TESTS
from worker.sandbox import SandboxSettings
from worker.trial import run_trial

pytestmark = pytest.mark.slow  # MCP server processes


@pytest.fixture(scope="session")
def sqlite_server() -> Path:
    from tests.mcp.servers import install

    return install("sqlite")


def test_mcp_server_sqlite_from_the_registry_runs_as_an_environment(sqlite_server):
    server = sqlite_server / "bin" / "mcp-server-sqlite"
    truth = {tool["name"]: tool for tool in listed_by_the_server([str(server), "--db-path", ":memory:"])}
    spec = {
        "kind": "mcp",
        "command": [str(server), "--db-path", "data.db"],  # in the server's working directory: the workspace
        "task": "Keep the stock of two SKUs in a table called skus.",
        "verifier": {"command": ["python", str(TESTS / "mcp" / "sqlite_verifier.py")]},
    }
    settings = SandboxSettings.from_environ({**os.environ, "AGENTFORGE_SANDBOX_PATHS": str(sqlite_server)})
    agent = {"kind": "command", "argv": [sys.executable, str(TESTS / "agents" / "sqlite_agent.py")]}
    outcome = run_trial(spec, agent, world_seed=1, seed=1, max_steps=10, timeout_s=60, trial_number=1, sandbox=settings)

    assert (outcome.status, outcome.reward) == ("succeeded", 1.0), outcome.log
    assert outcome.stages == {"stage_table": 1.0, "stage_rows": 1.0}
    steps = outcome.stored_steps()
    assert steps[0]["extra"]["serverInfo"]["name"] == "sqlite"
    assert {t["name"]: t["inputSchema"] for t in steps[1]["extra"]["tools"]} == {
        name: tool["inputSchema"] for name, tool in truth.items()
    }
    calls = [(s["tool"], s["toolCalls"][0]["arguments"]) for s in steps[2:-1]]
    assert [tool for tool, _ in calls] == ["create_table", "write_query", "write_query", "read_query", "list_tables"]
    assert calls[3][1] == {"query": "SELECT sku, stock FROM skus ORDER BY sku"}
    read = steps[5]["observation"]
    assert "'sku': 'SKU-1', 'stock': 12" in read and "'sku': 'SKU-2', 'stock': 5" in read
    assert not any(s.get("results", [{}])[0].get("isError") for s in steps[2:-1])
    assert "'name': 'skus'" in steps[6]["observation"]
