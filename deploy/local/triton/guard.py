"""Keeps tritonserver's SageMaker port to the endpoint's own front end.

Triton 2.51 binds the SageMaker port to 0.0.0.0 (it has no address option
for it) and that port loads any local folder as a model, so it must not be
reachable by anyone but the front end. `triton_guard.c`, preloaded into
tritonserver, moves that bind to 127.0.0.1 and closes every connection to
the port that does not come from the front end's process (or, with
`clients="user"`, from a process of the same user: benchmarks that call
Triton directly). It also keeps the python backend's shared-memory regions in
/dev/shm, which hold request and response tensors, to this user (mode 0600:
the backend asks for 0644 and re-applies it past the umask). It is compiled
once per source version with the system C compiler (`$CC`, else `cc`) into
`$XDG_CACHE_HOME/deploy/`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path
from typing import Literal

from deploy.errors import LocalEndpointError

Clients = Literal["endpoint", "user"]
CLIENTS: tuple[Clients, ...] = ("endpoint", "user")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deploy"


def guard_library() -> Path:
    """The compiled guard library (built on first use, then reused)."""
    source = resources.files("deploy.local.triton").joinpath("triton_guard.c").read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    cache = _cache_dir()
    library = cache / f"triton-guard-{digest}.so"
    if library.is_file():
        return library
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        raise LocalEndpointError(
            f"no C compiler ({compiler!r}) to build the library that keeps tritonserver's "
            "port to the front end",
            where="local endpoint",
            fix="install one (e.g. `apt-get install gcc`) or point $CC at one",
        )
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        source_path = Path(scratch) / "triton_guard.c"
        source_path.write_bytes(source)
        built = Path(scratch) / library.name
        result = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(source_path), "-ldl"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise LocalEndpointError(
                f"building the tritonserver port guard failed: {result.stderr.strip()}",
                where=f"{compiler} (deploy/local/triton/triton_guard.c)",
                fix="check the C compiler ($CC) and its headers (libc6-dev)",
            )
        built.replace(library)  # atomic: concurrent builds end with one complete file
    return library


def guard_environment(
    port: int, *, clients: Clients = "endpoint", base: dict[str, str] | None = None
) -> dict[str, str]:
    """Variables that load the guard into tritonserver for `port`.

    `clients="endpoint"` admits only this process (where the front end runs).
    """
    if clients not in CLIENTS:
        raise LocalEndpointError(
            f"unknown Triton client policy {clients!r}",
            where="triton clients",
            fix=f"use one of {', '.join(CLIENTS)}",
        )
    preload = [str(guard_library())]
    if base and base.get("LD_PRELOAD"):
        preload.append(base["LD_PRELOAD"])
    return {
        "LD_PRELOAD": " ".join(preload),
        "DEPLOY_GUARD_PORT": str(port),
        "DEPLOY_GUARD_CLIENT_PID": str(os.getpid()) if clients == "endpoint" else "0",
    }
