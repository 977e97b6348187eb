"""Enters the box and runs a command in it; run as a script, standard library only.

    python -I -B _enter.py SPEC_JSON -- COMMAND [ARG...]

Started by `deploy.box` (and by the python-backend stub launcher), never
imported by code that runs outside it except to build the seccomp filter for
tests. SPEC holds the writable folders, the readable ones (None: reads are not
restricted), the rlimits and whether to stay as a keeper. The steps, each only
where the kernel allows it (`probe()` says which):

- rlimits (RLIMIT_CPU, RLIMIT_DATA, RLIMIT_FSIZE, RLIMIT_NOFILE);
- PR_SET_NO_NEW_PRIVS, then a seccomp-bpf filter that refuses socket() for
  every family but AF_UNIX and AF_NETLINK (EPERM), refuses io_uring (which
  opens sockets past seccomp), and kills a process that uses a foreign
  system-call ABI (x32, i386);
- a Landlock ruleset handling every write right (and, with a read list, the
  read rights), TCP bind/connect (ABI 4), and signals and abstract sockets
  outside the box (ABI 6, keeper mode only);
- every inherited descriptor above stderr closed.

As a keeper the process sets PR_SET_CHILD_SUBREAPER, runs COMMAND in a child
and, once that child exits (or SIGTERM/SIGHUP arrive), kills and reaps every
process left below it, `setsid` ones included, then exits with the child's
status. Without keeper mode it execs COMMAND in place (the python-backend stub,
whose pid tritonserver watches).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import resource
import signal
import struct
import sys
from pathlib import Path
from typing import Any

# prctl
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_GET_SECCOMP = 21
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# seccomp return values and BPF opcodes
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_RET_K = 0x06
X32_SYSCALL_BIT = 0x40000000
AF_UNIX, AF_NETLINK = 1, 16

# Per machine: audit arch, socket(), io_uring_setup/enter/register.
ARCHES = {
    "x86_64": (0xC000003E, 41, (425, 426, 427)),
    "aarch64": (0xC00000B7, 198, (425, 426, 427)),
}

# Landlock
SYS_LANDLOCK = {"create": 444, "add_rule": 445, "restrict_self": 446}
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV


def fs_writes(abi: int) -> int:
    """Every write, make, remove, refer and truncate right this ABI knows."""
    rights = FS_WRITE_FILE | sum(1 << bit for bit in range(4, 13))  # remove/make
    if abi >= 2:
        rights |= 1 << 13  # REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]


class _StopError(Exception):
    """Raised by the keeper's signal handler: stop waiting, take the box down."""


class BoxError(OSError):
    """A step of the box that the probe said works failed: the command does not run."""


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise BoxError(code, f"{what}: {os.strerror(code)}")
    return result


def prctl(option: int, arg2: int = 0) -> int:
    return int(_libc.prctl(option, arg2, 0, 0, 0))


def landlock_abi() -> int:
    """The Landlock ABI version (0: none)."""
    version = int(
        _libc.syscall(
            ctypes.c_long(SYS_LANDLOCK["create"]),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
        )
    )
    return max(version, 0)


def seccomp_available() -> bool:
    return platform.machine() in ARCHES and prctl(PR_GET_SECCOMP) >= 0


def probe() -> dict[str, Any]:
    """What this kernel lets an unprivileged process use."""
    return {
        "seccomp": seccomp_available(),
        "landlock": landlock_abi(),
        "subreaper": True,  # PR_SET_CHILD_SUBREAPER exists since Linux 3.4
        "machine": platform.machine(),
    }


def socket_filter(machine: str) -> bytes:
    """The seccomp-bpf program: socket() only for AF_UNIX/AF_NETLINK, no io_uring."""
    arch, nr_socket, uring = ARCHES[machine]
    errno_eperm = SECCOMP_RET_ERRNO | errno.EPERM

    def stmt(code: int, k: int) -> tuple[int, int, int, int]:
        return (code, 0, 0, k)

    def jump(code: int, k: int, jt: int, jf: int) -> tuple[int, int, int, int]:
        return (code, jt, jf, k)

    program = [
        stmt(BPF_LD_W_ABS, 4),  # seccomp_data.arch
        jump(BPF_JEQ_K, arch, 1, 0),
        stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        kill = stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
        program += [jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1), kill]
    for number in uring:
        program += [jump(BPF_JEQ_K, number, 0, 1), stmt(BPF_RET_K, errno_eperm)]
    program += [
        jump(BPF_JEQ_K, nr_socket, 1, 0),
        stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
        stmt(BPF_LD_W_ABS, 16),  # args[0], low 32 bits (little-endian): the family
        jump(BPF_JEQ_K, AF_UNIX, 2, 0),
        jump(BPF_JEQ_K, AF_NETLINK, 1, 0),
        stmt(BPF_RET_K, errno_eperm),
        stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


def install_socket_filter() -> None:
    program = socket_filter(platform.machine())
    buffer = ctypes.create_string_buffer(program)
    fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(buffer))
    fbuffer = ctypes.create_string_buffer(fprog)
    _check(prctl(PR_SET_NO_NEW_PRIVS, 1), "PR_SET_NO_NEW_PRIVS")
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fbuffer), 0, 0),
        "seccomp filter",
    )


def apply_landlock(abi: int, write: list[str], read: list[str] | None, scoped: bool) -> None:
    writes = fs_writes(abi)
    handled = writes | (FS_READ if read is not None else 0)
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0
    scope = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 and scoped else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", handled, net, scope)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled, net)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr)
    ruleset = _check(
        int(
            _libc.syscall(
                ctypes.c_long(SYS_LANDLOCK["create"]),
                buffer,
                ctypes.c_size_t(len(attr)),
                ctypes.c_uint32(0),
            )
        ),
        "landlock_create_ruleset",
    )
    rules: dict[str, int] = {}
    for path in read or []:
        rules[path] = rules.get(path, 0) | FS_READ
    for path in write:
        rules[path] = rules.get(path, 0) | writes | (FS_READ if read is not None else 0)
    try:
        for path, rights in rules.items():
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent here: nothing to allow
            try:
                if not Path(path).is_dir():
                    rights &= FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd))
                added = _libc.syscall(
                    ctypes.c_long(SYS_LANDLOCK["add_rule"]),
                    ctypes.c_int(ruleset),
                    ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                    rule,
                    ctypes.c_uint32(0),
                )
                _check(int(added), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        _check(prctl(PR_SET_NO_NEW_PRIVS, 1), "PR_SET_NO_NEW_PRIVS")
        _check(
            int(
                _libc.syscall(
                    ctypes.c_long(SYS_LANDLOCK["restrict_self"]),
                    ctypes.c_int(ruleset),
                    ctypes.c_uint32(0),
                )
            ),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)


_LIMITS = {
    "cpu": resource.RLIMIT_CPU,
    "data": resource.RLIMIT_DATA,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
}


def apply_limits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        kind = _LIMITS[name]
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        # cpu: SIGXCPU at the soft limit, SIGKILL a second later (if the hard one allows).
        top = value + 1 if name == "cpu" else value
        if hard != resource.RLIM_INFINITY:
            top = min(top, hard)
        resource.setrlimit(kind, (value, top))


def enter(spec: dict[str, Any], keeper: bool) -> None:
    """Apply the box to this process (after the keeper's fork, if any)."""
    apply_limits(spec.get("limits", {}))
    if spec.get("seccomp"):
        install_socket_filter()
    abi = int(spec.get("landlock", 0))
    if abi:
        scoped = keeper and spec.get("scope", True)
        apply_landlock(abi, list(spec.get("write", [])), spec.get("read"), scoped=scoped)
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _children() -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found += [int(pid) for pid in (task / "children").read_text("ascii").split()]
        except OSError:
            continue
    return found


def kill_all_below() -> None:
    """SIGKILL and reap every process below this subreaper until none is left."""
    while True:
        for pid in _children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def keep(spec: dict[str, Any], command: list[str]) -> int:
    """Run `command` boxed in a child; kill what it leaves; its exit status."""
    _check(prctl(PR_SET_CHILD_SUBREAPER, 1), "PR_SET_CHILD_SUBREAPER")
    if spec.get("pdeathsig", True):
        # deploy gone: take the box down. Not for the stub: the parent-death signal
        # follows the thread that forked, and tritonserver forks stubs from loader
        # threads that end; the stub notices tritonserver's end itself.
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    def on_signal(signum: int, frame: Any) -> None:
        raise _StopError

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, on_signal)
    child = os.fork()
    if child == 0:
        try:
            for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(signum, signal.SIG_DFL)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # keeper gone: so is the command
            enter(spec, keeper=True)
            os.execvpe(command[0], command, os.environ)
        except BaseException as exc:
            os.write(2, f"box: cannot start {command[0]}: {exc}\n".encode())
        os._exit(126)
    status = 128 + signal.SIGTERM  # unless the child's own status comes first
    try:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid == child:
                status = os.waitstatus_to_exitcode(wait_status)  # -N: killed by signal N
                break
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)
    except _StopError:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)
    kill_all_below()
    return status


def stub_spec(path: str, command: list[str]) -> dict[str, Any]:
    """The python-backend stub's box: the spec file's, plus the model's folder.

    tritonserver starts the stub as `STUB MODEL_DIR/VERSION/model.py ...`: the
    model's folder (a copy the local endpoint extracted) becomes writable.
    """
    spec: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    secrets = [Path(p) for p in spec.get("secrets", [])]

    def safe(place: str) -> bool:
        return place.startswith("/") and not any(s.is_relative_to(place) for s in secrets)

    # tritonserver's own HOME and TMPDIR (deploy's private folders) are writable.
    places = [os.environ.get(name, "") for name in ("HOME", "TMPDIR")]
    spec["write"] = [*spec.get("write", []), *filter(safe, places)]
    if spec.get("read") is not None:
        # What tritonserver's environment points at, as an execution environment's
        # activate script sets it: the environment (PATH's bin/..), its libraries,
        # and the libraries deploy preloads.
        reads = [os.environ.get(name, "") for name in ("VIRTUAL_ENV", "CONDA_PREFIX")]
        for name in ("PATH", "LD_LIBRARY_PATH", "LD_PRELOAD"):
            for entry in os.environ.get(name, "").split(":"):
                reads.append(entry)
                if entry.endswith(("/bin", "/lib")):
                    reads.append(str(Path(entry).parent))
        spec["read"] = [*spec["read"], *filter(safe, reads)]
    if len(command) > 1 and command[1].startswith("/"):
        # The version folder (model.py's): the model folder above it holds the
        # launcher of a model with its own stub, which must stay as written.
        version = str(Path(command[1]).parent)
        spec["write"] = [*spec["write"], version]
        if spec.get("read") is not None:
            spec["read"] = [*spec["read"], str(Path(version).parent)]
    if len(command) > 6 and spec.get("read") is not None and safe(command[6]):
        spec["read"] = [*spec["read"], command[6]]  # the backend's folder (its utils module)
    return spec


def main(argv: list[str]) -> int:
    stub = len(argv) >= 4 and argv[0] == "--stub"
    if stub:
        argv = argv[1:]
    if len(argv) < 3 or argv[1] != "--":
        os.write(2, b"usage: _enter.py [--stub SPEC_FILE | SPEC_JSON] -- COMMAND [ARG...]\n")
        return 2
    command = argv[2:]
    spec = stub_spec(argv[0], command) if stub else json.loads(argv[0])
    if spec.get("keeper", True):
        status = keep(spec, command)
        if status < 0:  # die of the child's signal, so the caller sees it
            signal.signal(-status, signal.SIG_DFL)
            os.kill(os.getpid(), -status)
        return status if status >= 0 else 128 - status
    try:
        _check(prctl(PR_SET_CHILD_SUBREAPER, 1), "PR_SET_CHILD_SUBREAPER")
        enter(spec, keeper=False)
        os.execvpe(command[0], command, os.environ)
    except BaseException as exc:
        os.write(2, f"box: cannot start {command[0]}: {exc}\n".encode())
    return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
