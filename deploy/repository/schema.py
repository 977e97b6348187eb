"""Triton's model configuration schema (`model_config.proto`) as protobuf classes.

tritonclient ships the generated `model_config_pb2` inside `tritonclient.grpc`,
whose package `__init__` imports grpcio for its gRPC client. Only the schema is
needed here, so the module is loaded from its file with protobuf alone, and
`tritonclient` is installed without its `[grpc]`/`[http]` extras. It is
registered under its own name, so a later `import tritonclient.grpc` (where
grpcio is installed) reuses it instead of registering the schema twice.

    from deploy.repository.schema import model_config_pb2 as pb
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["model_config_pb2"]

_MODULE = "tritonclient.grpc.model_config_pb2"


def _load() -> ModuleType:
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("tritonclient")
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'tritonclient'", name="tritonclient")
    path = Path(next(iter(package.submodule_search_locations))) / "grpc" / "model_config_pb2.py"
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {_MODULE!r} ({path})", name="tritonclient")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_MODULE]
        raise
    return module


if TYPE_CHECKING:  # for mypy: the same module (untyped, so Any)
    from tritonclient.grpc import model_config_pb2
else:
    model_config_pb2 = _load()
