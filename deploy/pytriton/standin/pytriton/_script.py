"""Runs a PyTriton script under this stand-in and returns what it bound.

Used by `deploy bind` (in a separate process) and by the generated models
(inside the python backend). The script runs as `__main__` with `sys.argv`
set to the script and its arguments, with its folder first on `sys.path`
(after this stand-in) and as the working directory while it runs.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

from .triton import RECORDING, Recording


class ScriptExitError(Exception):
    """The script called `sys.exit()` with a failure status."""

    def __init__(self, code: object) -> None:
        super().__init__(f"the script exited with status {code!r}")
        self.code = code


@contextlib.contextmanager
def _as_main(script: Path, argv: list[str], module: types.ModuleType) -> Iterator[None]:
    saved_main = sys.modules.get("__main__")
    saved_argv = sys.argv
    saved_cwd = Path.cwd()
    folder = str(script.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(1 if sys.path and sys.path[0] == _STANDIN_ROOT else 0, folder)
    sys.modules["__main__"] = module
    sys.argv = [str(script), *argv]
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        else:
            sys.modules.pop("__main__", None)


_STANDIN_ROOT = str(Path(__file__).resolve().parent.parent)
# Modules the scripts ran in stay alive: their callables use the modules' globals.
_MODULES: list[types.ModuleType] = []


def run_script(script: Path, argv: list[str]) -> Recording:
    """Run `script` and return its recording (bindings, serve/run calls).

    Exceptions the script raises propagate; `sys.exit(0)` ends it normally,
    another status raises `ScriptExitError`.
    """
    script = script.resolve()
    RECORDING.clear()
    module = types.ModuleType("__main__")
    module.__file__ = str(script)
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    code = compile(script.read_bytes(), str(script), "exec")
    _MODULES.append(module)
    with _as_main(script, argv, module):
        try:
            exec(code, module.__dict__)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise ScriptExitError(exc.code) from None
    return Recording(list(RECORDING.bindings), list(RECORDING.calls))
