"""Secrets stay secret: env values sealed at rest, names only for every role, masked in everything recorded."""

from __future__ import annotations

import hashlib
import html
import json
import threading
import uuid

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError, ProgrammingError

from app import create_app
from db.session import Database
from db.urls import runtime_role_of, sqlalchemy_url
from domain.secret_env import HIDDEN, SecretsKey, SecretsKeyError, create_once, load_secrets_key
from domain.specs import spec_sha256
from models import Base, EnvironmentVersion, EvaluatorConfig
from queries.environments import runnable_agent, runnable_spec
from queries.export_formats import EXPORT_FORMATS
from queries.exports import EXPORT_KINDS
from queries.trials import TRAJECTORY_BODY
from tests.factories import command_agent, make_catalog
from tests.paths import ROOT
from worker.loop import WorkerSettings, run_workers
from worker.masking import MASK, MIN_MASKED_LENGTH, Masker, secret_values
from writes.environments import create_environment, create_environment_version, create_evaluator_config
from writes.runs import enqueue_run

pytestmark = pytest.mark.leak

SECRET = "sk-live-7Qm2Xv9Lp4Rt8Wz3"
QUOTED = 'pass"word\\with-quote-5e6f'
SERVER_TOKEN = "mcp-token-Hq8Zr2Kd7Vn4"
LEAKY_AGENT = command_agent("leak_secret.py") | {
    "env": {"AGENT_API_KEY": SECRET, "AGENT_QUOTED": QUOTED, "SHORT": "ab"}
}
SECRET_SPEC = {
    "kind": "mcp",
    "command": ["python", str(ROOT / "tests" / "mcp" / "secret_server.py")],
    "env": {"SERVER_TOKEN": SERVER_TOKEN},
    "verifier": {"tool": "score"},
}


def leaked_forms(value: str) -> set[str]:
    """Every way a value could show up in a page, JSON or log, plus its second half (a partial leak)."""
    encoded = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]}
    return encoded | {html.escape(form) for form in encoded} | {value[len(value) // 2 :]}


def assert_hidden(where: str, body: str | bytes, *values: str) -> None:
    """Assert that no form of any of `values` is in `body`."""
    text_body = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    for value in values or (SECRET, QUOTED, SERVER_TOKEN):
        for form in leaked_forms(value):
            assert form not in text_body, f"{where} shows {form!r}"


def work(database) -> int:
    return run_workers(database, WorkerSettings(), threading.Event(), concurrency=1, until_idle=True)


def queue(database, org_id, version_id, config_id) -> uuid.UUID:
    with database.session(org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org_id, version_id))
        config = session.get_one(EvaluatorConfig, (org_id, config_id))
        return enqueue_run(session, version, config).id


def scoped_rows(engine, org_id, sql) -> list:
    with engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :o, true)"), {"o": str(org_id)})
        return conn.execute(text(sql)).all()


def everything_stored(engine, org_id) -> str:
    """Every row of every table of the organization as PostgreSQL prints it (bytea as hex), read as the owner."""
    dump = []
    for table in Base.metadata.sorted_tables:
        for (row,) in scoped_rows(engine, org_id, f"SELECT t::text FROM {table.name} t"):
            dump.append(row)
    return "\n".join(dump)


def assert_not_stored(engine, org_id, *values: str) -> None:
    """No table holds any value: not as text, not as the hex PostgreSQL prints for bytea."""
    stored = everything_stored(engine, org_id)
    for value in values:
        assert_hidden("the database", stored, value)
        assert value.encode().hex() not in stored


@pytest.fixture
def acme(make_member):
    """An owner, a member and a viewer of one organization."""
    owner = make_member("olga@acme.test", "Acme RL", "owner")
    member = make_member("mike@acme.test", owner.org, "member")
    viewer = make_member("vera@acme.test", owner.org, "viewer")
    return owner, member, viewer


@pytest.mark.slow  # starts agent processes
def test_a_leaking_agent_and_server_show_only_masks_in_every_page_export_artifact_and_log(
    database, client, auth, acme, owner_engine, caplog
):
    owner, _, viewer = acme
    org_id = owner.org.id
    catalog = make_catalog(database, org_id, LEAKY_AGENT, attempt_count=2)
    with database.session(org_id) as session, session.begin():
        env = create_environment(session, org_id, "secret-mcp")
        mcp_version = create_environment_version(session, env, SECRET_SPEC)
        mcp_config = create_evaluator_config(session, org_id, "first-tool", command_agent("first_tool.py"), 1)
        mcp_version_id, mcp_config_id = mcp_version.id, mcp_config.id
    run_id = queue(database, org_id, catalog.version_id, catalog.config_id)
    mcp_run_id = queue(database, org_id, mcp_version_id, mcp_config_id)
    with caplog.at_level("DEBUG"):
        assert work(database) == 2

    trials = scoped_rows(
        owner_engine,
        org_id,
        f"SELECT t.id, t.evaluation_run_id, t.log_excerpt, t.task, t.metrics, t.trajectory_artifact_id, "
        f"{TRAJECTORY_BODY} AS body FROM evaluation_trials t JOIN artifacts a ON a.id = t.trajectory_artifact_id "
        "ORDER BY t.id",
    )
    leaky = [t for t in trials if t.evaluation_run_id == run_id]
    assert len(leaky) == 2
    for trial in leaky:  # the agent got the plaintext (its sha256 and the reversed key are not masked) ...
        assert "sha256 of the key " + hashlib.sha256(SECRET.encode()).hexdigest() in trial.log_excerpt
        assert "key reversed " + SECRET[::-1] in trial.log_excerpt
        assert f"starting with key {MASK} and {MASK}" in trial.log_excerpt
        assert f"agent finished: done; the key was {MASK}" in trial.log_excerpt
        steps = json.loads(json.loads(trial.body)["trajectory"])["steps"]
        *calls, closing = steps  # two tool calls, then the agent's closing words
        assert [s["command"] for s in calls] == [f'restock {{"sku": "{MASK}", "quantity": 1}}'] * 2
        assert [s["observation"] for s in calls] == [f"error: no SKU '{MASK}'"] * 2
        assert (closing["tool"], closing["message"]) == (None, f"done; the key was {MASK}")
    (server_trial,) = [t for t in trials if t.evaluation_run_id == mcp_run_id]
    assert f"The server token is {MASK}." in server_trial.task  # ... and so did the MCP server
    assert set(server_trial.metrics) == {f"stage_{MASK}"}
    assert hashlib.sha256(SERVER_TOKEN.encode()).hexdigest() in server_trial.body.decode()
    assert f"server token is {MASK}" in server_trial.log_excerpt

    auth.login(viewer.email)
    seen = {"worker log": caplog.text}
    for run in (run_id, mcp_run_id):
        seen[f"run page {run}"] = client.get(f"/runs/{run}").text
        seen[f"run API {run}"] = client.get(f"/api/v1/evaluation-runs/{run}").text
        seen[f"trials list {run}"] = client.get("/trials", query_string={"evaluationRunId": str(run)}).text
    for trial in trials:
        page = client.get(f"/trials/{trial.id}")
        assert page.status_code == 200 and MASK in page.text
        seen[f"trial page {trial.id}"] = page.text
        artifact = client.get(f"/api/v1/artifacts/{trial.trajectory_artifact_id}")
        assert artifact.status_code == 200
        seen[f"artifact {trial.id}"] = artifact.get_data()
    for kind in EXPORT_KINDS:
        for export_format in EXPORT_FORMATS:
            response = client.get("/api/v1/rollouts", query_string={"kind": kind, "format": export_format})
            assert response.status_code == 200
            seen[f"export {kind} {export_format}"] = response.get_data()
    rollouts = [r.id for r in scoped_rows(owner_engine, org_id, "SELECT id FROM rollouts")]
    assert len(rollouts) == 3
    for rollout in rollouts:
        seen[f"rollout {rollout}"] = client.get(f"/api/v1/rollouts/{rollout}").get_data()
    seen["export all"] = seen["export all atif-shaped"]
    assert MASK in seen["export all"].decode()
    for where, body in seen.items():
        assert_hidden(where, body)
    assert_not_stored(owner_engine, org_id, SECRET, QUOTED, SERVER_TOKEN)


CUT_SECRET = "Qz7WkR2xVn9MpL4tJh8YsG3rXw6NqK5vZm1TjP0u"  # 40 characters, none of its pieces a hex or English word
CUT_PROGRAM = str(ROOT / "tests" / "mcp" / "cut_secret.py")


def cut_spec(command: list[str], verifier: dict | None = None) -> dict:
    return {"kind": "mcp", "command": command, "env": {"LEAK": CUT_SECRET}, "verifier": verifier or {"tool": "score"}}


FAULTY_SERVER = ["python", str(ROOT / "tests" / "mcp" / "faulty_server.py"), "fine"]
CUTS = [  # where the worker cuts what a program printed: the spec, the agent, and what the log shows at the cut
    pytest.param(
        None,
        command_agent("cut_secret.py", "line") | {"env": {"LEAK": CUT_SECRET}},
        f"x{MASK} and the res'",
        id="a line of the agent that is not JSON (200 characters kept)",
    ),
    pytest.param(
        cut_spec(FAULTY_SERVER, {"command": ["python", CUT_PROGRAM, "verifier"]}),
        command_agent("first_tool.py"),
        f"the verifier exited with code 1: the verifier failed: {MASK}zzz",
        id="a failing verifier's stderr (its last 500 characters kept)",
    ),
    pytest.param(
        cut_spec(["python", CUT_PROGRAM, "server-line"]),
        command_agent("first_tool.py"),
        f"y{MASK} and the res')",
        id="an MCP server's first line that is not JSON-RPC (200 characters kept)",
    ),
    pytest.param(
        cut_spec(["python", CUT_PROGRAM, "server-answer"]),
        command_agent("first_tool.py"),
        "for ListToolsResult: tools.0.inputSchema: Input should be a valid dictionary or instance of InputSchema "
        f"(input '{'y' * 100}{MASK}')",
        id="an MCP server's answer the SDK refused (pydantic keeps 24 characters of each end)",
    ),
    pytest.param(
        cut_spec(FAULTY_SERVER, {"command": ["python", CUT_PROGRAM, "verifier-limit"]}),
        command_agent("first_tool.py"),
        f": the verifier failed: {MASK}zzz",  # after "environment could not score: resource_limit: exceeded …"
        id="a failing verifier's stderr as a limit's breach quotes it (its last 300 characters kept)",
    ),
    pytest.param(
        None,
        command_agent("cut_secret.py", "stderr") | {"env": {"LEAK": CUT_SECRET}},
        f"e{MASK}\nagent | … [stderr truncated:",
        id="the agent's stderr (8 KiB kept)",
    ),
    pytest.param(
        cut_spec(["python", CUT_PROGRAM, "server-stderr"]),
        command_agent("first_tool.py"),
        f"s{MASK}\nserver | … [server stderr truncated:",
        id="an MCP server's stderr (8 KiB kept)",
    ),
]


@pytest.mark.slow  # starts agent, server and verifier processes
@pytest.mark.parametrize(("spec", "agent", "shown_at_the_cut"), CUTS)
def test_a_secret_printed_across_a_cut_leaves_no_piece_of_it_in_anything_recorded(
    spec, agent, shown_at_the_cut, database, client, auth, acme, owner_engine, caplog
):
    owner, _, viewer = acme
    catalog = make_catalog(database, owner.org.id, agent, attempt_count=1)
    version_id = catalog.version_id
    if spec is not None:
        with database.session(owner.org.id) as session, session.begin():
            version_id = create_environment_version(session, create_environment(session, owner.org.id, "cut"), spec).id
    run_id = queue(database, owner.org.id, version_id, catalog.config_id)
    with caplog.at_level("DEBUG"):
        assert work(database) == 1

    (trial,) = scoped_rows(
        owner_engine, owner.org.id, "SELECT id, log_excerpt, trajectory_artifact_id FROM evaluation_trials"
    )
    auth.login(viewer.email)
    seen = {
        "stored": everything_stored(owner_engine, owner.org.id),
        "worker log": caplog.text,
        "trial page": client.get(f"/trials/{trial.id}").text,
        "run page": client.get(f"/runs/{run_id}").text,
        "run API": client.get(f"/api/v1/evaluation-runs/{run_id}").text,
        "artifact": client.get(f"/api/v1/artifacts/{trial.trajectory_artifact_id}").text,
        "export": client.get("/api/v1/rollouts", query_string={"kind": "all"}).text,
    }
    pieces = {CUT_SECRET[start : start + MIN_MASKED_LENGTH] for start in range(len(CUT_SECRET) - MIN_MASKED_LENGTH + 1)}
    for where, body in seen.items():
        shown = sorted(piece for piece in pieces if piece in body)
        assert not shown, f"{where} shows {len(shown)} pieces of the secret: {shown}"
    assert shown_at_the_cut in trial.log_excerpt  # the secret was printed, and cut, there


def test_viewer_member_and_owner_see_only_secret_names(database, client, auth, acme, owner_engine):
    org_id = acme[0].org.id
    for person in acme:
        auth.login(person.email)
        token = auth.csrf()

        def post(url, body, token=token):
            return client.post(url, json=body, headers={"X-CSRFToken": token})

        created = post("/api/v1/environments", {"name": f"mcp-{person.email}"})
        version = post(f"/api/v1/environments/{created.json.get('id')}/versions", {"spec": SECRET_SPEC})
        config = post("/api/v1/evaluator-configs", {"name": person.email, "agent": LEAKY_AGENT, "attemptCount": 1})
        if person is acme[2]:  # the viewer may not create anything, and the refusal shows nothing either
            assert (created.status_code, config.status_code) == (403, 403)
        else:
            assert (created.status_code, version.status_code, config.status_code) == (201, 201, 201)
            assert version.json["spec"]["env"] == {"SERVER_TOKEN": HIDDEN}
            assert config.json["agent"]["env"] == {"AGENT_API_KEY": HIDDEN, "AGENT_QUOTED": HIDDEN, "SHORT": HIDDEN}
        for response in (created, version, config):
            assert_hidden(f"{person.email}: {response.request.path}", response.get_data())
        auth.logout()
    environment_ids = [r.id for r in scoped_rows(owner_engine, org_id, "SELECT id FROM environments")]
    assert len(environment_ids) == 2
    for person in acme:
        auth.login(person.email)
        for environment_id in environment_ids:
            page = client.get(f"/environments/{environment_id}")
            assert page.status_code == 200
            assert '"SERVER_TOKEN": "***"' in page.text and '"AGENT_API_KEY": "***"' in page.text
            assert_hidden(f"environment page for {person.email}", page.text)
        for url in ("/environments", "/api/v1/environments", "/api/v1/openapi.json"):
            assert_hidden(f"{url} for {person.email}", client.get(url).get_data())
        auth.logout()
    assert_not_stored(owner_engine, org_id, SECRET, QUOTED, SERVER_TOKEN)


def test_the_worker_gets_the_plaintext_in_the_same_shape(database, acme):
    org_id = acme[0].org.id
    catalog = make_catalog(database, org_id, LEAKY_AGENT)
    with database.session(org_id) as session:
        env = create_environment(session, org_id, "secret-mcp")
        version = create_environment_version(session, env, SECRET_SPEC)
        config = session.get_one(EvaluatorConfig, (org_id, catalog.config_id))
        assert version.spec["env"] == {"SERVER_TOKEN": HIDDEN} and version.secret_env is not None
        assert runnable_spec(session, version) == {**SECRET_SPEC, "params": {}}
        assert runnable_agent(session, config) == LEAKY_AGENT
        session.rollback()


def test_spec_sha256_tells_secrets_apart_without_revealing_them(database, acme):
    org_id = acme[0].org.id
    other = {**SECRET_SPEC, "env": {"SERVER_TOKEN": SERVER_TOKEN + "-rotated"}}
    with database.session(org_id) as session, session.begin():
        env = create_environment(session, org_id, "secret-mcp")
        first, again, rotated = (create_environment_version(session, env, s) for s in (SECRET_SPEC, SECRET_SPEC, other))
    assert first.spec == rotated.spec  # the same names are shown ...
    assert first.spec_sha256 == again.spec_sha256 != rotated.spec_sha256  # ... and the hash still differs
    plain = {**SECRET_SPEC, "params": {}}
    canonical = json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()
    assert first.spec_sha256 != hashlib.sha256(canonical).hexdigest()  # no offline guessing of the value
    assert first.spec_sha256 != spec_sha256(plain, SecretsKey(b"\x01" * 32))  # it is keyed


@pytest.mark.bad_input
def test_showing_back_the_mask_is_refused_rather_than_stored(client, auth, acme, owner_engine):
    auth.login(acme[1].email)
    token = auth.csrf()
    agent = LEAKY_AGENT | {"env": {"AGENT_API_KEY": HIDDEN}}
    response = client.post(
        "/api/v1/evaluator-configs",
        json={"name": "copied", "agent": agent, "attemptCount": 1},
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 400
    assert "never shown back" in response.json["detail"] and "AGENT_API_KEY" in response.json["detail"]
    assert scoped_rows(owner_engine, acme[1].org.id, "SELECT count(*) FROM evaluator_configs")[0][0] == 0


def test_a_secret_is_never_edited_only_replaced_by_a_new_row(database, acme):
    org_id = acme[0].org.id
    catalog = make_catalog(database, org_id, LEAKY_AGENT)
    for statement in (
        "UPDATE evaluator_configs SET agent = jsonb_set(agent, '{env,AGENT_API_KEY}', '\"other\"')",
        "UPDATE evaluator_configs SET secret_env = NULL",
        "UPDATE environment_versions SET secret_env = NULL",
    ):
        with database.session(org_id) as session, pytest.raises((IntegrityError, ProgrammingError)) as refused:
            session.execute(text(statement))
        assert "cannot change" in str(refused.value) or "permission denied" in str(refused.value)
    with database.session(org_id) as session, session.begin():  # other columns of a configuration still change
        session.execute(text("UPDATE evaluator_configs SET max_steps = 5 WHERE id = :id"), {"id": catalog.config_id})


@pytest.mark.fault
def test_a_worker_with_the_wrong_or_no_key_fails_the_run_saying_why(database, acme, caplog, count_rows):
    org_id = acme[0].org.id
    catalog = make_catalog(database, org_id, LEAKY_AGENT, attempt_count=1)
    for key, reason in ((SecretsKey(b"\x02" * 32), "sealed with secrets key"), (None, "has no secrets key")):
        run_id = queue(database, org_id, catalog.version_id, catalog.config_id)
        other = Database(database.urls, pool_size=1, secrets_key=key)
        try:
            assert work(other) == 1  # the worker goes on; the run is not claimed again and again
        finally:
            other.dispose()
        with database.session(org_id) as session:
            status, error, attempts = session.execute(
                text("SELECT status, error, attempts FROM evaluation_runs WHERE id = :id"), {"id": run_id}
            ).one()
        assert (status, attempts) == ("failed", 1) and reason in error and "AGENTFORGE_SECRETS_KEY" in error
        assert reason in caplog.text
    run_id = queue(database, org_id, catalog.version_id, catalog.config_id)  # the right key runs it
    assert work(database) == 1
    assert count_rows("evaluation_trials", org_id, "evaluation_run_id = :r", r=run_id)


@pytest.mark.bad_input
def test_a_malformed_key_stops_the_app_with_the_fix():
    with pytest.raises(SecretsKeyError, match="32 random bytes in URL-safe base64; generate one with"):
        create_app({"AGENTFORGE_SECRETS_KEY": "not-a-key", "SECRET_KEY": "x", "DATABASE_URL": "postgresql:///none"})


def test_the_key_is_generated_once_privately_even_when_processes_race(tmp_path):
    keys: list[str] = []
    threads = [
        threading.Thread(target=lambda: keys.append(load_secrets_key(None, tmp_path).raw.hex())) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys) == 8
    assert (tmp_path / "secrets_key").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secrets_key"]  # no temporary files left
    assert create_once(tmp_path / "secrets_key", lambda: "other") == (tmp_path / "secrets_key").read_text().strip()
    configured = SecretsKey.generate()
    assert load_secrets_key(configured, tmp_path) == SecretsKey.from_text(configured)


def test_masking_rules():
    masker = Masker([SECRET, QUOTED, "ab"])
    assert masker.text(f"x{SECRET}y {json.dumps(QUOTED)} {QUOTED!r} ab") == f"x{MASK}y \"{MASK}\" '{MASK}' ab"
    cut = f"the key is {SECRET[:9]}\n… [log truncated: 99 more characters]"
    assert masker.text(cut) == f"the key is {MASK}\n… [log truncated: 99 more characters]"
    assert masker.text(f"ends with {SECRET[:6]}") == f"ends with {MASK}"
    kept_end = f"… [log truncated: 99 earlier characters]\n{SECRET[-9:]} was the key"  # a log keeps its end
    assert masker.text(kept_end) == f"… [log truncated: 99 earlier characters]\n{MASK} was the key"
    assert masker.data({f"stage_{SECRET}": [SECRET, 1]}) == {f"stage_{MASK}": [MASK, 1]}
    assert secret_values({"env": {"A": "abc", "B": SECRET}}, {"env": {"C": "abcd"}}) == [SECRET, "abcd"]
    assert MIN_MASKED_LENGTH == 4


def test_the_migration_seals_values_stored_in_plaintext_before_it(database, database_urls, make_org, owner_engine):
    org = make_org("Acme RL")
    config = Config()
    config.set_main_option("script_location", str(ROOT / "migrations"))
    before = ScriptDirectory.from_config(config).get_revision("0012").down_revision
    assert isinstance(before, str)  # 0012 follows one revision
    engine = create_engine(sqlalchemy_url(database_urls.admin))
    try:
        with engine.begin() as conn:
            config.attributes.update(connection=conn, runtime_role=runtime_role_of(database_urls))
            config.attributes["secrets_key"] = database.secrets_key
            command.downgrade(config, before)
        with database.session(org.id) as session, session.begin():  # rows as the older schema wrote them
            env_id = uuid.uuid4()
            session.execute(
                text(
                    "INSERT INTO environments (organization_id, id, name, description) "
                    "VALUES (:org, :id, 'secret-mcp', '')"
                ),
                {"org": org.id, "id": env_id},
            )
            session.execute(
                text(
                    "INSERT INTO environment_versions (organization_id, id, environment_id, version, spec, spec_sha256)"
                    " VALUES (:org, :id, :env, 1, CAST(:spec AS jsonb), :sha)"
                ),
                {"org": org.id, "id": uuid.uuid4(), "env": env_id, "spec": json.dumps(SECRET_SPEC), "sha": "0" * 64},
            )
            session.execute(
                text(
                    "INSERT INTO evaluator_configs (organization_id, id, name, agent, attempt_count, max_steps, "
                    "timeout_s) VALUES (:org, :id, 'old', CAST(:agent AS jsonb), 1, 5, 5)"
                ),
                {"org": org.id, "id": uuid.uuid4(), "agent": json.dumps(LEAKY_AGENT)},
            )
    finally:  # back at the newest schema, whatever happened (the database serves the other tests)
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        engine.dispose()
    assert_not_stored(owner_engine, org.id, SECRET, QUOTED, SERVER_TOKEN)
    with database.session(org.id) as session:
        version = session.query(EnvironmentVersion).one()
        agent = session.query(EvaluatorConfig).one()
        assert version.spec["env"] == {"SERVER_TOKEN": HIDDEN} and version.spec_sha256 == spec_sha256(
            SECRET_SPEC, database.secrets_key
        )
        assert runnable_spec(session, version) == SECRET_SPEC and runnable_agent(session, agent) == LEAKY_AGENT


def test_imported_specs_keep_their_env_values_sealed_and_still_group_into_one_version(client, auth, acme, owner_engine):
    from tests.helpers import line, ndjson

    auth.login(acme[1].email)
    token = auth.csrf()
    spec = {"kind": "external", "source": "harness-x", "env": {"HARNESS_TOKEN": SECRET}}
    imported = [line(f"x-{n}", n, 1.0, environment={"name": "count-lines", "spec": spec}) for n in (1, 2)]
    for body in (ndjson(imported[0]), ndjson(imported[1])):
        response = client.post(
            "/api/v1/evaluation-runs/import",
            data=body,
            content_type="application/x-ndjson",
            headers={"X-CSRFToken": token},
        )
        assert response.status_code in (200, 201), response.text
        assert_hidden("import answer", response.get_data())
    versions = scoped_rows(owner_engine, acme[1].org.id, "SELECT spec FROM environment_versions")
    assert [v.spec["env"] for v in versions] == [{"HARNESS_TOKEN": HIDDEN}]  # the same secret: the same version
    shown_back = line("x-3", 3, 1.0, environment={"name": "count-lines", "spec": {**spec, "env": {"A": HIDDEN}}})
    response = client.post(
        "/api/v1/evaluation-runs/import",
        data=ndjson(shown_back),
        content_type="application/x-ndjson",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 400 and "never shown back" in response.text
    assert_not_stored(owner_engine, acme[1].org.id, SECRET)
