"""Calls a python model's `auto_complete_config` the way the python backend's stub does.

Run as a script by `deploy.repository.autocomplete` (never imported):

    python -E -s -B autocomplete_stub.py MODEL_PY VERSION CONFIG_JSON RESULT_JSON

Like triton-inference-server/python_backend `src/pb_stub.cc`: append the
version folder and the model folder to `sys.path`, import `<version>.model`,
hand `TritonPythonModel.auto_complete_config` a `pb_utils.ModelConfig` built
from the config's JSON form, and require a `ModelConfig` back. The result
file gets `{"config": ...}` or `{"error": ...}`, plus `absent`: the modules
the model imports that this interpreter lacks, replaced by inert stand-ins so
that a model importing torch can still state its inputs and outputs.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any

ABSENT: list[str] = []


class _AbsentMeta(type):
    """Classes standing in for anything reached through a missing module."""

    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _absent(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> type:
        return _absent(f"{cls.__qualname__}()")

    def __getitem__(cls, key: Any) -> type:
        return _absent(f"{cls.__qualname__}[]")

    def __iter__(cls) -> Any:
        return iter(())


def _absent(name: str) -> type:
    return _AbsentMeta(name, (), {})


class _AbsentModule(types.ModuleType):
    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _absent(f"{self.__name__}.{name}")


class _AbsentLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _AbsentFinder(importlib.abc.MetaPathFinder):
    """Last on `sys.meta_path`: only modules no other finder knows reach it.

    It stands in only for what the model's own files import: libraries that
    probe for optional modules (`try: import msvcrt`) must still see them fail.
    """

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if "." in fullname and top not in ABSENT:
            return None  # a missing submodule of a real package fails as usual
        if top in sys.stdlib_module_names or not self._imported_by_the_model():
            return None
        if top not in ABSENT:
            ABSENT.append(top)
        return importlib.util.spec_from_loader(fullname, _AbsentLoader(), is_package=True)

    def _imported_by_the_model(self) -> bool:
        frame: types.FrameType | None = sys._getframe(2)
        while frame is not None and "importlib" in frame.f_code.co_filename:
            frame = frame.f_back  # the import machinery, and importlib.import_module
        if frame is None:
            return False
        return Path(frame.f_code.co_filename).resolve().is_relative_to(self.model_dir)


def _complete(model_py: Path, version: str, config_json: str) -> dict[str, Any]:
    here = str(Path(__file__).resolve().parent)
    utils = importlib.import_module("triton_python_backend_utils")
    sys.path.remove(here)  # the model must not import our files by accident
    # As the backend's stub: the folder of model.py, i.e. the version folder.
    utils.__dict__["_model_dir"] = str(model_py.parent)
    sys.path.append(str(model_py.parent))
    sys.path.append(str(model_py.parent.parent))
    sys.meta_path.append(_AbsentFinder(model_py.resolve().parent.parent))
    module = importlib.import_module(f"{version}.{model_py.stem}")
    model_class = getattr(module, "TritonPythonModel", None)
    if model_class is None:
        raise AttributeError(f"{model_py.name} defines no class TritonPythonModel")
    config = utils.ModelConfig(config_json)
    if hasattr(model_class, "auto_complete_config"):
        config = model_class.auto_complete_config(config)
    if not isinstance(config, utils.ModelConfig):
        raise TypeError("auto_complete_config must return a valid pb_utils.ModelConfig object")
    document: dict[str, Any] = config.as_dict()
    json.dumps(document)  # fails here, not in the parent, if it holds non-JSON values
    return document


def main(argv: list[str]) -> int:
    model_py, version, config_path, result_path = argv
    result: dict[str, Any]
    code = 0
    try:
        config_json = Path(config_path).read_text(encoding="utf-8")
        result = {"config": _complete(Path(model_py), version, config_json)}
    except BaseException as exc:  # the model's code may raise anything, SystemExit included
        frames = traceback.extract_tb(exc.__traceback__)
        where = next(
            (
                f"{Path(f.filename).name}:{f.lineno}"
                for f in reversed(frames)
                if Path(f.filename).resolve().is_relative_to(Path(model_py).resolve().parent.parent)
            ),
            "",
        )
        result = {"error": f"{type(exc).__name__}: {exc}", "where": where}
        code = 1
    result["absent"] = ABSENT
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")
    return code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # threads the model started must not keep the process alive
