"""The system-call filter every bubblewrap sandbox runs under (bubblewrap's `--seccomp`), built with libseccomp.

A sandboxed program may not make namespaces of its own (`unshare`, `setns`,
`clone` with a CLONE_NEW* flag; `clone3` answers ENOSYS so the C library falls
back to `clone`, whose flags the filter can read): that is what bubblewrap's
`--disable-userns` gives a sandbox in a user namespace, and the filter gives it
to the sandboxes of a root worker too, which have none. Nor may it reach kernel
interfaces no evaluation needs and that widen the kernel's attack surface:
mounts, keyrings, eBPF, perf events, userfaultfd, kernel modules and kexec,
file handles (`open_by_handle_at` reads files by inode past any mount), raw
I/O ports, swap, reboot, the kernel log, accounting, quotas, and io_uring
(`io_uring_setup`, `_enter`, `_register`: a second way into most system
calls, one a filter cannot inspect, and the source of many of the kernel's
recent privilege escalations). Each answers EPERM, so a program sees an
ordinary refusal: what the kernel's own `kernel.io_uring_disabled` sysctl and
Docker's default profile answer, and on which liburing, libuv (Node) and
Tokio fall back to ordinary system calls. System calls of another ABI
(32-bit `int 0x80`) kill the process, as libseccomp does by default.

An image build (worker/image_builds.py) runs buildah under `program(builder=True)`: the same filter without the
refusals of namespaces and mounts, which buildah needs to set up each `RUN` line; the line itself runs under the
trial's whole filter, which buildah applies from `profile()` (the filter as a containers seccomp profile, JSON).
"""

from __future__ import annotations

import errno
import functools
import json
import tempfile
from typing import Any

NAMESPACE_FLAGS = (
    0x10000000,  # CLONE_NEWUSER
    0x00020000,  # CLONE_NEWNS
    0x40000000,  # CLONE_NEWNET
    0x20000000,  # CLONE_NEWPID
    0x08000000,  # CLONE_NEWIPC
    0x04000000,  # CLONE_NEWUTS
    0x02000000,  # CLONE_NEWCGROUP
    0x00000080,  # CLONE_NEWTIME
)
REFUSED = (
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsmount",
    "fsconfig",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "iopl",
    "ioperm",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "acct",
    "quotactl",
    "lookup_dcookie",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
# What buildah itself may call (its RUN lines may not): it makes the mount namespace and mounts of each line.
BUILDER_ALLOWED = frozenset(("unshare", "setns", "mount", "umount2", "pivot_root"))


def _build(builder: bool = False) -> Any:
    import pyseccomp as seccomp  # here: it loads libseccomp, which only the worker needs

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    refuse = seccomp.ERRNO(errno.EPERM)
    for name in REFUSED:
        if builder and name in BUILDER_ALLOWED:
            continue
        try:
            rules.add_rule(refuse, name)
        except (RuntimeError, OSError, ValueError):  # a system call this architecture does not have
            continue
    for flag in () if builder else NAMESPACE_FLAGS:
        rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # its flags are in memory a filter cannot read
    return rules


@functools.lru_cache(maxsize=2)
def program(*, builder: bool = False) -> str:
    """The compiled filter (classic BPF) in hex, as the launcher hands it to bubblewrap; built once per process.
    `builder`: buildah's, which may make namespaces and mounts.

    Raises RuntimeError naming the fix when libseccomp cannot be loaded."""
    try:
        rules = _build(builder)
    except (OSError, RuntimeError, ImportError) as error:
        raise RuntimeError(f"the seccomp filter cannot be built ({error}); apt-get install libseccomp2") from error
    with tempfile.TemporaryFile() as file:
        rules.export_bpf(file)
        file.seek(0)
        return file.read().hex()


def profile() -> str:
    """The trial's filter as a containers seccomp profile (the JSON of buildah's `--security-opt seccomp=`): each
    refused call EPERM, `clone` with a CLONE_NEW* flag EPERM, `clone3` ENOSYS, everything else allowed."""
    rules: list[dict[str, Any]] = [{"names": list(REFUSED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}]
    for flag in NAMESPACE_FLAGS:  # value is the mask, valueTwo what the masked flags must equal
        condition = {"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}
        rules.append({"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM, "args": [condition]})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules}, indent=1)
