"""One system-call filter for every sandbox: what no command in a sandbox may do, whatever its backend.

Capabilities are dropped in every sandbox, so most of the kernel's dangerous calls fail anyway. What is left
needs no privilege and breaks the line between the agent and the grader:

* `ptrace` / `process_vm_readv` / `process_vm_writev` / `pidfd_getfd` / `kcmp`: a command attaching to the
  in-sandbox supervisor (same uid) could inject an `execve()` between two requests and forge every later
  answer, the grading result included (Docker's default profile allows `ptrace` on kernels >= 4.8);
* `unshare`, `setns`, `clone`/`clone3` with namespace flags: a process in a nested user + pid namespace is
  missed by a kill that walks the sandbox's own pid namespace, and outlives the agent;
* the mount API, keyrings, bpf, perf events, userfaultfd, module and clock calls: Docker's default profile
  refuses them; the same list here, so both backends refuse the same calls.

The filter is built with libseccomp (through ctypes: no build step) and handed to bwrap as a BPF program
(`--seccomp FD`), which loads it right before it runs the supervisor; Docker gets the same deny list as a JSON
profile (`security_opt=["seccomp=..."]`). Refused calls fail with EPERM (`clone3` with ENOSYS, so that the C
library falls back to `clone`, whose flags a filter can read). Where libseccomp is missing, bwrap runs without
a filter and `clawgym sandbox check` says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import json
import os
import platform
import tempfile

# Refused outright (EPERM). Names unknown to the running kernel's architecture are skipped.
DENIED = (
    # tracing and reading or writing another process
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # namespaces (clone with namespace flags is filtered on its flags below)
    "unshare", "setns",
    # mounts, old and new API
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr",
    # kernel keyrings, bpf, perf, userfaultfd, file handles
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "open_by_handle_at",
    "name_to_handle_at", "lookup_dcookie",
    # modules, kexec, reboot, swap, accounting, quotas, clocks, syslog, old interfaces
    "init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms", "query_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "stime", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "uselib", "vhangup",
    "ustat", "sysfs", "_sysctl", "nfsservctl", "iopl", "ioperm", "vm86", "vm86old",
)
# clone's flags (its first argument on x86_64 and aarch64) that make a namespace
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
_CLONE_ARG0_ARCHES = {"x86_64", "aarch64", "arm64"}

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _resolve(lib: ctypes.CDLL, name: str) -> int | None:
    nr = lib.seccomp_syscall_resolve_name(name.encode())
    return None if nr < 0 else nr


@functools.lru_cache(maxsize=1)
def bpf_program() -> bytes | None:
    """The filter as a BPF program for this machine's architecture (what `bwrap --seccomp FD` reads); None
    where it cannot be built (no libseccomp, or an architecture whose `clone` takes its flags elsewhere)."""
    lib = _lib()
    if lib is None or platform.machine() not in _CLONE_ARG0_ARCHES:
        return None
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        return None
    try:
        for name in DENIED:
            nr = _resolve(lib, name)
            if nr is not None and lib.seccomp_rule_add_array(ctx, _act_errno(errno.EPERM), nr, 0, None) != 0:
                return None
        clone = _resolve(lib, "clone")
        for flag in NAMESPACE_FLAGS.values():
            cmp = (_ArgCmp * 1)(_ArgCmp(0, _SCMP_CMP_MASKED_EQ, flag, flag))
            if clone is None or lib.seccomp_rule_add_array(ctx, _act_errno(errno.EPERM), clone, 1, cmp) != 0:
                return None
        clone3 = _resolve(lib, "clone3")
        if clone3 is not None and lib.seccomp_rule_add_array(ctx, _act_errno(errno.ENOSYS), clone3, 0, None) != 0:
            return None
        with tempfile.TemporaryFile() as fh:
            if lib.seccomp_export_bpf(ctx, fh.fileno()) != 0:
                return None
            fh.seek(0)
            return fh.read()
    finally:
        lib.seccomp_release(ctx)


def bwrap_fd() -> int | None:
    """A readable fd holding the BPF program (for `bwrap --seccomp FD`; the caller passes it to bwrap and
    closes it), or None without a filter."""
    prog = bpf_program()
    if prog is None:
        return None
    r, w = os.pipe()
    try:
        if len(prog) > 65536:  # more than a pipe holds without a reader
            raise OSError("seccomp program too large for a pipe")
        os.write(w, prog)
    except OSError:
        os.close(r)
        os.close(w)
        return None
    os.close(w)
    return r


@functools.lru_cache(maxsize=1)
def docker_profile() -> str:
    """The same deny list as a Docker seccomp profile (JSON), allowing everything else."""
    errno_eperm = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules: list[dict] = [{"names": list(DENIED), **errno_eperm}]
    for flag in NAMESPACE_FLAGS.values():
        rules.append({"names": ["clone"], **errno_eperm,
                      "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules})


def describe() -> str:
    """One line for `clawgym sandbox check`."""
    if bpf_program() is None:
        return ("seccomp: NOT filtered on bwrap (libseccomp.so.2 missing or unsupported architecture): a command "
                "could ptrace the supervisor")
    return "seccomp: ptrace, namespaces, mounts and keyrings refused"
