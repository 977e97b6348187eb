"""Where the tritonserver binary and its python backend live, and how to run them.

The binary comes from PyPI's `nvidia-pytriton` wheel, installed without its
dependencies (its `numpy<2` pin clashes with the rest of the project). It is
located with `importlib.util.find_spec` so `pytriton` itself is never imported.

The wheel's python-backend stub is built against numpy 1.x: with numpy 2 it
runs models but hands back empty output tensors (`binary_data_size: 0`). The
stub's embedded interpreter ignores PYTHONPATH, but its `sys.path` starts
with the working directory, so tritonserver runs in a folder holding
numpy<2 (`<venv>/triton-stub-site`, written by `make install`). Models that
need the virtualenv's packages (the adapters: torch, onnxruntime) append
the PYTHONPATH entries to `sys.path` themselves.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from deploy.errors import LocalEndpointError

_INSTALL_FIX = 'run `make install` (it installs "nvidia-pytriton==0.7.0" with --no-deps)'
STUB_SITE = "triton-stub-site"


@dataclass(frozen=True)
class TritonInstall:
    """Paths inside the installed nvidia-pytriton wheel."""

    root: Path  # <site-packages>/pytriton/tritonserver

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def python_backend(self) -> Path:
        return self.root / "backends" / "python"

    @property
    def stub(self) -> Path:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return self.root / "python_backend_stubs" / version / "triton_python_backend_stub"

    @property
    def stub_site(self) -> Path:
        """tritonserver's working directory: numpy<2 for the python-backend stub."""
        return Path(sys.prefix) / STUB_SITE

    @property
    def libs(self) -> Path:
        return self.root.parent.parent / "nvidia_pytriton.libs"


def find_triton() -> TritonInstall:
    """Locate the tritonserver shipped in the nvidia-pytriton wheel."""
    spec = importlib.util.find_spec("pytriton")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise LocalEndpointError(
            "the nvidia-pytriton package (which ships tritonserver) is not installed",
            where="local endpoint",
            fix=_INSTALL_FIX,
        )
    install = TritonInstall(Path(locations[0]) / "tritonserver")
    for needed in (install.binary, install.python_backend / "libtriton_python.so", install.stub):
        if not needed.exists():
            raise LocalEndpointError(
                f"{needed} is missing from the nvidia-pytriton install",
                where="local endpoint",
                fix=_INSTALL_FIX,
            )
    if not (install.stub_site / "numpy").is_dir():
        raise LocalEndpointError(
            "numpy<2 for the python-backend stub is missing",
            where=str(install.stub_site),
            fix=f'run `make install` (pip install --target {install.stub_site} "numpy<2")',
        )
    return install


def prepare_backends(install: TritonInstall, directory: Path) -> Path:
    """Build a private `--backend-directory` holding the python backend.

    The stub must sit next to `libtriton_python.so` and match the running
    Python; it is copied (not linked) because the backend resolves its own
    directory through the stub's real path.
    """
    python_dir = directory / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        link = python_dir / name
        if not link.exists():
            link.symlink_to(install.python_backend / name)
    stub = python_dir / "triton_python_backend_stub"
    if not stub.exists() or stub.stat().st_size != install.stub.stat().st_size:
        partial = stub.with_suffix(".partial")
        shutil.copy2(install.stub, partial)
        partial.replace(stub)
    return directory


def triton_environment(
    install: TritonInstall, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment tritonserver and its python stubs need."""
    env = dict(os.environ)
    libraries = [str(Path(sys.base_prefix) / "lib"), str(install.libs)]
    if env.get("LD_LIBRARY_PATH"):
        libraries.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libraries)
    # The stub runs model.py with the system interpreter's paths; the models'
    # imports (numpy, torch, onnxruntime) live in this virtualenv.
    paths = [sysconfig.get_paths()["purelib"]]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["SAGEMAKER_MULTI_MODEL"] = "true"
    env.update(extra or {})
    return env
