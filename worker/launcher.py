"""The first process of every sandboxed program: limits, control group, seccomp filter, and a network of its own.

Run by the worker as `python -I -S worker/launcher.py OPTION… -- ARGV…` (a few
built-in modules only, not even json or re, so it starts in a few
milliseconds), it

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

The options (each `name=value`, repeatable where it makes sense): `rlimit=NAME:SOFT:HARD`
(a `resource` limit), `cgroup=PATH` (a cgroup.procs file to join), `seccomp=HEX`
(the BPF filter), `slirp4netns=PATH` (when the program gets a network). The exit
status is the program's (a signal as 128+n, as bubblewrap reports it).
"""

from __future__ import annotations

import os
import resource
import sys

NETWORK_READY_S = 10.0
FAILED = 125  # the sandbox could not be set up; the reason is on stderr


def _fail(message: str) -> int:
    os.write(2, f"agentforge sandbox: {message}\n".encode())
    return FAILED


def _options(args: list[str]) -> dict[str, list[str]]:
    """`name=value` options before `--`, gathered by name."""
    found: dict[str, list[str]] = {"rlimit": [], "cgroup": [], "seccomp": [], "slirp4netns": []}
    for arg in args:
        name, _, value = arg.partition("=")
        found[name].append(value)
    return found


def _confine(config: dict[str, list[str]]) -> None:
    """Join the party's control group and set the rlimits: the calling process and all it starts from now on."""
    for procs in config["cgroup"]:
        with open(procs, "w") as file:
            file.write(str(os.getpid()))
    for limit in config["rlimit"]:
        name, soft, hard = limit.split(":")
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))


def _read_child_pid(info: int) -> int | None:
    """bubblewrap's `--info-fd` JSON: the pid of the sandbox's first process (None when bubblewrap failed first)."""
    data = b""
    while chunk := os.read(info, 4096):
        data += chunk
        _, found, rest = data.partition(b'"child-pid":')
        number = rest.strip().split(b",")[0].split(b"}")[0].strip()
        if found and number.isdigit() and (b"," in rest or b"}" in rest):
            return int(number)
    return None


def _await_loopback(pid: int) -> None:
    """Wait until bubblewrap has brought up the sandbox's loopback (127.0.0.1 is in its namespace's local table):
    slirp4netns sets `lo` up as well, and the two racing made bubblewrap fail ("loopback: Failed RTM_NEWADDR")."""
    import time

    deadline = time.monotonic() + NETWORK_READY_S
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/net/fib_trie") as table:
                if "127.0.0.1" in table.read():
                    return
        except OSError:  # bubblewrap's child is gone: it failed and says why
            return
        time.sleep(0.0005)


def _spawn(argv: list[str], keep: list[int], before_exec=None, stderr: int | None = None) -> int:
    """Fork and exec `argv` with the descriptors `keep` inherited; return its pid (fork and exec, not subprocess,
    whose import would cost the launcher more than everything else it does)."""
    pid = os.fork()
    if pid:
        return pid
    try:
        for fd in keep:
            os.set_inheritable(fd, True)
        if stderr is not None:  # a helper: nothing of the program's streams, a session of its own
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(stderr, 2)
            os.setsid()
        if before_exec:
            before_exec()
        os.execvp(argv[0], argv)
    except BaseException as error:
        os.write(2, f"agentforge sandbox: could not start {argv[0]}: {error}\n".encode())
    os._exit(FAILED)


def _status(pid: int) -> int:
    """Wait for `pid`; its exit status, a signal as 128+n."""
    status = os.waitpid(pid, 0)[1]
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _networked(config: dict[str, list[str]], argv: list[str], seccomp: list[str], pass_fds: list[int]) -> int:
    """Run bubblewrap with its own network namespace wired to slirp4netns; return the program's exit status."""
    import select  # a built-in module; a program without a network starts without it

    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    flags = ["--info-fd", str(info_write), "--block-fd", str(block_read), *seccomp]
    sandbox = _spawn([argv[0], *flags, *argv[1:]], [info_write, block_read, *pass_fds], lambda: _confine(config))
    os.close(info_write)
    os.close(block_read)
    child = _read_child_pid(info_read)
    if child is None:  # bubblewrap failed before making the sandbox; it said why
        return _status(sandbox)
    _await_loopback(child)
    ready_read, ready_write = os.pipe()
    exit_read, exit_write = os.pipe()  # held by this process alone: slirp4netns ends when it closes
    said_read, said_write = os.pipe()  # slirp4netns's own words, kept out of the program's stderr
    slirp = [
        config["slirp4netns"][0],
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--enable-sandbox",
        "--enable-seccomp",
        f"--ready-fd={ready_write}",
        f"--exit-fd={exit_read}",
        *([] if os.geteuid() == 0 else [f"--userns-path=/proc/{child}/ns/user"]),
        str(child),
        "tap0",
    ]
    slirp_pid = _spawn(slirp, [ready_write, exit_read], stderr=said_write)
    for fd in (ready_write, exit_read, said_write):
        os.close(fd)
    readable, _, _ = select.select([ready_read], [], [], NETWORK_READY_S)
    if not readable or os.read(ready_read, 1) != b"1":
        for pid in (sandbox, slirp_pid):
            os.kill(pid, 9)
        _status(sandbox)
        os.set_blocking(said_read, False)
        try:
            said = os.read(said_read, 4096).decode("utf-8", "replace").strip()[-300:]
        except BlockingIOError:
            said = ""
        return _fail(f"slirp4netns could not connect the sandbox's network: {said or 'no answer'}")
    try:
        os.write(block_write, b"1")
    except BrokenPipeError:  # bubblewrap's child ended while the network came up: its status says how
        os.close(exit_write)
        return _status(sandbox)
    os.close(block_write)
    status = _status(sandbox)
    os.close(exit_write)  # slirp4netns sees it and exits (its parent is gone by then: init reaps it)
    return status


def main(args: list[str]) -> int:
    """Set up and run the program `args` names after its options and `--`."""
    split = args.index("--")
    config, argv = _options(args[:split]), args[split + 1 :]
    seccomp: list[str] = []
    pass_fds: list[int] = []
    if config["seccomp"]:
        fd = os.memfd_create("seccomp", 0)
        os.write(fd, bytes.fromhex(config["seccomp"][0]))
        os.lseek(fd, 0, os.SEEK_SET)
        seccomp, pass_fds = ["--seccomp", str(fd)], [fd]
    if config["slirp4netns"]:
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
