"""Where the tritonserver binary and its python backend live, and how to run them.

The binary comes from PyPI's `nvidia-pytriton` wheel, installed without its
dependencies (its `numpy<2` pin clashes with the rest of the project). It is
located with `importlib.util.find_spec` so `pytriton` itself is never imported.

The wheel's python-backend stub is built against numpy 1.x: with numpy 2 it
runs models but hands back empty output tensors (`binary_data_size: 0`), so
a folder with numpy<2 (the stub site) goes with it. `find_triton` takes the
two from this virtualenv when installed there (`pip install --no-deps
nvidia-pytriton==0.7.0` and numpy<2 in `<venv>/triton-stub-site`, as this
repository's Makefile does), else from the tool's cache, fetched on first use
(`deploy.local.triton.wheel`). The stub's embedded interpreter ignores
PYTHONPATH and puts its working directory first on `sys.path`: tritonserver
runs in an empty folder.

Python models see what the SageMaker image's Python has, the standard library
and numpy, and no more: `prepare_backends` writes an `image-python` folder in
the layout of an execution environment (`deploy.envs.layout`) whose
site-packages holds only the stub site's numpy, and its `bin` comes first on
tritonserver's PATH, so the stub's interpreter takes it as its prefix instead
of this machine's site-packages. A model with `EXECUTION_ENV_PATH` gets its
own environment the same way (the backend sources its `bin/activate`). The
generated adapters (torch, onnxruntime stand in for backends the image has)
append the entries of `DEPLOY_ADAPTER_PATH`, this virtualenv, to `sys.path`
themselves; tritonserver gets no PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deploy import box
from deploy.box.environment import scrubbed_environment
from deploy.errors import LocalEndpointError

STUB_SITE = "triton-stub-site"  # beside this virtualenv's site-packages (the Makefile's)
ADAPTER_PATH_ENV = "DEPLOY_ADAPTER_PATH"  # this virtualenv, for the generated adapters


@dataclass(frozen=True)
class TritonInstall:
    """Paths inside an unpacked nvidia-pytriton wheel, and the stub's numpy<2 folder."""

    root: Path  # <site-packages or cache>/pytriton/tritonserver
    stub_site: Path  # numpy<2 for the python-backend stub (linked into the image's Python)

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
    def libs(self) -> Path:
        return self.root.parent.parent / "nvidia_pytriton.libs"

    def missing(self) -> list[Path]:
        """The files tritonserver needs that are not there."""
        needed = (self.binary, self.python_backend / "libtriton_python.so", self.stub)
        return [path for path in (*needed, self.stub_site / "numpy") if not path.exists()]


def virtualenv_triton() -> TritonInstall | None:
    """nvidia-pytriton installed in this virtualenv beside its stub site, if complete."""
    spec = importlib.util.find_spec("pytriton")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        return None
    install = TritonInstall(Path(locations[0]) / "tritonserver", Path(sys.prefix) / STUB_SITE)
    return None if install.missing() else install


def find_triton(*, fetch: bool = True) -> TritonInstall:
    """Locate tritonserver: this virtualenv's install, else the cache (fetched if missing).

    `fetch=False` raises instead of downloading."""
    install = virtualenv_triton()
    if install is not None:
        return install
    from deploy.local.triton.wheel import ensure_cached

    cache = ensure_cached(allow_fetch=fetch)
    install = TritonInstall(cache.root, cache.stub_site)
    missing = install.missing()
    if missing:
        raise LocalEndpointError(
            f"{missing[0]} is missing from the cached tritonserver",
            where=str(cache.root.parent.parent),
            fix=f"remove {cache.root.parent.parent} and {cache.stub_site}, then run "
            "`deploy fetch-triton`",
        )
    return install


def prepare_runtime(*, source: Path | None = None) -> TritonInstall:
    """What the local endpoint needs before it starts, with the cheapest check first.

    The C compiler for the port guard is named before a download starts;
    then tritonserver is located, or fetched into the cache (from `source`, a
    folder of wheel files, when given)."""
    from deploy.local.triton.guard import guard_library

    guard_library()
    if source is not None:
        from deploy.local.triton.wheel import ensure_cached

        ensure_cached(source=source)
    return find_triton()


IMAGE_PYTHON = "image-python"  # beside the backends: what python models may import


def stub_working_directory(backends: Path) -> Path:
    """An empty folder for tritonserver to run in: the stub puts its cwd first on sys.path."""
    folder = backends.parent / "stub-cwd"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def image_python_bin(backends: Path) -> Path:
    """The folder to put first on PATH so python models see only the image's packages."""
    return backends.parent / IMAGE_PYTHON / "bin"


def prepare_image_python(install: TritonInstall, backends: Path) -> Path:
    """Write the image's Python (standard library + numpy<2) beside `backends`; its bin."""
    from deploy.envs.layout import write_layout

    root = image_python_bin(backends).parent
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    site = write_layout(root, version)
    for entry in install.stub_site.iterdir():
        if entry.name.startswith("numpy"):
            link = site / entry.name
            if not link.is_symlink():
                link.symlink_to(entry)
    return root / "bin"


def prepare_backends(install: TritonInstall, directory: Path) -> Path:
    """Build a private `--backend-directory` holding the python backend.

    The stub must sit next to `libtriton_python.so` and match the running
    Python; it is copied (not linked) because the backend resolves its own
    directory through the stub's real path. The image's Python is written
    beside it (`prepare_image_python`).
    """
    prepare_image_python(install, directory)
    python_dir = directory / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        link = python_dir / name
        if not link.exists():
            link.symlink_to(install.python_backend / name)
    # The real stub sits in `boxed/` with the backend's files; in its place, a
    # launcher that runs it in the box (deploy.box): python models are repository code.
    real_dir = python_dir / "boxed"
    real_dir.mkdir(exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        link = real_dir / name
        if not link.exists():
            link.symlink_to(install.python_backend / name)
    stub = real_dir / "triton_python_backend_stub"
    if not stub.exists() or stub.stat().st_size != install.stub.stat().st_size:
        partial = stub.with_suffix(".partial")
        shutil.copy2(install.stub, partial)
        partial.replace(stub)
    readable = [directory.parent, install.root, install.libs, install.stub_site]
    box.install_stub_launcher(
        real_dir / "launcher",
        stub,
        writable=[],  # the stub adds tritonserver's HOME and TMPDIR, and the model's folder
        readable=readable,
        limits=STUB_LIMITS,
    )
    # In the stub's place: the launcher of the activated environment's Python (a bundled
    # model's environment may be for another), else the one above.
    from deploy.local.triton.envs import install_stub_dispatch

    install_stub_dispatch(
        install, python_dir / "triton_python_backend_stub", real_dir / "launcher", readable=readable
    )
    return directory


# A python model instance: this machine's memory, 4 GiB files; no CPU-time cap (it serves).
STUB_LIMITS = box.Limits(
    cpu_s=None,
    data_bytes=os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
    file_bytes=4 << 30,
    open_files=4096,
)


def _home(backends: Path) -> Path:
    """tritonserver's HOME: a folder of its own, so `~/.aws` is not found through it."""
    folder = backends.parent / "home"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _tmp(backends: Path) -> Path:
    folder = backends.parent / "tmp"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def triton_environment(
    install: TritonInstall,
    extra: dict[str, str] | None = None,
    *,
    backends: Path | None = None,
) -> dict[str, str]:
    """The environment tritonserver and its python stubs need, and no more.

    An allow-list of this one (`deploy.box.environment`: no AWS_*, tokens,
    secrets or proxies), with HOME and TMPDIR beside `backends`. With
    `backends` (from `prepare_backends`), python models see only the image's
    packages.
    """
    if backends is not None:
        env = scrubbed_environment(home=_home(backends), tmp=_tmp(backends))
    else:
        scratch = Path(tempfile.mkdtemp(prefix="deploy-triton-"))
        env = scrubbed_environment(home=scratch, tmp=scratch)
    if backends is not None:
        env["PATH"] = os.pathsep.join([str(image_python_bin(backends)), env.get("PATH", "")])
    from deploy.local.triton.envs import library_dirs

    # Stubs of other Python versions (models whose environment is for one) need
    # their libpython too; the running Python's comes first.
    libraries = [str(Path(sys.base_prefix) / "lib"), str(install.libs), *library_dirs(install)]
    if env.get("LD_LIBRARY_PATH"):
        libraries.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libraries)
    # Models see the image's packages only: no PYTHONPATH (stubs of other Python
    # versions would read it). The adapters (torch, onnxruntime) and the local
    # Neuron fallback find this virtualenv through ADAPTER_PATH_ENV.
    paths = [sysconfig.get_paths()["purelib"]]
    if env.get("PYTHONPATH"):
        paths.append(env.pop("PYTHONPATH"))
    env[ADAPTER_PATH_ENV] = os.pathsep.join(paths)
    env["SAGEMAKER_MULTI_MODEL"] = "true"
    env.update(MALLOC_ENVIRONMENT)
    env.update(extra or {})
    return env


# glibc keeps request-sized buffers (a python stub copies every input it is handed
# into a new array) in the heap instead of mapping and zero-filling fresh pages for
# each call; freed memory is kept up to 256 MiB per arena.
MALLOC_ENVIRONMENT = {
    "MALLOC_MMAP_THRESHOLD_": str(64 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
}
