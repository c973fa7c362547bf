"""The Node MCP servers from npm (server-everything, server-memory) as environments, and a JVM agent, under the
default limits.

Under RLIMIT_AS (the old memory limit) every trial of the Node servers ended `resource_limit` with V8's "JavaScript
heap out of memory" at ~28 MB of heap, and the JVM said "Could not create the Java Virtual Machine": the limit
counted the address space they reserve. Memory is now the sandbox's control
group (as root) or RLIMIT_DATA (without one); both are run here, and under both a real 4 GB allocation still ends
the trial at the limit.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from atif import Step as AtifStep

from queries.training_formats import _atif_step
from tests.paths import TESTS
from worker import cgroups
from worker.sandbox import SandboxSettings
from worker.trial import run_trial

pytestmark = pytest.mark.slow  # Node server processes

AGENT = TESTS / "agents" / "node_servers_agent.py"
VERIFIER = TESTS / "mcp" / "node_verifier.py"
# A program that really writes 4 GB (64 buffers of 64 MB, each filled), as a command agent would.
ALLOCATE_4GB = "const held = []; for (let i = 0; i < 64; i++) held.push(Buffer.alloc(64 << 20, 1)); console.log('4 GB')"


@pytest.fixture(scope="session")
def node_servers() -> Path:
    from tests.mcp.servers import install_node

    return install_node() / "node_modules" / "@modelcontextprotocol"


@pytest.fixture(params=["cgroup", "rlimit"])
def mechanism(request, monkeypatch) -> str:
    """How memory is held: the sandbox's control group (the worker as root), or RLIMIT_DATA (no hierarchy)."""
    import worker.sandbox

    if request.param == "cgroup":
        if not SandboxSettings.from_environ().hierarchy.version:
            pytest.skip("no writable cgroup hierarchy here (the worker is not root): memory is RLIMIT_DATA")
    else:
        monkeypatch.setattr(worker.sandbox, "_hierarchy", lambda euid: cgroups.detect(Path("/nonexistent"), "0::/\n"))
    return request.param


def spec(servers: Path, name: str) -> dict:
    """server-everything, its answers copied to the workspace for the verifier; server-memory, its memory file in
    the workspace (MEMORY_FILE_PATH must be absolute: a relative one is taken from the package's own directory)."""
    if name == "everything":
        command = [
            "/bin/sh",
            "-c",
            'node "$0" stdio | tee transcript.jsonl',
            str(servers / "server-everything/dist/index.js"),
        ]
    else:
        command = [
            "/bin/sh",
            "-c",
            'MEMORY_FILE_PATH="$PWD/memory.jsonl" exec node "$0"',
            str(servers / "server-memory/dist/index.js"),
        ]
    return {"kind": "mcp", "command": command, "verifier": {"command": ["python", str(VERIFIER), name]}}


def trial(environment: dict, agent: dict):
    return run_trial(
        environment,
        agent,
        world_seed=1,
        seed=1,
        max_steps=20,
        timeout_s=90,
        trial_number=1,
        sandbox=SandboxSettings.from_environ(),
    )


def test_the_memory_mechanism_in_use_is_the_one_the_worker_names(mechanism):
    words = SandboxSettings.from_environ().describe_limits()
    assert (
        ("memory.limit_in_bytes" in words or "memory.max" in words) if mechanism == "cgroup" else "RLIMIT_DATA" in words
    )


def test_server_memory_runs_to_reward_1_under_the_default_limits(node_servers, mechanism):
    outcome = trial(spec(node_servers, "memory"), {"kind": "command", "argv": [sys.executable, str(AGENT), "memory"]})
    assert (outcome.status, outcome.reward) == ("succeeded", 1.0), outcome.log
    assert outcome.stages == {"stage_created": 1.0, "stage_observed": 1.0}
    steps = outcome.stored_steps()
    assert steps[0]["extra"]["serverInfo"]["name"] == "memory-server"
    assert [s["tool"] for s in steps[2:5]] == ["create_entities", "add_observations", "read_graph"]
    graph = json.loads(steps[4]["observation"])
    assert graph["entities"][0]["observations"] == ["evaluates agents", "runs in a sandbox"]


def test_server_everything_runs_to_reward_1_and_its_content_parts_are_kept(node_servers, mechanism):
    outcome = trial(
        spec(node_servers, "everything"), {"kind": "command", "argv": [sys.executable, str(AGENT), "everything"]}
    )
    assert (outcome.status, outcome.reward) == ("succeeded", 1.0), outcome.log
    by_tool = {s.tool: s for s in outcome.steps}
    assert by_tool["get-sum"].observation == "The sum of 3 and 4 is 7."
    # Resource links keep their name and URI, an embedded resource its text, in what the agent read.
    links = by_tool["get-resource-links"].observation
    assert "[resource_link Text Resource 2 demo://resource/dynamic/text/2 text/plain]" in links
    embedded = by_tool["get-resource-reference"].observation
    assert "[resource demo://resource/dynamic/text/3 text/plain]\nResource 3: This is a plaintext resource" in embedded
    # structuredContent is kept on the step's result beside the text the agent read.
    weather = by_tool["get-structured-content"].results[0]
    assert weather.other["structuredContent"] == json.loads(weather.text)
    # The image comes back as an ATIF image part (a data: URL ATIF's own model accepts), in the order sent.
    image_step = by_tool["get-tiny-image"]
    stored = image_step.results[0].content
    png = next(part for part in stored if part["type"] == "image")
    atif = _atif_step(5, image_step)
    AtifStep.model_validate(atif)
    parts = atif["observation"]["results"][0]["content"]
    assert [p["type"] for p in parts] == [p["type"] for p in stored] == ["text", "image", "text"]
    assert parts[1]["source"] == {"media_type": "image/png", "path": f"data:image/png;base64,{png['data']}"}
    links_atif = _atif_step(6, by_tool["get-resource-links"])
    AtifStep.model_validate(links_atif)
    kept = links_atif["observation"]["results"][0]["extra"]["content"]  # ATIF has no part for a link: kept raw
    assert [p["uri"] for p in kept] == ["demo://resource/dynamic/blob/1", "demo://resource/dynamic/text/2"]


def test_a_4_gb_allocation_still_ends_at_the_memory_limit(mechanism):
    outcome = trial(
        {"kind": "builtin", "environment": "admin-console", "params": {}},
        {"kind": "command", "argv": ["node", "-e", ALLOCATE_4GB]},
    )
    assert (outcome.status, outcome.failure_category) == ("failed", "resource_limit"), outcome.log
    assert "agent exceeded the limit of 1024 MB of memory" in outcome.log


@pytest.mark.skipif(shutil.which("java") is None, reason="no java here (apt-get install default-jre-headless)")
def test_a_jvm_agent_starts_under_the_default_limits(mechanism):
    # Debian's JDK reads its java.security from /etc/java-<n>-openjdk, which the sandbox binds for it.
    agent = {"kind": "command", "argv": ["java", str(TESTS / "agents" / "JvmAgent.java")]}
    outcome = trial({"kind": "builtin", "environment": "admin-console", "params": {}}, agent)
    assert "agent finished: the JVM called list_inventory (" in outcome.log, outcome.log
    assert outcome.failure_category == "gave_up"  # it stops after one call: the task is not done, nothing broke
