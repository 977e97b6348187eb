"""Python models with an `EXECUTION_ENV_PATH` on the local endpoint.

Triton's python backend sources the environment's `bin/activate` and runs
the stub found in the model folder (`triton_python_backend_stub`) or its own
(python_backend `src/stub_launcher.cc`). An environment built for the
SageMaker image's Python (3.10 for 24.09) needs a stub of that version; the
nvidia-pytriton wheel ships one per Python version (3.8 to 3.13), and each
needs its `libpython3.X.so` and standard library, which an interpreter of
that version on this machine provides (`python3.X` on PATH, or a pyenv
install of it).

`prepare_environment_model` reads the environment's Python version (its
`pyvenv.cfg` or `deploy-env.json`; conda-pack archives name it in
`lib/python3.X`) and, when it is not this endpoint's, copies the wheel's stub
for it into the model folder. `library_dirs` lists the folders of the other
versions' `libpython` for tritonserver's LD_LIBRARY_PATH. A model bundled into
a BLS archive has no folder of its own to hold a stub: the backend's stub
(`install_stub_dispatch`) picks the one of the activated environment's Python.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from deploy import box
from deploy.errors import LocalEndpointError
from deploy.local.triton.install import STUB_LIMITS, TritonInstall

ENV_PARAMETER = "EXECUTION_ENV_PATH"
MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"
STUB = "triton_python_backend_stub"
BOXED_STUB_FOLDER = ".boxed-stub"  # in the model folder, beside the version folders
_LIB_PYTHON = re.compile(r"^lib/python(3\.\d+)/")
_VERSION = re.compile(r"^version\s*=\s*(3\.\d+)", re.MULTILINE)


def running_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def stub_versions(install: TritonInstall) -> list[str]:
    folder = install.root / "python_backend_stubs"
    return sorted(p.parent.name for p in folder.glob(f"*/{STUB}"))


def _interpreters(version: str) -> list[str]:
    """`python<version>` on PATH, then pyenv's installs of it (its shims may refuse)."""
    found = [shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found += [str(p) for p in sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True)]
    return [path for path in found if path]


@functools.cache
def _libdir(version: str) -> Path | None:
    """The folder of a `libpython<version>.so.1.0` of an interpreter of that version here."""
    query = "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"
    for interpreter in _interpreters(version):
        try:
            done = subprocess.run(
                [interpreter, "-c", query], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        folder = Path(done.stdout.strip())
        if done.returncode == 0 and (folder / f"libpython{version}.so.1.0").is_file():
            return folder
    return None


def library_dirs(install: TritonInstall) -> list[str]:
    """libpython folders of the other Python versions the wheel has stubs for."""
    return [
        str(folder)
        for version in stub_versions(install)
        if version != running_python() and (folder := _libdir(version)) is not None
    ]


def environment_python(env: Path) -> str | None:
    """The Python version an execution environment (archive or folder) is for."""
    if env.is_dir():
        cfg = env / "pyvenv.cfg"
        if cfg.is_file():
            found = _VERSION.search(cfg.read_text(encoding="utf-8", errors="replace"))
            if found:
                return found.group(1)
        versions = sorted(p.name[len("python") :] for p in (env / "lib").glob("python3.*"))
        return versions[0] if versions else None
    try:
        with tarfile.open(env, "r:*") as tar:
            for member in tar:
                name = member.name.removeprefix("./")
                if name == "deploy-env.json":
                    data = tar.extractfile(member)
                    if data is not None:
                        return str(json.loads(data.read())["python"])
                found = _LIB_PYTHON.match(name)
                if found:
                    return found.group(1)
    except (OSError, tarfile.TarError, ValueError, KeyError):
        return None
    return None


def prepare_environment_model(folder: Path, env_value: str, install: TritonInstall) -> None:
    """Give `folder` the stub of its environment's Python when that is not this one's."""
    env = Path(env_value.replace(MODEL_DIRECTORY, str(folder)))
    if not env.exists():
        raise LocalEndpointError(
            f"{ENV_PARAMETER} {env_value!r} names {env}, which the archive does not hold",
            where=f"model {folder.name}",
            fix="put the environment in the model folder and name it "
            f"{MODEL_DIRECTORY}/<file>.tar.gz (deploy package does this for requirements.txt)",
        )
    version = environment_python(env)
    if version is None or version == running_python():
        return
    stub = install.root / "python_backend_stubs" / version / STUB
    if not stub.is_file():
        raise LocalEndpointError(
            f"the environment {env.name} is for Python {version}, and this endpoint has no "
            f"python-backend stub for it (it has {', '.join(stub_versions(install))})",
            where=f"model {folder.name}",
            fix="build the environment for one of those versions (deploy env build --python)",
        )
    if _libdir(version) is None:
        raise LocalEndpointError(
            f"the environment {env.name} is for Python {version}, and no python{version} "
            "with a shared libpython is on PATH here to run its stub",
            where=f"model {folder.name}",
            fix=f"install Python {version} (with --enable-shared), or build the environment "
            f"for Python {running_python()} to try the model locally",
        )
    # The stub runs in the box like the backend's own (deploy.local.triton.install): the real
    # one sits beside a launcher, outside the version folder the model may write to.
    boxed = folder / BOXED_STUB_FOLDER
    boxed.mkdir(exist_ok=True)
    shutil.copy2(stub, boxed / STUB)
    box.install_stub_launcher(
        folder / STUB,
        boxed / STUB,
        writable=[],
        readable=[install.root, install.libs, *map(Path, library_dirs(install))],
        limits=STUB_LIMITS,
    )


def install_stub_dispatch(
    install: TritonInstall, launcher: Path, default: Path, *, readable: list[Path]
) -> None:
    """Write `launcher` (the backend's stub): the stub of the activated environment's Python.

    A model that a BLS model bundles loads from the files its caller passes,
    which Triton writes to a folder of its own, so no stub can be put beside
    it as `prepare_environment_model` does; the backend's own stub runs, after
    the backend sourced the environment's `bin/activate` (which sets
    VIRTUAL_ENV). `launcher` reads the `version` its `pyvenv.cfg` names (shell
    builtins only: the environment's `bin/` is first on PATH) and runs, in the
    box, the stub of that version when this machine has it and its libpython,
    else `default` (the running Python's launcher).
    """
    cases = []
    for version in stub_versions(install):
        if version == running_python() or _libdir(version) is None:
            continue
        versioned = default.parent / f"launcher-{version}"
        box.install_stub_launcher(
            versioned,
            install.root / "python_backend_stubs" / version / STUB,
            writable=[],
            readable=[*readable, *map(Path, library_dirs(install))],
            limits=STUB_LIMITS,
        )
        cases.append(f'  {version}) exec {shlex.quote(str(versioned))} "$@" ;;\n')
    script = (
        "#!/bin/sh\n"
        "# Runs the python-backend stub of the activated environment's Python "
        "(deploy.local.triton.envs); written by deploy.\n"
        "version=\n"
        'if [ -n "$VIRTUAL_ENV" ] && [ -f "$VIRTUAL_ENV/pyvenv.cfg" ]; then\n'
        "  while IFS= read -r line; do\n"
        '    case "$line" in "version = "3.*) version=${line#version = } ;; esac\n'
        '  done < "$VIRTUAL_ENV/pyvenv.cfg"\n'
        "fi\n"
        'case "$version" in\n' + "".join(cases) + "esac\n"
        f'exec {shlex.quote(str(default))} "$@"\n'
    )
    partial = launcher.with_name(launcher.name + ".partial")
    partial.write_text(script, encoding="utf-8")
    partial.chmod(0o755)
    partial.replace(launcher)
