"""What a hostile tenant program tries from inside the worker; each attack reports `blocked` or `LEAKED`.

Imported by the hostile agent, MCP server and verifier. The report goes to
stderr (and so into the trial's log), one line per attack:
`attack <name>: blocked (<why>)` or `attack <name>: LEAKED (<what>)`. The tests
read the report back from the attacker's own trial page, as the attacker would.
"""

from __future__ import annotations

import glob
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("postgres", "agentforge_owner", "agentforge_app")
LOOKED_FOR = ("SECRET_KEY", "DATABASE_URL", "ADMIN_DATABASE_URL", "AGENTFORGE_TEST_SENTINEL", "AGENTFORGE_SECRETS_KEY")


def _environ() -> str:
    found = [name for name in LOOKED_FOR if name in os.environ]
    if found:
        return "LEAKED (" + ", ".join(f"{n}={os.environ[n]}" for n in found) + ")"
    return f"blocked (own environment has only {', '.join(sorted(os.environ))})"


def _proc_environ() -> str:
    leaked = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        leaked += [f"{path}: {n}" for n in LOOKED_FOR if f"{n}=".encode() in data]
    return "LEAKED (" + "; ".join(leaked) + ")" if leaked else "blocked (no process environment holds a secret)"


def _processes() -> str:
    mine = {os.getpid(), os.getppid()}
    others = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            cmdline = Path(path).read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(word in cmdline for word in ("flask", "pytest", "postgres", "gunicorn")):
            others.append(cmdline[:80])
    count = len(glob.glob("/proc/[0-9]*"))
    if others:
        return "LEAKED (sees " + "; ".join(others) + ")"
    return f"blocked (sees {count} processes, its own: {sorted(mine)[:2]})"


def _read_tree(name: str, paths: list[Path]) -> str:
    seen = []
    for path in paths:
        try:
            if path.is_dir():
                entries = os.listdir(path)
                if entries:
                    seen.append(f"{path}: {', '.join(sorted(entries)[:6])}")
            elif path.exists():
                seen.append(f"{path}: {path.read_bytes()[:40]!r}")
        except OSError:
            continue
    return "LEAKED (" + "; ".join(seen) + ")" if seen else f"blocked (nothing readable of {name})"


def _sockets() -> list[str]:
    candidates = [ROOT / "instance" / "pgdata", ROOT / "instance" / "pgdata-test", Path("/tmp"), Path("/run")]
    found = []
    for base in candidates:
        found += glob.glob(str(base / "**" / ".s.PGSQL.*"), recursive=True)
    return sorted({os.path.dirname(p) for p in found if not p.endswith(".lock")})


def _database() -> str:
    try:
        import psycopg
    except ImportError as error:
        return f"blocked (no driver: {error})"
    reached = []
    targets = [{"host": d} for d in _sockets()] + [{"host": "127.0.0.1", "port": 5432}]
    for target in targets:
        for role in ROLES:
            for database in ("postgres", "agentforge", "agentforge_test"):
                try:
                    with psycopg.connect(user=role, dbname=database, connect_timeout=2, **target) as conn:
                        rows = conn.execute("SELECT count(*) FROM pg_roles").fetchone()
                        reached.append(f"{role}@{target} read {rows}")
                except Exception:  # every refusal is the expected outcome
                    continue
    return "LEAKED (" + "; ".join(reached) + ")" if reached else f"blocked (tried {len(targets)} endpoints x 3 roles)"


def _loopback() -> str:
    port = int(os.environ.get("ATTACK_PORT", "5000"))
    hits = []
    for target in (port, 5000, 5432):
        try:
            with socket.create_connection(("127.0.0.1", target), timeout=1):
                hits.append(str(target))
        except OSError:
            continue
    return f"LEAKED (connected to 127.0.0.1:{', '.join(hits)})" if hits else "blocked (no 127.0.0.1 port answers)"


def _write_checkout() -> str:
    written = []
    for target in (ROOT / "pwned.txt", ROOT / "tests" / "pwned.txt", ROOT / "worker" / "sandbox.py"):
        try:
            with open(target, "a") as handle:
                handle.write("")
            written.append(str(target))
        except OSError:
            continue
    return "LEAKED (wrote " + ", ".join(written) + ")" if written else "blocked (checkout is read-only)"


def _daemon() -> str:
    marker = os.environ.get("ATTACK_DAEMON_MARKER", "agentforge-daemon")
    code = f"import time  # {marker}\ntime.sleep(600)"
    try:
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import os, subprocess, sys\nif os.fork() == 0:\n os.setsid()\n "
                f"subprocess.Popen([sys.executable, '-c', {code!r}], start_new_session=True)\n os._exit(0)",
            ],
            start_new_session=True,
        ).wait()
    except OSError as error:
        return f"blocked (could not fork: {error})"
    return f"started (a daemon marked {marker}; the test checks it is gone after the trial)"


def _identity() -> str:
    uid = os.getuid()
    return f"{'LEAKED (root)' if uid == 0 else 'blocked'} (uid {uid}, home {os.environ.get('HOME')}, cwd {os.getcwd()})"


ATTACKS = {
    "environ": _environ,
    "proc-environ": _proc_environ,
    "processes": _processes,
    "instance-dir": lambda: _read_tree("the instance directory", [ROOT / "instance", ROOT / "instance" / "secret_key"]),
    "data-dir": lambda: _read_tree(
        "the data directory", [ROOT / "instance" / "pgdata", ROOT / "instance" / "pgdata-test", ROOT / ".git"]
    ),
    "database": _database,
    "loopback": _loopback,
    "write-checkout": _write_checkout,
    "daemon": _daemon,
    "identity": _identity,
}


def report(who: str) -> str:
    """Run every attack; return the report, one line per attack."""
    lines = []
    for name, attack in ATTACKS.items():
        try:
            outcome = attack()
        except Exception as error:  # an attack that crashes was stopped by something
            outcome = f"blocked ({type(error).__name__}: {error})"
        lines.append(f"attack {who} {name}: {outcome}")
    return "\n".join(lines)
