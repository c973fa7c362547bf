"""A `make run` install (requirements.txt alone, no test tools) imports ATIF trajectories: NDJSON and Harbor.

The virtualenv is built once per requirements.txt (pip with the machine's own index settings) under
instance/, which git ignores, and reused while the file stays the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.paths import TESTS
from writes.tokens import create_token

pytestmark = pytest.mark.slow  # builds a virtualenv, runs the app in processes of its own

FIXTURES = TESTS / "fixtures"
REQUIREMENTS = ROOT / "requirements.txt"

INGEST = """
import os, sys
from app import create_app
app = create_app({"DATABASE_URL": os.environ["DATABASE_URL"], "ADMIN_DATABASE_URL": os.environ["ADMIN_DATABASE_URL"],
                  "MIGRATE_ON_START": False})
answer = app.test_client().post(
    "/api/v1/evaluation-runs/import", data=sys.stdin.read(), content_type="application/x-ndjson",
    headers={"Authorization": "Bearer " + os.environ["TOKEN"]},
)
print(answer.status_code, answer.get_data(as_text=True))
"""


def runtime_venv() -> Path:
    """A virtualenv holding requirements.txt and nothing else, built on first use for this requirements.txt."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    venv = ROOT / "instance" / f"venv-runtime-{key}"
    if (venv / ".complete").exists():
        return venv
    for stale in venv.parent.glob("venv-runtime-*"):  # built for an earlier requirements.txt
        shutil.rmtree(stale, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "-r", str(REQUIREMENTS)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    (venv / ".complete").touch()
    return venv


def run(venv: Path, database_urls, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """`args` run with the virtualenv's python from the checkout, against the test database."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "FLASK_APP")}
    environment |= {"DATABASE_URL": database_urls.runtime, "ADMIN_DATABASE_URL": database_urls.admin, **env}
    environment |= {"SECRET_KEY": "runtime-install-test"}
    return subprocess.run(
        [str(venv / "bin" / "python"), *args],
        cwd=ROOT,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_runtime_install_ingests_atif_and_imports_harbor(database, database_urls, member, count_rows):
    venv = runtime_venv()
    tools = run(venv, database_urls, "-c", "import importlib.util as u; print(u.find_spec('pytest'))")
    assert tools.stdout.strip() == "None", "the runtime virtualenv holds test tools"  # requirements.txt alone

    harbor = run(venv, database_urls, "-m", "flask", "--app", "app", "import-harbor",
                 str(FIXTURES / "harbor" / "terminus2-hello"), "--org", member.org.name)  # fmt: skip
    assert harbor.returncode == 0, harbor.stdout + harbor.stderr
    assert harbor.stdout.strip() == "Imported 4 trials into 1 runs (0 already there).", harbor.stdout
    assert "Traceback" not in harbor.stderr

    with database.session(member.org.id) as session, session.begin():
        _, token = create_token(session, member.org.id, member.user.id, "ingest")
    line = {
        "externalId": "atif-1",
        "environment": {"name": "atif-example", "spec": {"kind": "external", "source": "atif"}},
        "attempt": 1,
        "reward": 1.0,
        "trajectory": json.loads((FIXTURES / "atif-v1.7-example.json").read_text()),
    }
    ingest = run(venv, database_urls, "-c", INGEST, stdin=json.dumps(line) + "\n", TOKEN=token)
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    status, _, body = ingest.stdout.strip().partition(" ")
    assert status == "201", ingest.stdout + ingest.stderr
    assert json.loads(body)["imported"] == 1
    assert count_rows("evaluation_trials", member.org) == 5
