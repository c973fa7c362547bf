"""Install the third-party MCP servers the tests run as environments, each from its package registry.

* Python servers into virtualenvs of their own, with pip: mcp-server-git (requirements-servers.txt) into
  .venv-mcp-servers/, mcp-server-sqlite with the mcp 1.x it needs (requirements-sqlite.txt) into .venv-mcp-sqlite/;
* Node servers (node/package.json, exact versions in node/package-lock.json) into .node-mcp-servers/, with `npm ci`.

Run by `make test` (python tests/mcp/servers.py) and by the test session's fixtures; a second run with the same pins
does nothing.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON_SERVERS = {
    "git": (ROOT / ".venv-mcp-servers", Path(__file__).with_name("requirements-servers.txt")),
    "sqlite": (ROOT / ".venv-mcp-sqlite", Path(__file__).with_name("requirements-sqlite.txt")),
}
NODE_DIR = ROOT / ".node-mcp-servers"
NODE_PINS = (Path(__file__).with_name("node") / "package.json", Path(__file__).with_name("node") / "package-lock.json")


@contextmanager
def _installing(stamp: Path, wanted: str) -> Iterator[bool]:
    """Yield True when `stamp` does not hold `wanted` (install, and the stamp is written after); two sessions
    installing at once would share a half-built directory, so one waits for the other."""
    with open(ROOT / ".mcp-servers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted:
            stamp.touch()  # newer than the pins, so make sees it is up to date
            yield False
            return
        yield True
        stamp.write_text(wanted)


def install(name: str = "git") -> Path:
    """Return the virtualenv holding the pinned Python server `name`, creating or refreshing it when its pins
    changed."""
    venv, requirements = PYTHON_SERVERS[name]
    wanted = requirements.read_text()
    with _installing(venv / ".installed", wanted) as needed:
        if needed:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            subprocess.run([*pip, "-r", str(requirements)], check=True)
    return venv


def install_node() -> Path:
    """Return the directory whose node_modules/ holds the pinned Node servers (`npm ci` from the lock file)."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed (apt-get install nodejs npm): the Node MCP server tests need it")
    wanted = "".join(pin.read_text() for pin in NODE_PINS)
    with _installing(NODE_DIR / ".installed", wanted) as needed:
        if needed:
            shutil.rmtree(NODE_DIR, ignore_errors=True)
            NODE_DIR.mkdir()
            for pin in NODE_PINS:
                shutil.copy(pin, NODE_DIR / pin.name)
            subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR, check=True)
    return NODE_DIR


if __name__ == "__main__":
    for server in PYTHON_SERVERS:
        print(install(server))
    print(install_node())
