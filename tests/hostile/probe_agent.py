"""A hostile command agent for the second round of sandbox attacks: `probe_agent.py MODE`, report as its summary.

* `listen PORT SECONDS`: listen on 127.0.0.1:PORT and count the connections that arrive within SECONDS;
* `connect PORT SECONDS HOST_LOOPBACK_PORT OUTSIDE_ADDRESS`: try 127.0.0.1:PORT (another trial's listener) for
  SECONDS, then a listener on the host's 127.0.0.1, then one on the host's own address (the network it opted into);
* `memory`: fork four children that each touch 400 MB (a per-process limit of 1 GB lets all four live);
* `namespaces`: try to make user and network namespaces, mount, and write /tmp;
* `plant VICTIM`: leave links in its workspace to a host directory the removal must not follow;
* `fill WHAT [crash]`: write 1 MB files (WHAT `bytes`) or empty ones (`files`) into its workspace until a write
  fails (or 256 MB, 65,536 files), and say how many and why (with `crash`, let the error end it instead).
"""

import ctypes
import json
import os
import socket
import subprocess
import sys
import time


def attempt(address: tuple[str, int], seconds: float) -> str:
    """`connected` as soon as a connection succeeds within `seconds`, else why the last one failed."""
    deadline, why = time.monotonic() + seconds, "no attempt"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(address, timeout=1):
                return "connected"
        except OSError as error:
            why = type(error).__name__
        time.sleep(0.2)
    return why


def listen(port: int, seconds: float) -> dict:
    server = socket.create_server(("127.0.0.1", port))
    server.settimeout(0.2)
    accepted, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            server.accept()[0].close()
            accepted += 1
        except TimeoutError:
            continue
    return {"listening": port, "accepted": accepted}


def connect(port: int, seconds: float, host_port: int, outside: str) -> dict:
    return {
        "peer": attempt(("127.0.0.1", port), seconds),
        "host-loopback": attempt(("127.0.0.1", host_port), 1),
        "host-gateway": attempt(("10.0.2.2", host_port), 1),
        "outside": attempt((outside, host_port), 3),
    }


def memory() -> dict:
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            hoard = bytearray(400 * 1024 * 1024)
            for offset in range(0, len(hoard), 4096):
                hoard[offset] = 1
            time.sleep(2)
            os._exit(0)
        children.append(pid)
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    return {"survived": sum(1 for s in statuses if s == 0), "killed": sum(1 for s in statuses if s != 0)}


def namespaces() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    found: dict[str, str | None] = {}
    for name, flag in (("user", 0x10000000), ("net", 0x40000000), ("mount", 0x00020000)):
        found[f"unshare-{name}"] = "allowed" if libc.unshare(flag) == 0 else os.strerror(ctypes.get_errno())
    tool = subprocess.run(["unshare", "--user", "--map-root-user", "id"], capture_output=True, text=True)
    found["unshare-command"] = "allowed" if tool.returncode == 0 else tool.stderr.strip()[-80:]
    try:
        with open("/tmp/probe", "w") as handle:
            handle.write("x")
        found["tmp"] = "writable"
    except OSError as error:
        found["tmp"] = error.strerror
    found["tmp-mode"] = oct(os.stat("/tmp").st_mode & 0o7777)
    return found


def plant(victim: str) -> dict:
    os.symlink(victim, "link-to-victim")
    os.makedirs("deep/er")
    os.symlink(victim, "deep/er/link")
    return {"planted": sorted(os.listdir("."))}


def fill(what: str, crash: bool) -> dict:
    # At most 256 MB or 65,536 files: should the sandbox's disk be missing, the test fails instead of the host's disk.
    made, chunk, most = 0, b"x" * (1 << 20) if what == "bytes" else b"", 256 if what == "bytes" else 65536
    try:
        while made < most:
            with open(f"fill-{made}", "wb") as handle:
                handle.write(chunk)
            made += 1
    except OSError as error:
        if crash:
            raise
        return {"made": made, "error": error.strerror}
    return {"made": made, "error": None}


task = json.loads(sys.stdin.readline())
mode, args = sys.argv[1], sys.argv[2:]
if mode == "listen":
    report = listen(int(args[0]), float(args[1]))
elif mode == "connect":
    report = connect(int(args[0]), float(args[1]), int(args[2]), args[3])
elif mode == "memory":
    report = memory()
elif mode == "namespaces":
    report = namespaces()
elif mode == "fill":
    report = fill(args[0], args[1:] == ["crash"])
else:
    report = plant(args[0])
print(json.dumps({"finish": True, "summary": json.dumps(report, sort_keys=True)}), flush=True)
