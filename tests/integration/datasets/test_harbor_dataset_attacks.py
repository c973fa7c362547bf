"""Harbor dataset uploads under attack: gzip bombs, `..` paths, links, devices, empty archives, archives without a
task folder, 10,001 task folders, a task that cannot be kept, a body over the cap, a user's request slots all held:
each answers 4xx naming the entry (`field`) with nothing written; three bombs at once leave a real serving process
within 64 MB."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
import zlib

import psutil
import pytest

from bench.export import peak_rss_growth
from db.session import Database
from domain.datasets import MAX_DATASET_TASKS
from tests.helpers import create_token, table_counts
from tests.integration.datasets.test_harbor_datasets import new_dataset, upload_dataset
from tests.integration.harbor_tasks.test_task_upload import crafted
from tests.integration.harbor_tasks.test_upload_bounds import RSS_BOUND_MB, free_port, post
from tests.paths import ROOT
from tests.unit.test_harbor_archive import files, header
from web.limits import SCOPE

MB = 1024 * 1024
TEST_SH = "echo 1 > /logs/verifier/reward.txt"
OVER_TASK = "the task is over 16 MB uncompressed"
OVER_DATASET = "the dataset is over 256 MB uncompressed"
AFTER_THE_END = "bytes after the tar archive's end"


def task(folder: str) -> tuple[tuple[str, str, str], ...]:
    return ((f"{folder}/instruction.md", "file", "Do it."), (f"{folder}/tests/test.sh", "file", TEST_SH))


@pytest.fixture
def dataset(api) -> dict:
    return new_dataset(api, "attacked")


def refused_with_nothing_written(api, dataset: dict, body: bytes, count_rows, status: int = 400) -> dict:
    before = table_counts(count_rows, api.org.id)
    answer = upload_dataset(api, dataset["id"], body)
    assert answer.status_code == status, answer.get_data(as_text=True)[:500]
    assert table_counts(count_rows, api.org.id) == before
    return answer.json


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("entries", "field", "says"),
    [
        ((*task("ds/a"), ("ds/a/../../escape", "file", "x")), "ds/a/../../escape", "a path with .. is not allowed"),
        ((*task("ds/a"), ("/etc/passwd", "file", "x")), "/etc/passwd", "an absolute path is not allowed"),
        ((*task("ds/a"), ("ds/a/link", "symlink", "/etc/shadow")), "ds/a/link", "a link leading outside the task"),
        ((*task("ds/a"), ("ds/a/up", "symlink", "../../../x")), "ds/a/up", "a link leading outside the task"),
        ((*task("ds/a"), ("ds/a/hard", "hardlink", "../etc/passwd")), "ds/a/hard", "a link leading outside the task"),
        (
            (*task("ds/a"), *task("ds/b"), ("ds/b/peek", "symlink", "../a/instruction.md")),
            "ds/b/peek",
            "which is not a file of the task, is not allowed",
        ),
        ((*task("ds/a"), ("ds/a/tree", "symlink", "tests")), "ds/a/tree", "a link to a folder"),
        ((*task("ds/a"), ("ds/a/pipe", "fifo", "")), "ds/a/pipe", "a FIFO is not allowed"),
        ((*task("ds/a"), ("ds/a/tty", "device", "")), "ds/a/tty", "a device is not allowed"),
        ((*task("ds/a"), ("ds/b/tests/test.sh", "file", TEST_SH)), "b/instruction.md", "is missing"),
        ((*task("ds/a"), ("ds/a/task.toml", "file", "[agent\n")), "a/task.toml", "is not valid TOML"),
        ((*task("ds/a"), ("ds/a/environment/Dockerfile", "file", "RUN\n")), "a/environment/Dockerfile", "parsed"),
        ((), "body", "the archive holds no task folder"),
        ((("README.md", "file", "x"), ("notes.txt", "file", "y")), "body", "the archive holds no task folder"),
        ((("ds/README.md", "file", "x"), ("ds/.git/HEAD", "file", "y")), "ds", "holds no task folder"),
        (task("."), "body", "the archive holds a task's own files at its top (instruction.md)"),
        (
            (task("ds/a")[0], *task("ds/b"), task("ds/a")[1]),
            "ds/a",
            "the task folder's entries are not together in the archive",
        ),
        (task("ds/ a "), "ds/ a ", "cannot name an environment"),
        ((*task("ds/a"), ("ds/b", "symlink", "/srv/tasks/b")), "ds/b", "a link beside the task folders"),
    ],
    ids=[
        "..",
        "absolute path",
        "absolute link",
        "link up",
        "hard link up",
        "link into another task",
        "link to a folder",
        "FIFO",
        "device",
        "a task folder without instruction.md",
        "a task.toml that is no TOML",
        "a Dockerfile that cannot be parsed",
        "an empty archive",
        "files at the top, no task folder",
        "a folder without a task folder",
        "a task's own files",
        "a task folder scattered",
        "a name with spaces at its ends",
        "a link where a task folder would be",
    ],
)
def test_an_archive_or_task_that_cannot_be_kept_answers_400_naming_the_entry(
    api, dataset, count_rows, entries, field, says
):
    refused = refused_with_nothing_written(api, dataset, crafted(*entries), count_rows)
    assert refused["field"] == field and says in refused["detail"], refused


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "send the folder of task folders as a tar.gz"),
        (b"\x1f\x8bnot gzip", "not a readable tar.gz"),
        (b"plain", "not a tar"),
    ],
)
def test_a_body_that_is_no_archive_answers_400(api, dataset, count_rows, body, says):
    refused = refused_with_nothing_written(api, dataset, body, count_rows)
    assert says in refused["detail"], refused


@pytest.mark.bad_input
@pytest.mark.parametrize("top", ["ds/", "./"], ids=["the folder", "its contents"])
def test_ten_thousand_and_one_task_folders_answer_400_before_any_is_read(api, dataset, count_rows, top):
    out = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [out.compress(header(f"{top}t{i:05}", 0, tarfile.DIRTYPE)) for i in range(MAX_DATASET_TASKS + 1)]
    body = b"".join([*parts, out.compress(bytes(1024)), out.flush()])  # empty folders: 5 MB of tar, 60 kB sent
    assert len(body) < 100_000
    refused = refused_with_nothing_written(api, dataset, body, count_rows)
    assert refused["field"] == ("ds" if top == "ds/" else "body")
    assert f"holds more than {MAX_DATASET_TASKS} task folders, the most a dataset version holds" in refused["detail"]


def zeros_entry(name: str, mb: int, deflate) -> list[bytes]:
    """A tar entry of `mb` MB of zeros, compressed as it is made (the zeros are never whole)."""
    info = tarfile.TarInfo(name)
    info.size = mb * MB
    block = bytes(MB)
    return [deflate.compress(info.tobuf()), *(deflate.compress(block) for _ in range(mb))]


def dataset_bomb(kind: str) -> bytes:
    """A small gzip that expands past a bound: tasks of 15 MB of zeros each past the dataset's 256 MB, one task's
    640 MB entry, or 640 MB of zeros after the archive's end."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31, 9, zlib.Z_RLE)
    out = [deflate.compress(files(*((name, text.encode()) for name, _, text in task("ds/a"))))]
    if kind == "spread":
        for i in range(18):
            out += zeros_entry(f"ds/t{i:02}/zeros", 15, deflate)
    elif kind == "entry":
        out += zeros_entry("ds/a/zeros", 640, deflate)
    else:
        out.append(deflate.compress(bytes(2 * tarfile.BLOCKSIZE)))
        out += [deflate.compress(bytes(MB)) for _ in range(640)]
    out.append(deflate.flush())
    return b"".join(out)


BOMBS = {"spread": OVER_DATASET, "entry": OVER_TASK, "after the end": AFTER_THE_END}


@pytest.mark.bad_input
@pytest.mark.parametrize("kind", list(BOMBS))
def test_a_gzip_bomb_answers_400_naming_its_bound(api, dataset, count_rows, kind):
    body = dataset_bomb(kind)
    assert len(body) < MB
    refused = refused_with_nothing_written(api, dataset, body, count_rows)
    assert BOMBS[kind] in refused["detail"], refused


def test_an_upload_is_read_up_to_64_mb_and_one_larger_answers_413(api, dataset, count_rows):
    read = refused_with_nothing_written(api, dataset, b"\x1f\x8b" + b"x" * (2 * MB), count_rows)  # past 1 MiB
    assert "not a readable tar.gz" in read["detail"], read
    refused_with_nothing_written(api, dataset, b"\x1f\x8b" + b"x" * (64 * MB), count_rows, status=413)


def test_an_upload_holds_one_of_the_users_request_slots(app, api, dataset, database: Database, monkeypatch):
    monkeypatch.setitem(app.config, "AGENTFORGE_MAX_EXPENSIVE_REQUESTS", 1)
    held = database.hold_slot(SCOPE, api.member.user.id, 1)
    assert held is not None
    busy = upload_dataset(api, dataset["id"], crafted(*task("ds/a")))
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "2", busy.json
    held.release()
    assert upload_dataset(api, dataset["id"], crafted(*task("ds/a"))).status_code == 201


@pytest.mark.slow
@pytest.mark.bad_input
def test_three_concurrent_dataset_bombs_leave_the_serving_process_within_64_mb(
    database_urls, runner, api, dataset, count_rows
):
    token = create_token(runner, api.member.email, api.org.name)
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_urls.runtime,
        "ADMIN_DATABASE_URL": database_urls.admin,
        "SECRET_KEY": "test",
    }
    argv = [sys.executable, "-m", "gunicorn", "-w", "1", "--threads", "4", "-b", f"127.0.0.1:{port}"]
    argv.append("app:create_app()")
    server = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api/v1/datasets/{dataset['id']}/versions/harbor"
    bombs = [dataset_bomb(kind) for kind in BOMBS]
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        assert post(url, token, crafted(*task("ds/a")))[0] == 201  # warm: the route, its imports and the pool
        answers: list[tuple[int, str]] = []

        def three_at_once() -> None:
            for body in bombs:
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
    assert [status for status, _ in answers] == [400] * 9, answers
    assert all(any(says in text for says in BOMBS.values()) for _, text in answers), answers
    assert count_rows("dataset_versions", api.org) == 1  # the warm-up's only
