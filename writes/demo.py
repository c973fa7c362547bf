"""Demo data: two organizations with users, built-in environments (two versions each), evaluator configs, runs, and a
dataset of both built-in worlds run by the expert and the novice."""

from __future__ import annotations

from dataclasses import dataclass

from db.session import Database
from domain.datasets import TaskInput
from queries.accounts import find_organization
from writes.accounts import add_membership, create_organization, create_user
from writes.dataset_runs import start_dataset_run
from writes.datasets import add_dataset_version, create_dataset
from writes.environments import create_environment, create_environment_version, create_evaluator_config
from writes.runs import enqueue_run, reset_run

DEMO_PASSWORD = "agentforge-demo"
DEMO_ORGS = (("Acme RL", "demo@acme.test"), ("Globex Research", "demo@globex.test"))
ENVIRONMENTS = (
    (
        "admin-console",
        "Shop admin console: restock a SKU, then place a customer's order.",
        ({"skus": 8, "customers": 5}, {"skus": 16, "customers": 10}),
    ),
    (
        "support-desk",
        "Support queue: triage, route and answer one customer ticket.",
        ({"tickets": 6}, {"tickets": 14, "reference_prefix": "CASE"}),
    ),
)
MCP_SPEC = {
    "kind": "mcp",
    "command": ["python", "-m", "worker.environments.mcp_admin_console"],
    "verifier": {"tool": "score"},
}
DATASET = ("shop-and-support", "Three worlds of each built-in environment's first version, the same for every agent.")
DATASET_SEEDS = (1, 2, 3)  # world seeds of each version's tasks
DATASET_ATTEMPTS = 2  # trials per task of the demo's dataset runs
EVALUATORS = (  # name, skill, attemptCount, max steps
    ("scripted-expert", 0.85, 8, 14),
    ("scripted-novice", 0.35, 4, 10),
    ("scripted-smoke", 0.6, 1, 12),
)


@dataclass(frozen=True)
class DemoLogin:
    """A login the demo created (or found)."""

    organization: str
    email: str
    password: str
    created: bool


def create_demo(database: Database) -> list[DemoLogin]:
    """Create each demo organization that does not exist yet, with its user, environments and queued runs."""
    logins = []
    for org_name, email in DEMO_ORGS:
        with database.admin_session() as session, session.begin():
            existing = find_organization(session, org_name)
            org = existing or create_organization(session, org_name)
        if existing is None:
            with database.admin_session(org.id) as session, session.begin():
                add_membership(
                    session, create_user(session, email, DEMO_PASSWORD, f"Demo user of {org_name}"), org, "owner"
                )
            _create_org_data(database, org.id)
        logins.append(DemoLogin(org_name, email, DEMO_PASSWORD, existing is None))
    return logins


def _create_org_data(database: Database, org_id) -> None:
    """Environments with two versions each, three evaluator configs, one run per (version, config), resets."""
    with database.session(org_id) as session, session.begin():
        configs = [
            create_evaluator_config(
                session, org_id, name, {"kind": "scripted", "skill": skill}, attempts, max_steps=steps, timeout_s=30
            )
            for name, skill, attempts, steps in EVALUATORS
        ]
        runs, tasks = [], []
        for name, description, params_by_version in ENVIRONMENTS:
            environment = create_environment(session, org_id, name, description)
            for params in params_by_version:
                version = create_environment_version(
                    session, environment, {"kind": "builtin", "environment": name, "params": params}
                )
                runs += [enqueue_run(session, version, config) for config in configs]
                if params is params_by_version[0]:
                    tasks += [
                        TaskInput(version.id, seed, "environmentVersionId", "worldSeeds") for seed in DATASET_SEEDS
                    ]
        for index, run in enumerate(runs[:6]):
            reset_run(session, run, "new_workspace" if index % 2 == 0 else "new_world")
        mcp = create_environment(session, org_id, "admin-console-mcp", "The admin console served over MCP (stdio).")
        version = create_environment_version(session, mcp, MCP_SPEC)
        for config in configs[1:]:  # the novice (attemptCount 4) and the smoke test (attemptCount 1)
            enqueue_run(session, version, config)
        dataset = create_dataset(session, org_id, *DATASET)
        dataset_version, _ = add_dataset_version(session, dataset, tasks)
        for config in configs[:2]:  # the expert and the novice meet the same six tasks
            start_dataset_run(session, dataset_version.id, config.id, DATASET_ATTEMPTS)
