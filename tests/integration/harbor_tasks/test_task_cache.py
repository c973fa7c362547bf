"""The worker's cache of Harbor tasks is bounded: an organization uploading version after version (each a new tree,
each built) filled the worker's disk, since every task's files and built /app stayed forever. The least recently used
tasks no run holds are removed past AGENTFORGE_HARBOR_CACHE_MB, and a run that needs one again stores it anew."""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from tests.integration.harbor_tasks.test_task_runs import outcome, run_task, trial_of
from tests.integration.harbor_tasks.test_task_upload import TASKS
from worker.harbor_tasks import have_tree, in_use, prune, store_tree, sweep, task_dir
from worker.sandbox import SandboxSettings

pytestmark = pytest.mark.slow  # the worker and sandboxed builds


def task_tar(kb: int) -> tuple[str, bytes]:
    """A stored task of one random file of `kb` kB: its hash and its canonical tar."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        data = os.urandom(kb * 1024)
        info = tarfile.TarInfo("environment/data.bin")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    body = out.getvalue()
    return hashlib.sha256(body).hexdigest(), body


def test_the_least_recently_used_tasks_no_run_holds_go_first(tmp_path):
    settings = SandboxSettings(state_dir=str(tmp_path / "state"), harbor_cache_mb=1)
    (a, a_tar), (b, b_tar), (c, c_tar) = task_tar(400), task_tar(400), task_tar(400)
    for age, (sha, body) in enumerate(((a, a_tar), (b, b_tar)), start=1):
        with in_use(settings, sha):  # as a run stores its task's files
            store_tree(settings, sha, body)
        os.utime(task_dir(settings, sha).with_name(f"{sha}.use"), (age, age))  # a used first, then b
    with in_use(settings, a), in_use(settings, c):  # runs of a (used the longest ago) and c, as the worker holds them
        os.utime(task_dir(settings, a).with_name(f"{a}.use"), (0, 0))
        store_tree(settings, c, c_tar)  # 1.2 MB against 1 MB: b goes, the least recently used that no run holds
        assert (have_tree(settings, a), have_tree(settings, b), have_tree(settings, c)) == (True, False, True)
    assert prune(settings) == []  # 800 kB: under the bound
    assert sorted(p.name for p in Path(settings.state_dir, "harbor-tasks").glob("*/*") if ".gone-" in p.name) == []


def cached(settings: SandboxSettings) -> set[str]:
    """The hashes of the tasks the cache holds now, whichever organization's."""
    folder = Path(settings.state_dir, "harbor-tasks")
    return {p.name for p in folder.glob("*/*") if p.is_dir() and len(p.name) == 64}


@pytest.mark.fault
def test_a_run_stores_again_a_task_the_cache_let_go_and_the_cache_stays_bounded(api, database, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTFORGE_HARBOR_CACHE_MB", "1")
    settings = SandboxSettings.from_environ()
    big = tmp_path / "big"
    shutil.copytree(TASKS / "greet", big)
    (big / "environment" / "big.bin").write_bytes(os.urandom(700 * 1024))  # 700 kB in the tree, again in /app
    dockerfile = big / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("COPY name.txt ./", "COPY name.txt big.bin ./"))
    before = cached(settings)
    assert outcome(trial_of(api, run_task(api, database, big, {"kind": "oracle"}))) == ("succeeded", 1.0, None)
    (sha,) = cached(settings) - before
    run_task(api, database, TASKS / "partial", {"kind": "oracle"})  # its files push the big task out
    assert sha not in cached(settings)
    again = run_task(api, database, big, {"kind": "oracle"})  # the same version, its files stored again
    assert outcome(trial_of(api, again)) == ("succeeded", 1.0, None)
    assert sha in cached(settings)
    kept = sum(int(p.read_text()) for p in Path(settings.state_dir, "harbor-tasks").glob("*/*/*.bytes"))
    assert kept <= 2 << 20  # the big task (held by its run while it ran, so kept past the bound) and no other


@pytest.mark.fault
def test_what_a_dead_worker_left_in_the_cache_is_counted_and_removed_at_the_next_start(tmp_path):
    """A worker killed mid-copy leaves a staging folder (and, before tasks were kept per organization, folders of the
    old layout) that no record counts: before, the cache's bound never saw them and nothing removed them."""
    settings = SandboxSettings(state_dir=str(tmp_path / "state"), harbor_cache_mb=10)
    sha, body = task_tar(100)
    owner = "0" * 32
    with in_use(settings, sha, owner):
        tree = store_tree(settings, sha, body, owner)
    home = tree.parent
    staging = home / "app-0badc0de"  # a build's copy, half made
    (staging / "deep").mkdir(parents=True)
    (staging / "deep" / "half.bin").write_bytes(os.urandom(3 << 20))
    (home / "app").mkdir()  # a part without its record
    (home / "app" / "x.bin").write_bytes(os.urandom(1 << 20))
    old = Path(settings.state_dir, "harbor-tasks", "f" * 64)  # the layout before organizations had their own
    (old / "app").mkdir(parents=True)
    (old / "app" / "y.bin").write_bytes(os.urandom(1 << 20))
    gone = home.with_name(f"{'e' * 64}.gone-12345678")
    gone.mkdir()
    (gone / "z.bin").write_bytes(os.urandom(1 << 20))
    removed = sweep(settings)
    assert removed >= 6 << 20
    assert sorted(p.name for p in home.iterdir()) == ["tree", "tree.bytes"]
    assert not old.exists() and not gone.exists()
    assert have_tree(settings, sha, owner)  # what the cache made and recorded stays


def test_sweeping_leaves_alone_a_task_another_worker_is_building(tmp_path):
    settings = SandboxSettings(state_dir=str(tmp_path / "state"))
    sha, body = task_tar(10)
    tree = store_tree(settings, sha, body)
    staging = tree.parent / "app-12345678"
    staging.mkdir()
    with open(tree.parent.with_suffix(".lock"), "w") as lock:  # as built_app holds it while it builds
        fcntl.flock(lock, fcntl.LOCK_EX)
        sweep(settings)
        assert staging.is_dir()
    sweep(settings)
    assert not staging.exists()
