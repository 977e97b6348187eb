"""tritonserver for an installed `deploy`: the nvidia-pytriton wheel, fetched once into a cache.

`nvidia-pytriton` cannot be a dependency of the `local` extra: it pins
`numpy<2`, the rest of the project needs numpy 2, and an extra cannot say
`--no-deps`. Only its `pytriton/tritonserver/` folder and the libraries
beside it (`nvidia_pytriton.libs/`) are used, never `pytriton` itself. So on
first use the wheel pinned below (version and sha256) is fetched, checked and
unpacked into `$XDG_CACHE_HOME/deploy/triton/`, with the numpy 1.x wheel the
python-backend stub needs (built against numpy 1.x: with numpy 2 its outputs
are empty) for the running CPython. That rules out CPython 3.13 although the
wheel has a stub for it: numpy 1.x publishes no 3.13 wheel, and the 3.13 stub
with numpy 2.1 answers empty outputs as the others do (tried).

    nvidia-pytriton-0.7.0-x86_64/pytriton/tritonserver/...    bin, backends, stubs
    nvidia-pytriton-0.7.0-x86_64/nvidia_pytriton.libs/...     the binaries' RPATH
    stub-numpy-1.26.4-cp311-x86_64/numpy/...                   the stub's numpy

Each folder is unpacked under a temporary name and renamed into place, so a
folder that exists is complete; a lock file keeps two first uses from
fetching twice.

The wheels are fetched with pip (`pip download --require-hashes`), not with
urllib against PyPI: pip reads the user's index configuration (pip.conf,
`PIP_INDEX_URL`, a company mirror), proxies, certificates and credentials,
which a machine that reaches PyPI only through those needs, and checks the
hashes itself; the hashes are checked again here before anything is
unpacked. On a machine with no index at all, `DEPLOY_TRITON_WHEELS` (or
`deploy fetch-triton --from DIR`) names a folder holding the two wheel files,
downloaded elsewhere with the command `download_command` prints.

A developer's virtualenv that has nvidia-pytriton installed beside a
`triton-stub-site` folder (this repository's Makefile) is preferred; see
`deploy.local.triton.install.find_triton`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from deploy.cache_lock import locked
from deploy.errors import LocalEndpointError

WHEELS_ENV = "DEPLOY_TRITON_WHEELS"  # a folder holding the wheel files (no index needed)
PYTRITON_VERSION = "0.7.0"  # tritonserver 2.51
NUMPY_VERSION = "1.26.4"  # the last numpy 1.x; wheels for CPython 3.9 to 3.12
_PYTRITON_GLIBC = (2, 35)  # manylinux_2_35
_FETCH_TIMEOUT_S = 900.0
_WHERE = "local endpoint (tritonserver)"

# sha256 of each file, from PyPI's simple API (https://pypi.org/simple/<name>/).
_PYTRITON_SHA256 = {
    "x86_64": "21f063ff93bb426d0c06b7a55e7eb9efcfe62c0dddd9a908e9877e18710128df",
    "aarch64": "f99e07ee56fe065337453956afba17d2673e02ec6a632c3de26ce6e7b32a0898",
}
_NUMPY_SHA256 = {
    ("3.11", "x86_64"): "666dbfb6ec68962c033a450943ded891bed2d54e6755e35e5835d63f4f6931d5",
    ("3.11", "aarch64"): "7ab55401287bfec946ced39700c053796e7cc0e3acbef09993a9ad2adba6ca6e",
    ("3.12", "x86_64"): "675d61ffbfa78604709862923189bad94014bef562cc35cf61d3a07bba02a7ed",
    ("3.12", "aarch64"): "9fad7dcb1aac3c7f0584a5a8133e3a43eeb2fe127f47e3632d43d677c66c102b",
}
_MEGABYTES = {"nvidia-pytriton": 55, "numpy": 18}  # for the progress line
_PYTRITON_UNPACKED = ("pytriton/tritonserver/", "nvidia_pytriton.libs/")
_NUMPY_UNPACKED = ("numpy/", "numpy.libs/", f"numpy-{NUMPY_VERSION}.dist-info/")


@dataclass(frozen=True)
class PinnedWheel:
    """One wheel file this tool fetches: its name on the index, file name and hash."""

    project: str
    version: str
    filename: str
    sha256: str
    unpacked: tuple[str, ...]  # the archive prefixes that are kept

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version} --hash=sha256:{self.sha256}"


@dataclass(frozen=True)
class Target:
    """What the wheels are for: this machine's architecture and the running CPython."""

    machine: str  # x86_64 | aarch64
    python: str  # X.Y

    @property
    def pytriton(self) -> PinnedWheel:
        return PinnedWheel(
            "nvidia-pytriton",
            PYTRITON_VERSION,
            f"nvidia_pytriton-{PYTRITON_VERSION}-py3-none-manylinux_2_35_{self.machine}.whl",
            _PYTRITON_SHA256[self.machine],
            _PYTRITON_UNPACKED,
        )

    @property
    def numpy(self) -> PinnedWheel:
        tag = "cp" + self.python.replace(".", "")
        return PinnedWheel(
            "numpy",
            NUMPY_VERSION,
            f"numpy-{NUMPY_VERSION}-{tag}-{tag}-manylinux_2_17_{self.machine}"
            f".manylinux2014_{self.machine}.whl",
            _NUMPY_SHA256[(self.python, self.machine)],
            _NUMPY_UNPACKED,
        )

    @property
    def wheels(self) -> tuple[PinnedWheel, PinnedWheel]:
        return (self.pytriton, self.numpy)


@dataclass(frozen=True)
class CachedTriton:
    """The unpacked folders: `root` as `TritonInstall.root`, `stub_site` its stub's numpy."""

    root: Path
    stub_site: Path


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/deploy/triton` (default `~/.cache/deploy/triton`)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deploy" / "triton"


def this_target() -> Target:
    """The target of this machine and Python, or an error naming what the wheel cannot run on."""
    libc, glibc = platform.libc_ver()
    return target_for(
        sys.platform,
        platform.machine(),
        f"{sys.version_info.major}.{sys.version_info.minor}",
        libc,
        glibc,
    )


def target_for(system: str, machine: str, python: str, libc: str, glibc: str) -> Target:
    """The target for a system (`sys.platform`), machine, CPython X.Y and C library."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    if system != "linux" or machine not in _PYTRITON_SHA256:
        raise LocalEndpointError(
            f"the local endpoint runs tritonserver from the nvidia-pytriton wheel, which is "
            f"built for Linux on x86_64 or aarch64; this is {system} on {machine}",
            where=_WHERE,
            fix="run deploy serve on a Linux x86_64 machine (or in a Linux container); "
            "`deploy up` to AWS does not need it",
        )
    found = tuple(int(part) for part in glibc.split(".")[:2] if part.isdigit())
    if libc != "glibc" or found < _PYTRITON_GLIBC:
        needed = ".".join(map(str, _PYTRITON_GLIBC))
        raise LocalEndpointError(
            f"tritonserver from nvidia-pytriton {PYTRITON_VERSION} needs glibc {needed} or "
            f"newer; this machine has {libc or 'another C library'} {glibc}".rstrip(),
            where=_WHERE,
            fix="run deploy serve on a newer Linux (Ubuntu 22.04, Debian 12 or later)",
        )
    if (python, machine) not in _NUMPY_SHA256:
        supported = sorted({version for version, _ in _NUMPY_SHA256})
        raise LocalEndpointError(
            f"the python-backend stub of tritonserver needs numpy 1.x (with numpy 2 its "
            f"outputs are empty), and numpy {NUMPY_VERSION} has no wheel for CPython {python}",
            where=_WHERE,
            fix=f"run deploy in a virtualenv of CPython {' or '.join(supported)}",
        )
    return Target(machine, python)


def cached(target: Target) -> CachedTriton:
    base = cache_dir()
    return CachedTriton(
        root=base / f"nvidia-pytriton-{PYTRITON_VERSION}-{target.machine}/pytriton/tritonserver",
        stub_site=base / f"stub-numpy-{NUMPY_VERSION}-cp{target.python.replace('.', '')}-"
        f"{target.machine}",
    )


def _unpacked_folder(cache: CachedTriton, wheel: PinnedWheel) -> Path:
    return cache.root.parent.parent if wheel.project == "nvidia-pytriton" else cache.stub_site


def is_cached(target: Target) -> bool:
    cache = cached(target)
    try:
        return all(_unpacked_folder(cache, wheel).is_dir() for wheel in target.wheels)
    except OSError:  # a folder on the way this user may not enter: named when written to
        return False


def wheels_folder() -> Path | None:
    """The folder `DEPLOY_TRITON_WHEELS` names, if set."""
    value = os.environ.get(WHEELS_ENV)
    return Path(value).expanduser() if value else None


def download_command(target: Target, dest: str = "triton-wheels") -> str:
    """A pip command, for a machine with an index, that downloads the wheels this one needs."""
    wheels = " ".join(f"{wheel.project}=={wheel.version}" for wheel in target.wheels)
    return (
        f"pip download --no-deps --only-binary=:all: --implementation cp "
        f"--python-version {target.python} --platform manylinux_2_35_{target.machine} "
        f"--platform manylinux2014_{target.machine} --dest {dest} {wheels}"
    )


def ensure_cached(
    *, source: Path | None = None, progress: TextIO | None = None, allow_fetch: bool = True
) -> CachedTriton:
    """The cached tritonserver and stub site, fetched (or taken from `source`) if missing.

    `source` (else `DEPLOY_TRITON_WHEELS`) is a folder holding the wheel files;
    without one they are downloaded with pip. Progress lines go to `progress`
    (default stderr)."""
    target = this_target()
    cache = cached(target)
    if is_cached(target):
        return cache
    source = source or wheels_folder()
    if not allow_fetch:
        raise LocalEndpointError(
            f"tritonserver (nvidia-pytriton {PYTRITON_VERSION}) is not in the cache",
            where=str(cache_dir()),
            fix="run `deploy fetch-triton`",
        )
    out = progress or sys.stderr
    base = cache_dir()
    with _locked(base / ".lock"):
        if is_cached(target):  # another process fetched it while this one waited
            return cache
        missing = [w for w in target.wheels if not _unpacked_folder(cache, w).is_dir()]
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=base) as scratch:
            files = (
                _from_folder(source, missing, target)
                if source is not None
                else _download(missing, target, Path(scratch), out)
            )
            for wheel, path in zip(missing, files, strict=True):
                verify(path, wheel)
                unpack(path, wheel, _unpacked_folder(cache, wheel))
    return cache


def _locked(path: Path) -> contextlib.AbstractContextManager[None]:
    return locked(path, LocalEndpointError)


def _from_folder(source: Path, wheels: list[PinnedWheel], target: Target) -> list[Path]:
    files = [source / wheel.filename for wheel in wheels]
    absent = [path.name for path in files if not path.is_file()]
    if absent:
        raise LocalEndpointError(
            f"{', '.join(absent)} not found in the wheel folder",
            where=f"{source} ({WHEELS_ENV} or --from)",
            fix=f"on a machine with a package index run `{download_command(target)}` "
            f"and copy the files into {source}",
        )
    return files


def _download(wheels: list[PinnedWheel], target: Target, folder: Path, out: TextIO) -> list[Path]:
    requirements = folder / "requirements.txt"
    requirements.write_text("".join(f"{w.requirement}\n" for w in wheels), encoding="utf-8")
    megabytes = sum(_MEGABYTES.get(w.project, 0) for w in wheels)
    names = ", ".join(f"{w.project} {w.version}" for w in wheels)
    print(
        f"deploy: fetching tritonserver for the local endpoint, once: {names} "
        f"(about {megabytes} MB) into {cache_dir()} ...",
        file=out,
        flush=True,
    )
    started = time.monotonic()
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-input",
        "--no-deps",
        "--only-binary=:all:",
        "--progress-bar",
        "off",
        "--retries",
        "2",
        "--require-hashes",
        "--dest",
        str(folder),
        "-r",
        str(requirements),
    ]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_FETCH_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _offline(target, f"pip did not finish within {_FETCH_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        output = done.stdout + done.stderr
        if "No module named pip" in output:
            raise LocalEndpointError(
                "pip is not installed in this Python, and the wheels are fetched with it",
                where=sys.executable,
                fix=f"run `{sys.executable} -m ensurepip`, or set {WHEELS_ENV} to a folder "
                f"holding the wheels (`{download_command(target)}` on another machine)",
            )
        if "THESE PACKAGES DO NOT MATCH THE HASHES" in output:
            raise LocalEndpointError(
                f"the package index served files whose sha256 is not the one pinned: {names}",
                where="pip download (the configured package index)",
                fix="check the index or mirror that pip uses (pip config list); "
                "the pinned files are those on pypi.org",
            )
        tail = "\n".join(output.strip().splitlines()[-4:])
        raise _offline(target, f"pip could not download {names}:\n{tail}")
    print(f"deploy: fetched in {time.monotonic() - started:.0f} s", file=out, flush=True)
    return [folder / wheel.filename for wheel in wheels]


def _offline(target: Target, what: str) -> LocalEndpointError:
    return LocalEndpointError(
        what,
        where="pip download (the package index, or the proxy that pip uses)",
        fix="check the network, or pip's index and proxy settings (pip config list; "
        "HTTPS_PROXY); on a machine without one, run "
        f"`{download_command(target)}` where there is one, copy the folder here and "
        f"run `deploy fetch-triton --from triton-wheels` (or set {WHEELS_ENV})",
    )


def verify(path: Path, wheel: PinnedWheel) -> None:
    """Raise unless `path` has the pinned sha256."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    if digest.hexdigest() != wheel.sha256:
        raise LocalEndpointError(
            f"sha256 {digest.hexdigest()} is not the pinned {wheel.sha256} of "
            f"{wheel.project} {wheel.version}",
            where=str(path),
            fix=f"replace the file with {wheel.filename} as published on pypi.org",
        )


def unpack(path: Path, wheel: PinnedWheel, folder: Path) -> None:
    """Extract the kept parts of the wheel into `folder`, which appears complete or not at all.

    Members are checked to stay inside `folder`; the mode bits the wheel
    records (executables) are kept, masked by the umask."""
    umask = os.umask(0)
    os.umask(umask)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = info.filename
                if info.is_dir() or not name.startswith(wheel.unpacked):
                    continue
                destination = staging / name
                if ".." in Path(name).parts or Path(name).is_absolute():
                    raise LocalEndpointError(
                        f"member {name!r} leaves the folder", where=str(path), fix="re-fetch it"
                    )
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as member, destination.open("wb") as handle:
                    shutil.copyfileobj(member, handle, 1 << 20)
                recorded = (info.external_attr >> 16) & 0o777
                executable = recorded & 0o111 or name.endswith(".so") or "/bin/" in name
                destination.chmod((0o777 if executable else 0o666) & ~umask)
        staging.chmod(0o777 & ~umask)
        try:
            staging.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
            shutil.rmtree(staging)  # another process put a complete copy in place first
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
