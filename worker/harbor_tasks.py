"""Harbor tasks on this worker's disk: each task's files, and its /app as its Dockerfile builds it, once per tree.

`<state dir>/harbor-tasks/<tree sha256>/tree/` holds the task's files (from the version's stored tar, checked
against its hash) and `…/app/` the /app its Dockerfile's COPY and RUN lines leave. The build runs once per tree,
in a sandbox of its own without network, as the environment's party: COPY copies from the task's environment/
folder (shown read-only at /context) inside the sandbox, RUN runs there, and a failing line stops the build with
the line and the end of its output. Trials then start from a copy of that /app. The worker never writes into a
folder a tenant's program has used: what the build leaves is copied out after every process of it has ended,
links as links and nothing but files, folders and links.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import os
import re
import shlex
import shutil
import stat
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from domain.harbor_task import APP
from domain.limits import MIB, describe
from worker.sandbox import Bind, LimitExceeded, Party, SandboxSettings, TrialSandbox, run_bounded

BUILD_TIMEOUT_S = 600.0  # a whole build, when task.toml's [environment] build_timeout_sec says nothing
OUTPUT_QUOTE_CHARS = 2000  # of a failing RUN line's output, the end, in the trial's log


class BuildFailed(RuntimeError):
    """A Dockerfile line that failed while a task's /app was built: the line and what it printed (the trial's log
    quotes it as it is)."""

    plain = True


def _root(settings: SandboxSettings) -> Path:
    root = Path(settings.state_dir) / "harbor-tasks"
    root.mkdir(mode=0o711, parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (workers of this machine build a task one at a time)."""
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def task_dir(settings: SandboxSettings, sha256: str) -> Path:
    """Where a task's files and its built /app go on this machine."""
    return _root(settings) / sha256


def have_tree(settings: SandboxSettings, sha256: str) -> bool:
    return (task_dir(settings, sha256) / "tree").is_dir()


# The cache of tasks ---------------------------------------------------------------------------------------------
# Every task version a run uses leaves its files and its built /app here; without a bound, an organization uploading
# version after version would fill the worker's disk. While a run uses a task it holds a shared lock on
# <hash>.use (whose time is the task's last use); pruning takes that lock exclusively, so it removes the least
# recently used tasks no run holds, until what the cache keeps (each part's size recorded as it is made) is at most
# AGENTFORGE_HARBOR_CACHE_MB. A run that needs a removed task later stores it again from the database.
_TASK = re.compile(r"[0-9a-f]{64}")


def _use_file(root: Path, sha256: str) -> int:
    """An open descriptor of the task's <hash>.use, the lock runs share and pruning takes alone."""
    return os.open(root / f"{sha256}.use", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


@contextlib.contextmanager
def in_use(settings: SandboxSettings, sha256: str) -> Iterator[None]:
    """Keep a task's files on this machine while the block runs (a run's trials): no pruning removes them."""
    fd = _use_file(_root(settings), sha256)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.utime(fd)  # its last use: now
        yield
    finally:
        os.close(fd)


def _record_bytes(home: Path, part: str, made: Path) -> None:
    """Write how many bytes the files under `made` take (links not followed) to <home>/<part>.bytes."""
    total = 0
    for folder, _, files in os.walk(made):
        total += sum(os.lstat(os.path.join(folder, name)).st_blocks * 512 for name in files)
    (home / f"{part}.bytes").write_text(str(total))


def cached_bytes(home: Path) -> int:
    """What one task takes in the cache: its files and its built /app, as recorded when they were made."""
    parts = (home / "tree.bytes", home / "app.bytes")
    return sum(int(part.read_text() or 0) for part in parts if part.is_file())


def prune(settings: SandboxSettings) -> list[str]:
    """Remove the least recently used tasks that no run holds until the cache keeps at most harbor_cache_mb; return
    the hashes removed. Half-removed folders of an earlier prune go too."""
    root = _root(settings)
    tasks = []
    for entry in os.scandir(root):
        if ".gone-" in entry.name and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        elif _TASK.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            use = root / f"{entry.name}.use"
            tasks.append((use.stat().st_mtime if use.exists() else 0.0, entry.name, cached_bytes(Path(entry.path))))
    total, removed = sum(size for *_, size in tasks), []
    for _, sha256, size in sorted(tasks):
        if total <= settings.harbor_cache_mb * MIB:
            break
        fd = _use_file(root, sha256)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a run uses it
            gone = root / f"{sha256}.gone-{uuid.uuid4().hex[:8]}"
            (root / sha256).rename(gone)  # no longer found as a task before its files are removed
            shutil.rmtree(gone, ignore_errors=True)
            total -= size
            removed.append(sha256)
        finally:
            os.close(fd)
    return removed


def store_tree(settings: SandboxSettings, sha256: str, canonical_tar: bytes) -> Path:
    """Unpack a task's stored tar (its files only, as domain.harbor_task wrote it) under its hash; ValueError when
    the bytes do not hash to `sha256`."""
    if hashlib.sha256(canonical_tar).hexdigest() != sha256:
        raise ValueError("the stored task does not match its version's hash")
    home = task_dir(settings, sha256)
    home.mkdir(mode=0o755, exist_ok=True)
    tree = home / "tree"
    with _locked(home.with_suffix(".lock")):
        if tree.is_dir():
            return tree
        staging = home / f"tree-{uuid.uuid4().hex[:8]}"
        with tarfile.open(fileobj=io.BytesIO(canonical_tar), mode="r:") as archive:
            archive.extractall(staging, filter="data")  # regular files under the folder only (PEP 706)
        for folder, _, files in os.walk(staging):
            os.chmod(folder, 0o755)
            for name in files:
                path = Path(folder) / name
                os.chmod(path, 0o755 if path.stat().st_mode & 0o100 else 0o644)
        _record_bytes(home, "tree", staging)
        staging.rename(tree)
    prune(settings)
    return tree


def _copy_command(step: dict[str, Any]) -> list[str]:
    """A COPY step as a shell command run inside the build's sandbox (sources from /context, globs as Docker's)."""
    to = step["to"]
    quoted = shlex.quote(to)
    lines = ["set -e"]
    many = len(step["copy"]) > 1 or to.endswith("/")
    lines.append(f"mkdir -p {shlex.quote(to if many else os.path.dirname(to) or '/')}")
    for source in step["copy"]:
        pattern = "/context/" + "".join(ch if ch in "*?[]" else shlex.quote(ch) for ch in source.strip("/") or ".")
        lines.append(
            f'for f in {pattern}; do if [ -d "$f" ]; then mkdir -p {quoted} && cp -R "$f"/. {quoted}; '
            f'else cp "$f" {quoted}; fi; done'
        )
    return ["/bin/sh", "-c", "\n".join(lines)]


def _quote_end(text: str) -> str:
    text = text.strip()
    return text if len(text) <= OUTPUT_QUOTE_CHARS else "…" + text[-OUTPUT_QUOTE_CHARS:]


def copy_tree(source: Path, target: Path, owner: int | None = None) -> None:
    """Copy what a finished sandbox left in `source` to the new folder `target`: folders, regular files and links
    (as links, never followed); FIFOs, sockets and devices are left out. `owner` (as root): the uid that owns it all."""
    target.mkdir(mode=0o755)
    with os.scandir(source) as entries:  # closed when a copy fails (a full disk)
        for entry in entries:
            mode = entry.stat(follow_symlinks=False).st_mode
            to = target / entry.name
            if stat.S_ISLNK(mode):
                os.symlink(os.readlink(entry.path), to)
            elif stat.S_ISDIR(mode):
                copy_tree(Path(entry.path), to, owner)
                continue
            elif stat.S_ISREG(mode):
                fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as read, open(to, "wb") as write:
                    shutil.copyfileobj(read, write)
                os.chmod(to, stat.S_IMODE(mode) & 0o777)
            else:
                continue
            if owner is not None:
                os.lchown(to, owner, owner)
    os.chmod(target, 0o755)
    if owner is not None:
        os.lchown(target, owner, owner)


@contextlib.contextmanager
def onto_disk_of(party: Party, what: str) -> Iterator[None]:
    """Around what the worker copies onto `party`'s disk: a disk found full is the party's limit, named in a
    LimitExceeded ("the task's /app did not fit the limit of 8 MB of disk")."""
    try:
        yield
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise LimitExceeded(f"{what} did not fit {describe('diskMb', {'diskMb': party.disk_mb})}") from None


def copy_app(app: Path, party: Party) -> None:
    """Replace `party`'s workspace, before any of its programs runs, by a copy of the built `app` that the party owns;
    LimitExceeded when it does not fit the party's disk."""
    party.workspace.rmdir()
    with onto_disk_of(party, "the task's /app"):
        copy_tree(app, party.workspace, party.uid if party.as_root else None)
    os.chmod(party.workspace, 0o700)


def built_app(settings: SandboxSettings, spec: dict[str, Any], tree: Path) -> Path:
    """The /app a task's Dockerfile builds (built now when this machine has not yet), or BuildFailed."""
    home = task_dir(settings, spec["treeSha256"])
    app = home / "app"
    with _locked(home.with_suffix(".lock")):
        if app.is_dir():
            return app
        steps = spec["build"]["steps"]
        if not steps:
            app.mkdir(mode=0o755)
            return app
        sandbox = TrialSandbox(settings, seed=0, trial=0)
        try:
            party = sandbox.party("environment", workspace_at=APP, limits=spec.get("limits"))
            context = tree / "environment"
            binds = (Bind(context if context.is_dir() else party.own_dir("context"), "/context"),)
            timeout = float(spec.get("buildTimeoutS") or BUILD_TIMEOUT_S)
            for step in steps:
                if "copy" in step:
                    argv, cwd, env, words = _copy_command(step), ".", {}, f"COPY {' '.join(step['copy'])} {step['to']}"
                else:
                    argv, env, words = step["run"], step["env"], f"line {step['line']}: {step['command']}"
                    cwd = os.path.relpath(step["workdir"], APP)
                launch = sandbox.launch("environment", argv, env=env, cwd=cwd, binds=binds, limits=spec.get("limits"))
                try:
                    done = run_bounded(launch, timeout=timeout)
                except TimeoutError:
                    raise BuildFailed(f"the Dockerfile's {words} did not finish within {timeout:g}s") from None
                if done.returncode != 0:
                    said = _quote_end(done.stdout + done.stderr)
                    raise BuildFailed(f"the Dockerfile's {words} failed (exit code {done.returncode}): {said}")
            workspace = party.workspace
            if party.cgroup is not None:  # every process of the build ends before its files are read
                party.cgroup.remove()
            staging = home / f"app-{uuid.uuid4().hex[:8]}"
            copy_tree(workspace, staging)
            _record_bytes(home, "app", staging)
            staging.rename(app)
        finally:
            sandbox.close()
    prune(settings)
    return app
