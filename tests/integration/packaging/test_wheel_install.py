"""The wheel: built from the checkout and installed into a fresh virtualenv, it carries the templates, static files
and migrations, keeps its instance folder out of site-packages, and `agentforge init-db`, `agentforge serve` and
`agentforge worker` run from a directory outside the checkout.

The fresh virtualenv takes its dependencies from the runtime virtualenv of test_runtime_install (requirements.txt
alone) through a .pth file, so pip installs the wheel itself with --no-index; building the wheel fetches its build
backend (pyproject.toml's [build-system]) from the machine's index, as that test's pip does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from db.cluster import drop_embedded_database, ensure_embedded_roles_and_database
from db.urls import DatabaseUrls, sqlalchemy_url
from tests.conftest import CLEANER, ROOT, TEST_DATABASE
from tests.integration.packaging.test_runtime_install import runtime_venv
from tests.integration.schema.test_cluster_lifecycle import free_port, wait_until

pytestmark = pytest.mark.slow  # builds a wheel and a virtualenv, runs the installed commands in processes

SHIPPED = ("templates", "static", "migrations")  # the folders beside the code that the app reads at run time
NOT_COPIED = (".*", "instance", "build", "*.egg-info", "__pycache__", "site", "test-output")  # caches, venvs, data
# The operator's environment that would point the installed commands elsewhere than this test says.
CLEARED = ("PYTHONPATH", "VIRTUAL_ENV", "FLASK_APP", "SECRET_KEY", "AGENTFORGE_SECRETS_KEY", "AGENTFORGE_DATA_DIR")


def shipped_files() -> list[str]:
    """Every file of templates/, static/ and migrations/, relative to the checkout (bytecode left out)."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for folder in SHIPPED
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def build_wheel(workspace: Path) -> Path:
    """The wheel pip builds from a copy of the checkout (so no build/ or egg-info is left in the checkout, and no
    earlier build's files end up in this one)."""
    source = workspace / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_COPIED))
    dist = workspace / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("agentforge-*.whl")
    return wheel


def purelib(venv: Path) -> Path:
    """The virtualenv's site-packages."""
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip())


def install(wheel: Path, venv: Path) -> None:
    """A fresh virtualenv with the wheel installed; its dependencies come from the runtime virtualenv."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    (purelib(venv) / "agentforge-runtime.pth").write_text(f"{purelib(runtime_venv())}\n")
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    installed = subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=300)  # every dependency is there
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.fixture
def fresh_database(database_urls) -> Iterator[DatabaseUrls]:
    """An empty database of the embedded test cluster (no schema yet), dropped afterwards."""
    if "url" not in CLEANER:
        pytest.skip("DATABASE_URL is set: this test makes an empty database of its own in the embedded cluster")
    name = f"{TEST_DATABASE}_wheel"
    drop_embedded_database(CLEANER["url"], name)
    yield ensure_embedded_roles_and_database(CLEANER["url"], name)
    drop_embedded_database(CLEANER["url"], name)


def scalars(urls: DatabaseUrls, sql: str) -> list:
    """What `sql` selects in the database, as the owner role."""
    engine = create_engine(sqlalchemy_url(urls.admin))
    try:
        with engine.connect() as conn:
            return list(conn.scalars(text(sql)))
    finally:
        engine.dispose()


def get(url: str) -> tuple[int, bytes]:
    """The status and body of GET `url` (0 and nothing while nothing answers there)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except OSError:
        return 0, b""


def test_the_wheel_installs_its_files_and_serves_from_anywhere(tmp_path, fresh_database):
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    missing = [file for file in shipped_files() if not any(name == file or name.endswith("/" + file) for name in names)]
    assert missing == [], f"{wheel.name} lacks {len(missing)} files of {', '.join(SHIPPED)}: {missing[:5]}"

    venv = tmp_path / "venv"
    install(wheel, venv)
    site = tmp_path / "site"  # where the operator runs the commands: outside the checkout
    site.mkdir()
    environment = {name: value for name, value in os.environ.items() if name not in CLEARED}
    environment |= {"DATABASE_URL": fresh_database.runtime, "ADMIN_DATABASE_URL": fresh_database.admin}
    environment |= {"PYTHONUNBUFFERED": "1"}
    agentforge = str(venv / "bin" / "agentforge")

    def start(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [agentforge, *args], cwd=site, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    init_db = subprocess.run([agentforge, "init-db"], cwd=site, env=environment, capture_output=True, text=True)
    assert init_db.returncode == 0, init_db.stdout + init_db.stderr
    assert init_db.stdout.strip().splitlines()[-1] == "Database is at the newest schema."
    head = ScriptDirectory(str(ROOT / "migrations")).get_current_head()
    assert scalars(fresh_database, "SELECT version_num FROM alembic_version") == [head]  # migrated from empty

    port = free_port()
    web = start("serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1")
    worker = start("worker", "--poll-seconds", "0.2")
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: get(f"{base}/login")[0] == 200 or web.poll() is not None, 120, "agentforge serve answering")
        status, page = get(f"{base}/login")
        assert status == 200, web.communicate(timeout=30)[0] if web.poll() is not None else status
        assert b"Log in to AgentForge" in page
        assert get(f"{base}/static/htmx.min.js") == (200, (ROOT / "static" / "htmx.min.js").read_bytes())
        assert get(f"{base}/static/app.css") == (200, (ROOT / "static" / "app.css").read_bytes())

        presence = "SELECT sandbox_mode FROM worker_presence"
        wait_until(lambda: scalars(fresh_database, presence) or worker.poll() is not None, 120, "the worker starting")
        assert worker.poll() is None, worker.communicate(timeout=30)[0]
    finally:
        for process in (web, worker):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
    worker_output = worker.communicate(timeout=60)[0]
    web_output = web.communicate(timeout=60)[0]
    assert worker.returncode == 0, worker_output
    assert "Worker started (concurrency 1" in worker_output
    assert "Worker stopped after 0 runs." in worker_output
    assert scalars(fresh_database, presence) == []  # it retired its row
    assert web.returncode == 0, web_output

    # The keys the app generates live in instance/ of the directory the commands ran in, never in site-packages.
    assert (site / "instance" / "secret_key").is_file()
    assert (site / "instance" / "secrets_key").is_file()
    assert not (purelib(venv) / "instance").exists()
