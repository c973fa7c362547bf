"""The administration commands: clear one-line errors, exit 1, and nothing written on bad input."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from writes.demo import DEMO_PASSWORD


def counts(count_rows) -> tuple[int, int]:
    """Return (organizations, users) as the owner sees them."""
    return count_rows("organizations"), count_rows("users")


def test_init_db_is_safe_to_run_twice(runner):
    for _ in range(2):
        result = runner.invoke(args=["init-db"])
        assert result.exit_code == 0, result.output
        assert "newest schema" in result.output


def test_create_org_and_user_then_log_in(runner, auth):
    assert runner.invoke(args=["create-org", "Acme RL"]).exit_code == 0
    result = runner.invoke(
        args=["create-user", "Ann@Acme.test", "--org", "Acme RL", "--role", "owner", "--password", "s3cret-pass"]
    )
    assert result.exit_code == 0, result.output
    assert "Created ann@acme.test as owner of Acme RL." in result.output
    assert auth.login("ann@acme.test", "s3cret-pass").status_code == 303


def test_create_user_prompts_for_the_password(runner, auth):
    runner.invoke(args=["create-org", "Acme RL"])
    result = runner.invoke(args=["create-user", "ann@acme.test", "--org", "Acme RL"], input="typed-pass\ntyped-pass\n")
    assert result.exit_code == 0, result.output
    assert auth.login("ann@acme.test", "typed-pass").status_code == 303


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create-org", "acme rl"], "organization 'acme rl' already exists"),
        (["create-org", "  "], "organization name must be text of 1 to 200 characters without NUL"),
        (["create-user", "ann@acme.test", "--org", "Acme RL", "--password", "long-enough"], "already exists"),
        (["create-user", "new@acme.test", "--org", "Nowhere", "--password", "long-enough"], "no organization named"),
        (
            ["create-user", "new@acme.test", "--org", "Acme RL", "--role", "boss", "--password", "long-enough"],
            "role must be one of owner, member, viewer",
        ),
        (["create-user", "not-an-email", "--org", "Acme RL", "--password", "long-enough"], "is not an email address"),
        (["create-user", "new@acme.test", "--org", "Acme RL", "--password", "short"], "at least 8 characters"),
        (["add-member", "ann@acme.test", "--org", "Acme RL"], "already a member of Acme RL"),
        (["add-member", "ghost@acme.test", "--org", "Acme RL"], "no user with email"),
    ],
)
@pytest.mark.bad_input
def test_bad_input_prints_one_line_exits_1_and_writes_nothing(runner, count_rows, args, message):
    runner.invoke(args=["create-org", "Acme RL"])
    runner.invoke(args=["create-user", "ann@acme.test", "--org", "Acme RL", "--password", "long-enough"])
    before = counts(count_rows)
    result = runner.invoke(args=args)
    assert result.exit_code == 1
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert counts(count_rows) == before


def test_add_member_gives_a_second_membership(runner, client, auth):
    runner.invoke(args=["create-org", "Acme RL"])
    runner.invoke(args=["create-org", "Globex Research"])
    runner.invoke(args=["create-user", "ann@acme.test", "--org", "Acme RL", "--password", "long-enough"])
    result = runner.invoke(args=["add-member", "ann@acme.test", "--org", "Globex Research", "--role", "viewer"])
    assert result.exit_code == 0, result.output
    auth.login("ann@acme.test", "long-enough")
    roles = {m["organizationName"]: m["role"] for m in client.get("/api/v1/me").json["memberships"]}
    assert roles == {"Acme RL": "member", "Globex Research": "viewer"}


@pytest.mark.slow
def test_demo_creates_logins_and_real_runs_once(runner, auth, owner_engine, count_rows):
    first = runner.invoke(args=["demo", "--if-empty"])
    assert first.exit_code == 0, first.output
    assert f"demo@acme.test / {DEMO_PASSWORD} (organization Acme RL)" in first.output
    assert f"demo@globex.test / {DEMO_PASSWORD} (organization Globex Research)" in first.output
    assert "Ran 64 queued evaluation runs." in first.output
    again = runner.invoke(args=["demo", "--if-empty"])
    assert again.exit_code == 0 and "already has data" in again.output
    assert counts(count_rows) == (2, 2)
    with owner_engine.connect() as conn:
        statuses = dict(conn.execute(text("SELECT status, count(*) FROM evaluation_runs GROUP BY status")).all())
    assert statuses == {"completed": 64}
    assert auth.login("demo@acme.test", DEMO_PASSWORD).status_code == 303
