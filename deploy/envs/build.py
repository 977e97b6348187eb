"""Execution environments for python-backend models, built for the SageMaker image's Python.

`build_environment(requirements, out, python="3.10")` installs the requirements
(specifiers only: `deploy.envs.requirements`) with pip, from the user's index
and in a bare environment (`deploy.envs.installer`), for the image's platform
(CPython X.Y, manylinux x86_64 wheels up to the image's glibc,
`--only-binary=:all:`, never this machine's own platform), plus `numpy<2`
(the python backend's stub is built against numpy 1.x), and packs them in the
layout the python backend's `EXECUTION_ENV_PATH` takes:

    bin/activate                          sourced by the backend before its stub starts
    bin/python3                           what the stub's interpreter finds first on PATH
    pyvenv.cfg                            ...which makes this folder its sys.prefix
    lib/pythonX.Y/site-packages/...       the installed wheels
    deploy-env.json                       what was asked for and what was installed

The stub embeds the image's own Python: it looks for `python3` on PATH (the
activate script puts `bin/` first) and, finding `pyvenv.cfg` beside it, uses
this folder's site-packages instead of the system's (python_backend
`src/stub_launcher.cc` sources `bin/activate`; CPython `site.venv`). No
interpreter or standard library is shipped: they are the image's.

Archives are content-addressed: the key is a digest of the requirement lines,
the index, the Python version, the glibc level and this layout's format; a
built archive is kept in the cache folder under its key, so an unchanged
environment is copied, not rebuilt. The archive bytes are reproducible (sorted members, fixed
times and owners).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy._files import with_umask
from deploy.envs.installer import index_url, pip_install_command, redacted, run_pip
from deploy.envs.layout import site_packages, write_layout
from deploy.envs.requirements import RequirementsFile, require_specifiers
from deploy.errors import EnvBuildError

ENV_FORMAT = 1  # part of the content key: bump when the layout changes
NUMPY_CONSTRAINT = "numpy<2"  # the image's python-backend stub is built against numpy 1.x
METADATA = "deploy-env.json"
PIP_TIMEOUT_S = 900.0
_OLDEST_GLIBC_MINOR = 17  # manylinux2014
_PYTHON = re.compile(r"^3\.(\d{1,2})$")
_MISSING = re.compile(r"No matching distribution found for (\S+)")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+)")


@dataclass(frozen=True)
class BuiltEnvironment:
    path: Path
    key: str
    python: str
    platforms: tuple[str, ...]
    packages: tuple[str, ...]  # "name==version" installed
    reused: bool  # taken from the cache, not built

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "key": self.key,
            "python": self.python,
            "platform": self.platforms[0],
            "packages": list(self.packages),
            "reused": self.reused,
        }


def platform_tags(glibc: tuple[int, int]) -> tuple[str, ...]:
    """manylinux x86_64 tags from the image's glibc down to manylinux2014, newest first.

    pip does not expand a `--platform manylinux_2_X` to the older tags a
    system with that glibc also runs, so each is passed.
    """
    major, newest = glibc
    tags = [
        f"manylinux_{major}_{minor}_x86_64" for minor in range(newest, _OLDEST_GLIBC_MINOR - 1, -1)
    ]
    return (*tags, "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")


def environment_key(
    lines: tuple[str, ...], python: str, glibc: tuple[int, int], index: str = ""
) -> str:
    document = {
        "format": ENV_FORMAT,
        "python": python,
        "glibc": list(glibc),
        "requirements": sorted(lines),
        "constraints": [NUMPY_CONSTRAINT],
        "index": hashlib.sha256(index.encode()).hexdigest(),  # it may hold credentials
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def default_cache_dir() -> Path:
    configured = os.environ.get("DEPLOY_CACHE_DIR")
    if configured:
        return Path(configured) / "envs"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deploy" / "envs"


def cached_environment(
    requirements: Path,
    *,
    python: str,
    glibc: tuple[int, int] = (2, 35),
    cache_dir: Path | None = None,
    index: str | None = None,
) -> BuiltEnvironment:
    """The environment of `requirements` in the cache (built there when it is not).

    `index`: the package index's URL; None takes the `pip_index_url` setting,
    else PyPI. A requirements file never chooses it."""
    if not _PYTHON.match(python):
        raise EnvBuildError(
            f"--python {python!r} is not a Python 3 version",
            where=str(requirements),
            fix="pass the image's major.minor, e.g. --python 3.10 (24.09) or 3.12 (25.x)",
        )
    parsed = require_specifiers(requirements)
    chosen = index_url(index)
    lines = parsed.pip_lines()
    key = environment_key(lines, python, glibc, chosen)
    cache_root = cache_dir or default_cache_dir()
    cache = cache_root / f"{key}.tar.gz"
    platforms = platform_tags(glibc)
    reused = cache.is_file()
    if not reused:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="deploy-env-") as scratch:
            root = Path(scratch) / "env"
            _install(parsed, root, python, platforms, chosen, cache_root / "pip")
            _write_layout(root, python, key, lines, platforms)
            _atomic_bytes(cache, _pack(root))
    metadata = read_metadata(cache)
    return BuiltEnvironment(
        path=cache,
        key=key,
        python=python,
        platforms=platforms,
        packages=tuple(metadata.get("installed", [])),
        reused=reused,
    )


def build_environment(
    requirements: Path,
    out: Path,
    *,
    python: str,
    glibc: tuple[int, int] = (2, 35),
    cache_dir: Path | None = None,
    index: str | None = None,
) -> BuiltEnvironment:
    """Build (or take from the cache) the environment of `requirements` into `out`."""
    cached = cached_environment(
        requirements, python=python, glibc=glibc, cache_dir=cache_dir, index=index
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    if not (out.is_file() and _same_file(out, cached.path)):
        _atomic_bytes(out, cached.path.read_bytes())
    return dataclasses.replace(cached, path=out)


def read_metadata(archive: Path) -> dict[str, Any]:
    """`deploy-env.json` of a built environment archive ({} when it has none)."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(METADATA)
            if member is None:
                return {}
            document = json.loads(member.read())
    except (OSError, KeyError, tarfile.TarError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _install(
    parsed: RequirementsFile,
    root: Path,
    python: str,
    platforms: tuple[str, ...],
    index: str,
    pip_cache: Path,
) -> None:
    site = site_packages(root, python)
    site.mkdir(parents=True)
    work = root.parent
    # Hashed files list numpy themselves (deploy.envs.requirements checks it).
    numpy = () if parsed.hashed else ("numpy",)
    (work / "requirements.txt").write_text(
        "\n".join((*parsed.pip_lines(), *numpy)) + "\n", encoding="utf-8"
    )
    (work / "constraints.txt").write_text(NUMPY_CONSTRAINT + "\n", encoding="utf-8")
    command = pip_install_command(
        index=index,
        target=site,
        python=python,
        platforms=platforms,
        requirements=work / "requirements.txt",
        constraints=work / "constraints.txt",
        cache=pip_cache,
        hashed=parsed.hashed,
    )
    where = parsed.where
    try:
        done = run_pip(command, work=work, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EnvBuildError(
            f"pip did not finish within {PIP_TIMEOUT_S:g} s",
            where=where,
            fix=f"check that the package index {redacted(index)} is reachable "
            "(pip_index_url in deploy.toml, or --index-url)",
        ) from None
    if done.returncode != 0:
        raise _pip_error(done.stdout + done.stderr, Path(where), python, platforms, index)
    # Console scripts point at this machine's interpreter; caches are rebuilt there.
    shutil.rmtree(site / "bin", ignore_errors=True)
    for cached in sorted(site.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cached, ignore_errors=True)


def _pip_error(
    output: str, requirements: Path, python: str, platforms: tuple[str, ...], index: str
) -> EnvBuildError:
    target = f"CPython {python} on {platforms[0]} (or an older manylinux tag)"
    source = f"index {redacted(index)}"
    missing = _MISSING.search(output) or _NO_VERSION.search(output)
    if missing:
        return EnvBuildError(
            f"package {missing.group(1)} has no wheel for {target} on the {source} "
            "(source distributions are never built)",
            where=str(requirements),
            fix=f"pick a version of {missing.group(1)} that publishes a manylinux x86_64 wheel "
            f"for Python {python} (pip download --only-binary=:all: --python-version {python} "
            f"--platform {platforms[0]} shows what there is), or drop it",
        )
    if "THESE PACKAGES DO NOT MATCH THE HASHES" in output or "Hashes are required" in output:
        tail = "\n".join(line for line in output.strip().splitlines()[-8:])
        return EnvBuildError(
            f"pip refused a file whose hash the requirements do not list:\n{tail}",
            where=str(requirements),
            fix="check the --hash values (pip-compile --generate-hashes writes them for "
            "every dependency) and that the index serves the files they name",
        )
    tail = "\n".join(line for line in output.strip().splitlines()[-8:])
    return EnvBuildError(
        f"pip could not install the requirements for {target} from the {source}:\n{tail}",
        where=str(requirements),
        fix="fix the requirements (numpy is held below 2, as the image's stub needs), or the "
        "index (pip_index_url in deploy.toml, or --index-url)",
    )


def _write_layout(
    root: Path, python: str, key: str, lines: tuple[str, ...], platforms: tuple[str, ...]
) -> None:
    site = write_layout(root, python)
    installed = sorted(
        "{}=={}".format(*info.name[: -len(".dist-info")].rsplit("-", 1))
        for info in site.glob("*.dist-info")
    )
    document = {
        "format": ENV_FORMAT,
        "key": key,
        "python": python,
        "platforms": list(platforms),
        "requirements": list(lines),
        "constraints": [NUMPY_CONSTRAINT],
        "installed": installed,
    }
    (root / METADATA).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _pack(root: Path) -> bytes:
    """The folder as a reproducible .tar.gz, members at the archive root."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=6) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                continue  # the backend refuses links that leave the folder; wheels have none
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            executable = path.is_dir() or os.access(path, os.X_OK)
            info.mode = 0o755 if executable else 0o644
            if path.is_file():
                with path.open("rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def _atomic_bytes(path: Path, data: bytes) -> None:
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        with_umask(Path(name)).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(name).unlink()
        raise


def _same_file(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    return hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
