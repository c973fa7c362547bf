"""Harbor task uploads within bounds: gzip bombs refused by a real serving process without its memory growing, an
upload holding one of its user's request slots, and a task.toml or Dockerfile that cannot be read answering 400
(the CLI one `Error:` line), with nothing stored."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from bench.export import peak_rss_growth
from bench.uploads import task_bomb, trailing_bomb
from db.session import Database
from domain.harbor_task import AFTER_THE_END
from tests.helpers import create_token
from tests.integration.harbor_tasks.test_task_upload import BASE, crafted, upload
from tests.paths import ROOT
from web.limits import SCOPE

OVER = "the task is over 16 MB uncompressed"
RSS_BOUND_MB = 64


@pytest.fixture
def environment(api) -> dict:
    return api.post("/api/v1/environments", {"name": "bounded"}).json


def test_an_upload_holds_one_of_the_users_request_slots(app, api, environment, database: Database, monkeypatch):
    monkeypatch.setitem(app.config, "AGENTFORGE_MAX_EXPENSIVE_REQUESTS", 2)
    held = [slot for slot in (database.hold_slot(SCOPE, api.member.user.id, 2) for _ in "ab") if slot is not None]
    assert len(held) == 2  # both of the user's slots, as two searches in flight would hold them
    busy = upload(api, environment["id"], crafted(*BASE))
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "2"
    assert busy.json["error"] == "too many requests"
    assert busy.json["detail"].startswith("You already have 2 searches, comparisons, exports or task uploads running")
    held[0].release()
    assert upload(api, environment["id"], crafted(*BASE)).status_code == 201
    held[1].release()


DEEP_TOML = {
    "arrays": "a = " + "[" * 5000 + "]" * 5000,
    "inline tables": "a = " + "{b = " * 5000 + "1" + "}" * 5000,
}
BAD_DOCKERFILES = {
    "lone RUN": "FROM ubuntu:24.04\nRUN\n",
    "lone WORKDIR": "FROM ubuntu:24.04\nWORKDIR\n",
    "lone COPY": "FROM ubuntu:24.04\nCOPY\n",
    "COPY []": "FROM ubuntu:24.04\nCOPY []\n",
    "ENV open quote": 'FROM ubuntu:24.04\nENV GREETING="hi\n',
    "NUL in a RUN line": "FROM ubuntu:24.04\nRUN echo \x00\n",
    "unterminated heredoc": "FROM ubuntu:24.04\nRUN <<EOF\necho hi\n",
}


@pytest.mark.bad_input
@pytest.mark.parametrize("toml", list(DEEP_TOML))
def test_a_task_toml_nested_5000_deep_answers_400_naming_the_nesting(api, environment, count_rows, toml):
    refused = upload(api, environment["id"], crafted(*BASE, ("t/task.toml", "file", DEEP_TOML[toml])))
    assert refused.status_code == 400, refused.get_data(as_text=True)[:300]
    assert refused.json["field"] == "task.toml"
    assert "nests arrays or inline tables more than 64 levels deep" in refused.json["detail"]
    assert count_rows("environment_versions", api.org) == 0


@pytest.mark.bad_input
@pytest.mark.parametrize("dockerfile", list(BAD_DOCKERFILES))
def test_a_dockerfile_that_cannot_be_parsed_answers_400(api, environment, count_rows, dockerfile):
    task = crafted(*BASE, ("t/environment/Dockerfile", "file", BAD_DOCKERFILES[dockerfile]))
    refused = upload(api, environment["id"], task)
    assert refused.status_code == 400, refused.get_data(as_text=True)[:300]
    assert refused.json["field"] == "environment/Dockerfile" and "cannot be parsed" in refused.json["detail"]
    assert count_rows("environment_versions", api.org) == 0
    assert count_rows("artifacts", api.org) == 0


def task_folder(root: Path, **files: str) -> Path:
    """A task folder: instruction.md, tests/test.sh and `files` (paths with `/` written as `__`)."""
    folder = root / "task"
    for path, text in {"instruction.md": "Do it.", "tests__test.sh": "echo 1", **files}.items():
        target = folder / path.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("files", "says"),
    [
        *(
            ({"task.toml": text}, "Error: task.toml: nests arrays or inline tables more than 64 levels deep")
            for text in DEEP_TOML.values()
        ),
        *(
            ({"environment__Dockerfile": text}, "Error: environment/Dockerfile: cannot be parsed")
            for text in BAD_DOCKERFILES.values()
        ),
    ],
    ids=[*(f"task.toml {name}" for name in DEEP_TOML), *(f"Dockerfile {name}" for name in BAD_DOCKERFILES)],
)
def test_the_cli_prints_one_error_line_for_a_task_it_cannot_read(runner, api, tmp_path, count_rows, files, says):
    folder = task_folder(tmp_path, **files)
    result = runner.invoke(args=["import-harbor-task", str(folder), "--org", api.org.name, "--environment", "x"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(says) and len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output and count_rows("environment_versions", api.org) == 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def post(url: str, token: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(
        url, body, {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as answer:
        return answer.code, answer.read().decode()


@pytest.mark.slow
@pytest.mark.bad_input
def test_three_concurrent_640_mb_bombs_leave_the_serving_process_within_64_mb(
    database_urls, runner, api, environment, count_rows
):
    token = create_token(runner, api.member.email, api.org.name)
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_urls.runtime,
        "ADMIN_DATABASE_URL": database_urls.admin,
        "SECRET_KEY": "test",
    }
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "-w",
        "1",
        "--threads",
        "4",
        "-b",
        f"127.0.0.1:{port}",
        "app:create_app()",
    ]
    server = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api/v1/environments/{environment['id']}/versions/harbor-task"
    try:
        bombs = {"an entry of zeros": task_bomb(), "zeros after the archive's end": trailing_bomb()}
        assert all(len(body) < 1024 * 1024 for body in bombs.values())  # 640 MB of zeros in 0.62 MB each
        started = False
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                started = True
                break
            except OSError:
                time.sleep(0.1)
        assert started, "gunicorn did not start"
        assert post(url, token, crafted(*BASE))[0] == 201  # warm: the route, its imports and the pool in use
        answers: list[tuple[int, str]] = []

        def three_at_once() -> None:
            for body in bombs.values():
                threads = [threading.Thread(target=lambda b=body: answers.append(post(url, token, b))) for _ in "abc"]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()

        growth_mb, _ = peak_rss_growth(psutil.Process(server.pid), three_at_once)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert growth_mb < RSS_BOUND_MB, f"the serving process grew by {growth_mb:.0f} MB"
    assert [status for status, _ in answers] == [400] * 6, answers
    assert all(OVER in text or AFTER_THE_END in text for _, text in answers), answers  # each naming its limit
    assert count_rows("environment_versions", api.org) == 1  # the warm-up's task only


@pytest.mark.bad_input
def test_a_folder_named_in_bytes_that_are_not_utf8_answers_400(api, environment, count_rows):
    task = crafted(("\udcff/instruction.md", "file", "Do it."), ("\udcff/tests/test.sh", "file", "echo 1"))
    refused = upload(api, environment["id"], task)  # tarfile writes the lone surrogate as the byte 0xff
    assert refused.status_code == 400, refused.get_data(as_text=True)[:300]
    assert refused.json["field"] == "\ufffd/instruction.md"
    assert "a path that is not UTF-8 is not allowed" in refused.json["detail"]
    assert count_rows("environment_versions", api.org) == 0
