"""`Triton` that records what is bound instead of starting a server (`pytriton.triton`).

Every `bind()` is appended to `RECORDING`; `serve()`, `run()` and `connect()`
return at once. `deploy bind` reads the recording after the script ran; the
python backend reads it to find the callable of the model it serves.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .decorators import TritonContext
from .model_config.model_config import ModelConfig
from .model_config.tensor import Tensor

_PACKAGE_DIR = str(Path(__file__).resolve().parent)


@dataclasses.dataclass
class Binding:
    """One `Triton.bind()` call as the script made it."""

    model_name: Any
    infer_funcs: list[Any]
    inputs: list[Any]
    outputs: list[Any]
    model_version: Any
    config: ModelConfig
    strict: bool
    context: TritonContext
    file: str
    line: int


@dataclasses.dataclass
class Call:
    """Where the script called `serve()` or `run()`."""

    method: str
    file: str
    line: int


@dataclasses.dataclass
class Recording:
    bindings: list[Binding] = dataclasses.field(default_factory=list)
    calls: list[Call] = dataclasses.field(default_factory=list)

    def clear(self) -> None:
        self.bindings.clear()
        self.calls.clear()


RECORDING = Recording()


def caller() -> tuple[str, int]:
    """File and line of the innermost frame outside this package (the script's call)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "", 0
    return frame.f_code.co_filename, frame.f_lineno


class TritonConfig:
    """Accepted and ignored: the endpoint's Triton is configured by the platform."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    @classmethod
    def from_env(cls) -> TritonConfig:
        return cls()

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class TritonLifecyclePolicy:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class TritonSecurityConfig:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class Triton:
    """Records `bind()` calls; starts nothing."""

    def __init__(self, *, config: Any = None, workspace: Any = None, **kwargs: Any) -> None:
        self._config = config
        self._triton_context = TritonContext()
        self._alive = True

    def __enter__(self) -> Triton:
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def bind(
        self,
        model_name: str,
        infer_func: Callable[..., Any] | Sequence[Callable[..., Any]],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int = 1,
        config: ModelConfig | None = None,
        strict: bool = False,
        trace_config: Any = None,
    ) -> None:
        file, line = caller()
        funcs = list(infer_func) if isinstance(infer_func, (list, tuple)) else [infer_func]
        RECORDING.bindings.append(
            Binding(
                model_name=model_name,
                infer_funcs=funcs,
                inputs=list(inputs),
                outputs=list(outputs),
                model_version=model_version,
                config=config if config is not None else ModelConfig(),
                strict=strict,
                context=self._triton_context,
                file=file,
                line=line,
            )
        )

    def _call(self, method: str) -> None:
        file, line = caller()
        RECORDING.calls.append(Call(method, file, line))

    def run(self) -> None:
        self._call("run")

    def serve(self, monitoring_period_s: float = 5.0) -> None:
        self._call("serve")

    def connect(self) -> None:
        return None

    def stop(self) -> bool:
        self._alive = False
        return True

    def is_alive(self) -> bool:
        return self._alive

    def is_connected(self) -> bool:
        return self._alive


class RemoteTriton(Triton):
    def __init__(self, url: str = "", **kwargs: Any) -> None:
        super().__init__()
