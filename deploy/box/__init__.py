"""What "running repository code" means, and the one way `deploy` does it.

Repository code is anything a model repository or a script someone handed the
user can make run: a python model's `auto_complete_config`, a PyTriton script
`deploy bind` records, a TorchScript model `init-config` runs on a sample, and
python models tritonserver starts for the local endpoint. Each run is

- announced on stderr, naming the file (`announce`);
- skippable: `--no-repo-code` or `repository_code = false` in deploy.toml
  (`deploy.box.policy`); a caller that cannot go on without the code raises
  the error `refused` builds, naming the flag;
- boxed (`run`, or `stub_spec` for the python-backend stub): a scrubbed
  environment (`deploy.box.environment`) with a temporary HOME, TMPDIR and
  working folder; writes only to the folders given (a fresh copy of the
  model); reads only from the system, the Python installation and those
  folders (Landlock); no socket of an internet family (seccomp-bpf);
  RLIMIT_CPU/DATA/FSIZE/NOFILE; and a keeper process that is subreaper of the
  whole tree and kills what is left when the code returns or overruns.

Every piece works for an unprivileged user. What the kernel lacks is said once
on stderr (`capabilities`), with the fallback used.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import IO, Any

from deploy.box import _enter
from deploy.box.environment import scrubbed_environment
from deploy.box.policy import refused, skip_reason

__all__ = [
    "Capabilities",
    "Limits",
    "Outcome",
    "announce",
    "capabilities",
    "install_stub_launcher",
    "refused",
    "run",
    "scratch",
    "skip_reason",
]

ENTER_SCRIPT = Path(_enter.__file__).resolve()
_STOP_GRACE_S = 5.0  # after SIGTERM, how long the keeper gets to take the tree down
# Read everywhere a Python process needs on a Linux system; nothing under /home,
# /root or /tmp except the folders a run names.
_SYSTEM_READS = (
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/opt",
    "/run/nvidia-persistenced",
)
_DEVICE_WRITES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/shm",
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia0",
)
# The CUDA driver writes files of its own process under /proc/self: without this,
# cudaGetDeviceCount fails in the box (error 304, seen on an H100 machine) and torch
# silently runs a KIND_GPU model on the CPU. Only the boxed process's own files.
_SELF_WRITES = ("/proc/self",)
_said: set[str] = set()


@dataclass(frozen=True)
class Limits:
    """rlimits of a boxed run (None: the one deploy runs under)."""

    cpu_s: int | None = 60
    data_bytes: int | None = 4 << 30
    file_bytes: int | None = 1 << 30
    open_files: int | None = 1024

    def as_spec(self) -> dict[str, int]:
        values = {
            "cpu": self.cpu_s,
            "data": self.data_bytes,
            "fsize": self.file_bytes,
            "nofile": self.open_files,
        }
        return {name: value for name, value in values.items() if value is not None}


@dataclass(frozen=True)
class Capabilities:
    """The pieces of the box this kernel allows an unprivileged process."""

    seccomp: bool
    landlock_abi: int

    def summary(self) -> str:
        network = "no network" if self.seccomp else "network NOT blocked"
        files = "writes only to a copy" if self.landlock_abi else "writes NOT confined"
        return f"{network}, {files}"


@cache
def capabilities() -> Capabilities:
    """Probe the kernel once; say on stderr what is missing and the fallback."""
    found = _enter.probe()
    caps = Capabilities(seccomp=bool(found["seccomp"]), landlock_abi=int(found["landlock"]))
    if not caps.seccomp:
        _say(
            f"box: seccomp is not available here ({found['machine']}): repository code can "
            "open network sockets; it still runs with no AWS variables and a temporary HOME"
        )
    if not caps.landlock_abi:
        _say(
            "box: Landlock is not available in this kernel: repository code can read and "
            "write wherever this user can; it still gets a copy of the model, a temporary "
            "HOME and working folder, and no AWS variables"
        )
    return caps


def _say(line: str) -> None:
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr, flush=True)


def announce(code: Path | str, purpose: str) -> None:
    """Say on stderr that repository code runs, which file, and in what box."""
    print(
        f"running repository code: {code} ({purpose}) in a box: {capabilities().summary()}",
        file=sys.stderr,
        flush=True,
    )


@dataclass(frozen=True)
class Outcome:
    returncode: int
    timed_out: bool


@dataclass
class Scratch:
    """A run's private folders: HOME, TMPDIR, the working folder, and the copies."""

    root: Path
    home: Path = field(init=False)
    tmp: Path = field(init=False)
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home, self.tmp, self.work = self.root / "home", self.root / "tmp", self.root / "work"
        for folder in (self.home, self.tmp, self.work):
            folder.mkdir(mode=0o700)


@contextmanager
def scratch(prefix: str = "deploy-box-") -> Iterator[Scratch]:
    """A fresh scratch folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as root:
        yield Scratch(Path(root))


def _python_reads() -> list[str]:
    """The Python installation and what is on this interpreter's sys.path."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).parent)}
    places.update(entry for entry in sys.path if entry and Path(entry).is_absolute())
    found: set[str] = set()
    for place in places:
        for candidate in (Path(place), Path(place).resolve()):
            if candidate.exists():
                found.add(str(candidate))
    return sorted(found)


def _secrets() -> list[Path]:
    """Files of this user's that no readable folder may contain."""
    home = Path("~").expanduser()
    names = (".aws", ".ssh", ".netrc", ".docker", ".config", ".kube", ".gnupg", ".pypirc")
    return [home / name for name in names]


def read_list(extra: Sequence[Path]) -> list[str]:
    """Where boxed code may read: the system, Python, `extra`; never this user's secrets."""
    secrets = _secrets()
    allowed: list[str] = []
    for entry in [*_SYSTEM_READS, *_python_reads(), *(str(p) for p in extra)]:
        path = Path(entry)
        if any(secret.is_relative_to(path) for secret in secrets):
            _say(f"box: {entry} holds this user's credentials; boxed code may not read it")
            continue
        allowed.append(entry)
    return allowed


def _spec(
    writable: Sequence[Path], readable: Sequence[Path], limits: Limits, *, keeper: bool
) -> dict[str, Any]:
    caps = capabilities()
    write = [*(str(p) for p in writable), *_DEVICE_WRITES, *_SELF_WRITES]
    return {
        "seccomp": caps.seccomp,
        "landlock": caps.landlock_abi,
        "write": write,
        "read": read_list([*readable, *writable]),
        "limits": limits.as_spec(),
        "keeper": keeper,
    }


def install_stub_launcher(
    launcher: Path,
    real: Path,
    *,
    writable: Sequence[Path],
    readable: Sequence[Path],
    limits: Limits,
) -> None:
    """Write `launcher`: a script that runs the stub `real` in the box.

    tritonserver starts `<backends>/python/triton_python_backend_stub MODEL_PY
    ...` for each python model instance; the launcher, in its place, hands that
    command to the keeper (`_enter.py`), which adds the model's folder to the
    writable ones and runs the stub in the box below it. tritonserver waits for
    the keeper as for the stub; when the stub exits, the keeper kills what the
    model left. (Only a stub tritonserver SIGKILLs, an unhealthy one, takes its
    keeper down first: the stub dies with it, what it started may not.)
    """
    # Signals outside the box stay allowed: the stub checks its parent with kill(pid, 0).
    spec = _spec(writable, readable, limits, keeper=True)
    spec.update(scope=False, pdeathsig=False, secrets=[str(p) for p in _secrets()])
    spec_file = launcher.with_name(launcher.name + ".box.json")
    partial = spec_file.with_suffix(".partial")
    partial.write_text(json.dumps(spec), encoding="utf-8")
    partial.replace(spec_file)
    script = (
        "#!/bin/sh\n"
        "# Runs the python-backend stub in deploy's box (deploy.box); written by deploy.\n"
        f"exec {shlex.quote(sys.executable)} -I -B {shlex.quote(str(ENTER_SCRIPT))} --stub "
        f'{shlex.quote(str(spec_file))} -- {shlex.quote(str(real))} "$@"\n'
    )
    partial = launcher.with_name(launcher.name + ".partial")
    partial.write_text(script, encoding="utf-8")
    partial.chmod(0o755)
    partial.replace(launcher)


def boxed_command(
    command: Sequence[str], *, writable: Sequence[Path], readable: Sequence[Path], limits: Limits
) -> list[str]:
    """`command` behind the keeper that enters the box."""
    spec = json.dumps(_spec(writable, readable, limits, keeper=True))
    return [sys.executable, "-I", "-B", str(ENTER_SCRIPT), spec, "--", *command]


def run(
    command: Sequence[str],
    *,
    box: Scratch,
    writable: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    limits: Limits = Limits(),
    timeout: float,
    stdout: IO[bytes] | int | None = subprocess.DEVNULL,
    stderr: IO[bytes] | int | None = None,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Run `command` in the box; the keeper's status, or timed_out after `timeout` s.

    Writable: `writable` and the scratch folders. Readable besides: `readable`.
    Nothing it started is alive when this returns.
    """
    places = [box.home, box.tmp, box.work, *writable]
    process = subprocess.Popen(
        boxed_command(command, writable=places, readable=readable, limits=limits),
        cwd=box.work,
        env=scrubbed_environment(home=box.home, tmp=box.tmp, extra=env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        close_fds=True,
    )
    try:
        return Outcome(process.wait(timeout=timeout), timed_out=False)
    except subprocess.TimeoutExpired:
        return Outcome(_stop(process), timed_out=True)
    except BaseException:
        _stop(process)
        raise


def _stop(process: subprocess.Popen[bytes]) -> int:
    """Have the keeper kill the tree; kill the keeper's group if it does not."""
    try:
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return process.wait()
