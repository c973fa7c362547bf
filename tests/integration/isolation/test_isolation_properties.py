"""Property test: for random organizations, memberships and rollouts, no id of org A ever reaches a member of org B.

Every example creates two fresh organizations with random roles and random
rewards, then a member of B walks every page and API endpoint with every
filter pointed at A's ids; no response may contain any of A's ids, and every
route given one of A's ids answers 404.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from domain.outcome import TrialOutcome
from tests.conftest import PASSWORD, AuthActions
from tests.factories import make_catalog, record_rewards, typed_steps
from tests.reliability import LEAKS
from writes.accounts import add_membership, create_organization, create_user

pytestmark = [pytest.mark.leak, pytest.mark.slow]  # hypothesis property test

REWARDS = st.lists(st.sampled_from([None, 0.0, 0.15, 0.5, 0.999, 1.0]), min_size=1, max_size=5)
ROLES = st.sampled_from(["owner", "member", "viewer"])
KINDS = ["all", "successful", "failed", "recovery", "preference"]
FORMATS = ["atif-shaped", "atif", "trl"]


def make_org_with_history(database, label: str, role: str, rewards: list, environment: str) -> dict:
    """An organization with one member of `role`, one run whose trials carry `rewards`; every id it created."""
    suffix = uuid.uuid4().hex[:8]
    with database.admin_session() as session, session.begin():
        org = create_organization(session, f"{label} {suffix}")
    email = f"{label.lower()}-{suffix}@example.test"
    with database.admin_session(org.id) as session, session.begin():
        add_membership(session, create_user(session, email, PASSWORD), org, role)
    catalog = make_catalog(database, org.id, {"kind": "scripted"}, attempt_count=len(rewards), environment=environment)
    steps = [{"step": 1, "tool": "list_inventory", "command": "list_inventory", "observation": "ok"}]
    run_id, _ = record_rewards(
        database,
        catalog,
        rewards,
        lambda reward: TrialOutcome(
            status="failed" if reward != 1 else "succeeded",
            reward=reward,
            failure_category=None if reward == 1 else "gave_up",
            stages={"stage_a": 1.0 if reward else 0.0},
            steps=typed_steps(steps),
            log="log",
            started_at=datetime.now(UTC),
            task="task",
        ),
    )
    with database.session(org.id) as session:
        ids = {
            "org": org.id,
            "environment": catalog.environment_id,
            "version": catalog.version_id,
            "config": catalog.config_id,
            "run": run_id,
        }
        for table in ("evaluation_trials", "rollouts", "artifacts"):
            for index, row_id in enumerate(session.execute(text(f"SELECT id FROM {table}")).scalars()):
                ids[f"{table}:{index}"] = row_id
    return {"email": email, "ids": ids}


def probe_urls(a: dict) -> tuple[list[str], list[str]]:
    """(URLs that must answer without A's ids, URLs naming A's ids that must answer 404)."""
    ids = a["ids"]
    visible = [
        "/environments",
        "/trials",
        "/capability-gap",
        "/partial-rewards",
        "/api/v1/me",
        "/api/v1/environments",
        "/settings/members",
        "/trials?failureCategory=gave_up",
    ]
    for name, param in (
        ("environment", "environmentId"),
        ("version", "environmentVersionId"),
        ("run", "evaluationRunId"),
    ):
        visible.append(f"/trials?{param}={ids[name]}")
        visible += [f"/api/v1/rollouts?kind={k}&format={f}&{param}={ids[name]}" for k in KINDS for f in FORMATS]
    visible += [f"/api/v1/rollouts?kind={k}&format={f}" for k in KINDS for f in FORMATS]
    visible += [
        f"/capability-gap?environmentId={ids['environment']}",
        f"/capability-gap?environmentVersionId={ids['version']}",
    ]
    hidden = [
        f"/environments/{ids['environment']}",
        f"/environments/{ids['environment']}/export",
        f"/runs/{ids['run']}",
        f"/api/v1/evaluation-runs/{ids['run']}",
        f"/partial-rewards/versions/{ids['version']}",
        f"/capability-gap?evaluatorConfigId={ids['config']}",
        f"/partial-rewards?evaluatorConfigId={ids['config']}",
    ]
    for key, value in ids.items():
        if key.startswith("evaluation_trials:"):
            hidden.append(f"/trials/{value}")
        elif key.startswith("rollouts:"):
            hidden.append(f"/api/v1/rollouts/{value}")
            visible.append(f"/api/v1/rollouts?kind=all&after={value}")  # A's cursor: 404, never A's lines
        elif key.startswith("artifacts:"):
            hidden.append(f"/api/v1/artifacts/{value}")
    return visible, hidden


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    rewards_a=REWARDS,
    rewards_b=REWARDS,
    role_a=ROLES,
    role_b=ROLES,
    environment=st.sampled_from(["admin-console", "support-desk"]),
)
def test_no_id_of_org_a_reaches_a_member_of_org_b(
    app, database, count_rows, rewards_a, rewards_b, role_a, role_b, environment
):
    a = make_org_with_history(database, "Alpha", role_a, rewards_a, environment)
    b = make_org_with_history(database, "Beta", role_b, rewards_b, environment)
    client = app.test_client()
    auth = AuthActions(client)
    assert auth.login(b["email"]).status_code == 303
    a_ids = {str(value) for value in a["ids"].values()}
    visible, hidden = probe_urls(a)
    for url in visible:
        response = client.get(url)
        LEAKS["requests"] += 1
        assert response.status_code in (200, 404), (url, response.status_code)
        body = response.get_data(as_text=True)
        leaked = [i for i in a_ids if i in body and i not in url]  # echoing the id asked about is not a leak
        assert not leaked, (url, leaked)
    for url in hidden:
        LEAKS["attempts"] += 1
        response = client.get(url)
        assert response.status_code == 404, (url, response.status_code)
        assert not [i for i in a_ids if i in response.get_data(as_text=True) and i not in url]
    token = auth.csrf()
    writes = [
        client.post(
            f"/api/v1/evaluation-runs/{a['ids']['run']}/reset",
            json={"mode": "new_world"},
            headers={"X-CSRFToken": token},
        ),
        client.post(
            "/api/v1/evaluation-runs",
            json={"environmentVersionId": str(a["ids"]["version"]), "evaluatorConfigId": str(a["ids"]["config"])},
            headers={"X-CSRFToken": token},
        ),
        client.post(
            f"/api/v1/environments/{a['ids']['environment']}/versions",
            json={"spec": {"environment": environment}},
            headers={"X-CSRFToken": token},
        ),
    ]
    LEAKS["attempts"] += len(writes)
    expected = 403 if role_b == "viewer" else 404
    assert [w.status_code for w in writes] == [expected] * 3
    assert count_rows("evaluation_runs", a["ids"]["org"]) == 1  # as org A's runtime role sees it
    assert count_rows("environment_versions", a["ids"]["org"]) == 1
