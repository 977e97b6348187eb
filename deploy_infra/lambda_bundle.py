"""The front door's Lambda asset: `deploy_handlers/` and the wheels it imports, built for Lambda.

The handler imports msgspec and pybase64 (`deploy_handlers/front_door/fast_json.py`,
`request.py`), compiled extensions: the asset must hold their builds for the
function's runtime and architecture (CPython 3.12, x86_64 manylinux), whatever
machine synthesizes. Each is pinned below to one wheel file (version and
sha256). pip installs them into the asset folder with `--platform` and
`--only-binary=:all:` (never a build from source) and `--no-index`, from a
wheel folder:

- `DEPLOY_LAMBDA_WHEELS`, if set, names a folder holding the wheel files (for
  a machine without a package index: fetch them elsewhere with
  `download_command()` and copy them there);
- else `$XDG_CACHE_HOME/deploy/lambda-wheels/`, filled once from the package
  index by `pip download --require-hashes` (pip reads the user's index, proxy
  and certificate settings).

pip checks every file against its pinned hash (`--require-hashes`) in both
steps. The asset folder is built once per content (the handlers' files and
the pins) as `$XDG_CACHE_HOME/deploy/lambda-assets/<digest>/`, under a
temporary name then renamed into place, so a folder that exists is complete;
a lock keeps two synths from building it twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deploy.cache_lock import locked
from deploy_infra.errors import InfraConfigError

HANDLERS_DIR = Path(__file__).resolve().parents[1] / "deploy_handlers"
WHEELS_ENV = "DEPLOY_LAMBDA_WHEELS"
PYTHON = "3.12"  # the function's runtime (lambda_.Runtime.PYTHON_3_12)
ARCHITECTURE = "x86_64"  # the function's architecture (lambda_.Architecture.X86_64)
MEMORY_MB = 1769  # one full vCPU: why, in deploy_infra/constructs/front_door.py
VCPU_MB = 1769  # Lambda gives one vCPU per 1,769 MB, a share of one below it
# glibc malloc settings in the function's environment. A 5 MB v2 JSON request makes
# buffers of several MB (the text, the packed tensor, the answer); by default each
# comes from fresh mmap'd pages that fault in and go back to the system on every
# request. Kept in the heap instead, the JSON path takes about 5 ms (15 %) less at
# 1,769 MB (bench/front_door.py runs under the same settings). Memory the function
# has reserved anyway: freed memory is kept up to 256 MiB.
MALLOC_ENVIRONMENT = {
    "MALLOC_MMAP_THRESHOLD_": str(64 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
}
_PLATFORM = f"manylinux2014_{ARCHITECTURE}"  # glibc 2.17: Amazon Linux 2023 runs it
_PIP_TIMEOUT_S = 600.0
_WHERE = "the front door's Lambda asset"


@dataclass(frozen=True)
class PinnedWheel:
    project: str
    version: str
    filename: str
    sha256: str  # of the file on pypi.org

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version} --hash=sha256:{self.sha256}"


WHEELS = (
    PinnedWheel(
        "msgspec",
        "0.22.0",
        "msgspec-0.22.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64"
        ".manylinux_2_28_x86_64.whl",
        "99c401861c5bb3a57f7d6423ea7ed4352cd57aa3f04f4fbe9f3e3e4564a10f08",
    ),
    PinnedWheel(
        "pybase64",
        "1.5.1",
        "pybase64-1.5.1-cp312-cp312-manylinux1_x86_64.manylinux2014_x86_64"
        ".manylinux_2_17_x86_64.manylinux_2_5_x86_64.whl",
        "c212d02fd072c5845d39b4699eb65efa827b79a5cf7fecc9f468f8cad2b8540f",
    ),
)


def _target_options() -> list[str]:
    tag = "cp" + PYTHON.replace(".", "")
    return [
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        _PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        PYTHON,
        "--abi",
        tag,
        "--require-hashes",
    ]


def download_command(dest: str = "lambda-wheels") -> str:
    """A pip command, for a machine with an index, that downloads the pinned wheels."""
    pins = " ".join(f"{wheel.project}=={wheel.version}" for wheel in WHEELS)
    options = " ".join(o for o in _target_options() if o != "--require-hashes")
    return f"pip download {options} --dest {dest} {pins}"


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/deploy` (default `~/.cache/deploy`)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deploy"


def front_door_asset() -> Path:
    """The folder to give `lambda_.Code.from_asset`: the handlers and the pinned wheels."""
    folder = cache_root() / "lambda-assets" / _digest()
    if folder.is_dir():
        return folder
    with _locked(cache_root() / "lambda-assets" / ".lock"):
        if folder.is_dir():  # another synth built it while this one waited
            return folder
        wheels = wheels_folder()
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            _pip(
                "install",
                "--no-index",
                "--find-links",
                str(wheels),
                "--no-compile",
                "--target",
                str(staging),
                requirements=staging.parent,
            )
            shutil.rmtree(staging / "bin", ignore_errors=True)  # console scripts: not imported
            shutil.copytree(
                HANDLERS_DIR,
                staging,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
            staging.chmod(0o755)
            staging.rename(folder)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return folder


def _digest() -> str:
    """What the asset is built from: the handlers' files and this recipe (pins, target)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(HANDLERS_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(HANDLERS_DIR).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def wheels_folder() -> Path:
    """The folder holding every pinned wheel file (the cache, filled from the index once)."""
    given = os.environ.get(WHEELS_ENV)
    if given:
        folder = Path(given).expanduser()
        absent = [w.filename for w in WHEELS if not (folder / w.filename).is_file()]
        if absent:
            raise InfraConfigError(
                f"{', '.join(absent)} not found in the wheel folder",
                where=f"{folder} ({WHEELS_ENV})",
                fix=f"on a machine with a package index run `{download_command()}` "
                f"and copy the files into {folder}",
            )
        return folder
    folder = cache_root() / "lambda-wheels"
    if any(not (folder / w.filename).is_file() for w in WHEELS):
        folder.mkdir(parents=True, exist_ok=True)
        _pip("download", "--dest", str(folder), requirements=folder)
    return folder


def _pip(*args: str, requirements: Path) -> None:
    """Run pip with the pinned requirements and the Lambda's target options."""
    with tempfile.NamedTemporaryFile(
        "w", suffix=".txt", prefix=".requirements-", dir=requirements, encoding="utf-8"
    ) as pins:
        pins.write("".join(f"{wheel.requirement}\n" for wheel in WHEELS))
        pins.flush()
        command = [
            sys.executable,
            "-m",
            "pip",
            args[0],
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
            *_target_options(),
            *args[1:],
            "-r",
            pins.name,
        ]
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_PIP_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise _failed(f"pip {args[0]} did not finish within {_PIP_TIMEOUT_S:g} s") from None
    if done.returncode == 0:
        return
    output = done.stdout + done.stderr
    if "No module named pip" in output:
        raise InfraConfigError(
            "pip is not installed in this Python; it installs the front door's wheels",
            where=sys.executable,
            fix=f"run `{sys.executable} -m ensurepip`",
        )
    if "THESE PACKAGES DO NOT MATCH THE HASHES" in output:
        raise InfraConfigError(
            "a wheel's sha256 is not the one pinned in deploy_infra/lambda_bundle.py",
            where=f"{_WHERE} (pip {args[0]})",
            fix="check the index or mirror that pip uses (pip config list), or the files in "
            f"{WHEELS_ENV}; the pinned files are those on pypi.org",
        )
    tail = "\n".join(output.strip().splitlines()[-4:])
    raise _failed(f"pip {args[0]} failed:\n{tail}")


def _failed(what: str) -> InfraConfigError:
    return InfraConfigError(
        what,
        where=_WHERE,
        fix="check the network, or pip's index and proxy settings (pip config list); on a "
        f"machine without an index, run `{download_command()}` where there is one, and set "
        f"{WHEELS_ENV} to the folder",
    )


def _locked(path: Path) -> contextlib.AbstractContextManager[None]:
    return locked(path, InfraConfigError)
