"""A hostile program for the third round of sandbox attacks: `sandbox_probe.py MODE ARG…`, its report as JSON on stdout.

* `reach ADDRESS:PORT…`: connect to each address (an IPv6 one in brackets, `[fe80::1%tap0]:80`) once, then try to
  undo the network's refusals (`ip rule del`, `ip route del default`, a route of its own) and connect again;
* `io-uring`: call io_uring_setup (system call 425) through ctypes and say what the kernel answered;
* `proc`: read /proc/1/cmdline, /proc/1/environ, /proc/self/cmdline and /proc/self/mountinfo.
"""

import ctypes
import json
import os
import socket
import subprocess
import sys


def attempt(target: str) -> str:
    """`connected`, or the name of the error connecting to `target` (`host:port`, `[v6%scope]:port`) raised."""
    host, _, port = target.rpartition(":")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as connection:
            connection.settimeout(3)
            connection.connect(address)
        return "connected"
    except OSError as error:
        return type(error).__name__


def undo() -> dict:
    """Try to lift the sandbox's refusals as a program could: each `ip` command's exit status and last words."""
    tried = {}
    rules = subprocess.run(["ip", "rule", "show"], capture_output=True, text=True).stdout.splitlines()
    preferences = [line.split(":")[0] for line in rules if "prohibit" in line or "unreachable" in line]
    commands = [["ip", "rule", "del", "pref", pref] for pref in preferences]
    commands += [["ip", "-6", "rule", "flush"], ["ip", "rule", "flush"], ["ip", "route", "del", "default"]]
    commands += [["ip", "route", "add", "169.254.0.0/16", "via", "10.0.2.2"]]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True)
        tried[" ".join(command)] = f"{done.returncode}: {done.stderr.strip()[-60:]}"
    return {"rules": rules, "undo": tried}


def reach(targets: list[str]) -> dict:
    report: dict = {"before": {target: attempt(target) for target in targets}}
    report |= undo()
    report["after"] = {target: attempt(target) for target in targets}
    return report


def io_uring() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(425, 8, params)
    if fd >= 0:
        os.close(fd)
        return {"io_uring_setup": "allowed"}
    return {"io_uring_setup": os.strerror(ctypes.get_errno())}


def read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError as error:
        return f"unreadable: {error.strerror}"


def proc() -> dict:
    names = ("/proc/1/cmdline", "/proc/1/environ", "/proc/self/cmdline", "/proc/self/mountinfo")
    return {path: read(path) for path in names}


mode, args = sys.argv[1], sys.argv[2:]
if mode == "reach":
    report = reach(args)
elif mode == "io-uring":
    report = io_uring()
else:
    report = proc()
print(json.dumps(report, sort_keys=True), flush=True)
