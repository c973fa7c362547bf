"""The first process of every sandboxed program: limits, control group, seccomp filter, and a network of its own.

Run by the worker as `python -I -S worker/launcher.py CONFIG -- ARGV…` (the
standard library only, so it starts in a few milliseconds), it

1. sets the per-process rlimits and joins the party's control group, so that
   the program and everything it starts are counted together (the launcher's
   own process becomes the program: nothing of the worker is in the group);
2. opens the seccomp filter for bubblewrap's `--seccomp`;
3. with `"network": true`, starts bubblewrap blocked (`--block-fd`) in a new,
   empty network namespace, learns its pid (`--info-fd`), connects that
   namespace to the outside through slirp4netns (a user-mode TCP/IP stack:
   `--disable-host-loopback` keeps the host's 127.0.0.1 out of reach, and the
   sandbox's own 127.0.0.1 is its alone), and only then lets the program run.
   slirp4netns stops when the launcher's exit pipe closes, however it ends.

CONFIG is a JSON object: `rlimits` ([name, soft, hard] of `resource`), `cgroups`
(cgroup.procs files to join), `seccomp` (the BPF filter in base64, or null), and
`slirp4netns` (its path when the program gets a network, else null). The exit
status is the program's (a signal as 128+n, as bubblewrap reports it).
"""

from __future__ import annotations

import base64
import json
import os
import resource
import select
import subprocess
import sys

NETWORK_READY_S = 10.0
FAILED = 125  # the sandbox could not be set up; the reason is on stderr


def _fail(message: str) -> int:
    os.write(2, f"agentforge sandbox: {message}\n".encode())
    return FAILED


def _confine(config: dict) -> None:
    """Join the party's control group and set the rlimits: the calling process and all it starts from now on."""
    for procs in config["cgroups"]:
        with open(procs, "w") as file:
            file.write(str(os.getpid()))
    for name, soft, hard in config["rlimits"]:
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _read_child_pid(info: int) -> int | None:
    """bubblewrap's `--info-fd` JSON: the pid of the sandbox's first process (None when bubblewrap failed first)."""
    data = b""
    while chunk := os.read(info, 4096):
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except ValueError:
            continue
    return None


def _networked(config: dict, argv: list[str], seccomp: list[str], pass_fds: list[int]) -> int:
    """Run bubblewrap with its own network namespace wired to slirp4netns; return the program's exit status."""
    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    flags = ["--info-fd", str(info_write), "--block-fd", str(block_read), *seccomp]
    try:
        sandbox = subprocess.Popen(
            [argv[0], *flags, *argv[1:]],
            pass_fds=[info_write, block_read, *pass_fds],
            preexec_fn=lambda: _confine(config),
        )
    except OSError as error:
        return _fail(f"could not start bubblewrap: {error}")
    os.close(info_write)
    os.close(block_read)
    pid = _read_child_pid(info_read)
    if pid is None:
        return sandbox.wait()
    ready_read, ready_write = os.pipe()
    exit_read, exit_write = os.pipe()  # held by this process alone: slirp4netns ends when it closes
    os.set_inheritable(exit_write, False)
    try:
        slirp = subprocess.Popen(
            [
                config["slirp4netns"],
                "--configure",
                "--mtu=65520",
                "--disable-host-loopback",
                "--enable-sandbox",
                "--enable-seccomp",
                "--ready-fd",
                str(ready_write),
                "--exit-fd",
                str(exit_read),
                *([] if os.geteuid() == 0 else [f"--userns-path=/proc/{pid}/ns/user"]),
                str(pid),
                "tap0",
            ],
            pass_fds=[ready_write, exit_read],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        sandbox.kill()
        sandbox.wait()
        return _fail(f"could not start slirp4netns for the sandbox's network: {error}")
    os.close(ready_write)
    os.close(exit_read)
    readable, _, _ = select.select([ready_read], [], [], NETWORK_READY_S)
    if not readable or os.read(ready_read, 1) != b"1":
        sandbox.kill()
        sandbox.wait()
        slirp.kill()
        said = slirp.stderr.read().decode("utf-8", "replace").strip()[-300:] if slirp.stderr else ""
        return _fail(f"slirp4netns could not connect the sandbox's network: {said or 'no answer'}")
    os.write(block_write, b"1")
    os.close(block_write)
    status = sandbox.wait()
    os.close(exit_write)
    try:
        slirp.wait(timeout=5)
    except subprocess.TimeoutExpired:
        slirp.kill()
    return 128 - status if status < 0 else status


def main(args: list[str]) -> int:
    """Set up and run the program `args` names after its config and `--`."""
    config, argv = json.loads(args[0]), args[2:]
    seccomp: list[str] = []
    pass_fds: list[int] = []
    if config.get("seccomp"):
        fd = os.memfd_create("seccomp", 0)
        os.write(fd, base64.b64decode(config["seccomp"]))
        os.lseek(fd, 0, os.SEEK_SET)
        seccomp, pass_fds = ["--seccomp", str(fd)], [fd]
    if config.get("slirp4netns"):
        return _networked(config, argv, seccomp, pass_fds)
    _confine(config)
    for fd in pass_fds:
        os.set_inheritable(fd, True)
    program = [argv[0], *seccomp, *argv[1:]] if seccomp else argv
    try:
        os.execvp(program[0], program)
    except OSError as error:
        return _fail(f"could not start {program[0]}: {error}")
    return FAILED  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
