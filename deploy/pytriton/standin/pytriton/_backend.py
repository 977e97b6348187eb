"""The python-backend model that serves one callable bound by a PyTriton script.

`deploy bind` writes a `model.py` that subclasses `PyTritonModel` and names the
script, the model and the script's arguments. `initialize` re-runs the script
under this stand-in, picks the model's callable (instance i of a model bound
with a list of callables takes callable i) and gives it PyTriton's Triton
context; `execute` calls it as PyTriton does: with a list of requests (dicts
of numpy arrays: BYTES inputs as object arrays of bytes), expecting one dict
of numpy arrays per request. Outputs are cast to the config's datatypes. An
exception, `PyTritonUnrecoverableError` included, answers each request of the
call with a Triton error carrying its type and message (PyTriton would stop
its server on an unrecoverable error; an endpoint keeps serving).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ._context import inject_triton_context, triton_model_config
from ._script import run_script
from .exceptions import PyTritonUnrecoverableError
from .model_config.triton_model_config import TritonModelConfig
from .proxy.types import Request

# The python backend's own module (only inside Triton's stub).
pb_utils: Any = importlib.import_module("triton_python_backend_utils")


def instance_index(instance_name: str) -> int:
    """`<model>_<group>_<index>` → index (Triton's instance naming)."""
    tail = instance_name.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class PyTritonModel:
    """Serves `MODEL` bound by `SCRIPT` (relative to `FOLDER`, the version folder)."""

    FOLDER: ClassVar[Path] = Path()
    SCRIPT: ClassVar[str] = ""
    MODEL: ClassVar[str] = ""
    ARGV: ClassVar[list[str]] = []

    def initialize(self, args: dict[str, str]) -> None:
        self._logger = pb_utils.Logger
        self._event_loop: asyncio.AbstractEventLoop | None = None
        model_config = json.loads(args["model_config"])
        recording = run_script(self.FOLDER / self.SCRIPT, list(self.ARGV))
        matches = [b for b in recording.bindings if b.model_name == self.MODEL]
        if not matches:
            bound = ", ".join(repr(b.model_name) for b in recording.bindings) or "nothing"
            raise pb_utils.TritonModelException(
                f"{self.SCRIPT} did not bind model {self.MODEL!r} when run in the python "
                f"backend (it bound {bound}); run `deploy bind` on the script again"
            )
        binding = matches[0]
        index = instance_index(args.get("model_instance_name", "")) % len(binding.infer_funcs)
        self._func = binding.infer_funcs[index]
        self._config = triton_model_config(binding)
        inject_triton_context(binding, self._func, self._config)
        self._strict = binding.strict
        self._decoupled = bool(
            model_config.get("model_transaction_policy", {}).get("decoupled", False)
        )
        self._inputs = [tensor["name"] for tensor in model_config.get("input", [])]
        self._output_types = {
            tensor["name"]: pb_utils.triton_string_to_numpy(tensor["data_type"])
            for tensor in model_config.get("output", [])
        }
        declared = [spec.name for spec in self._config.inputs or []]
        if sorted(declared) != sorted(self._inputs):
            raise pb_utils.TritonModelException(
                f"{self.SCRIPT} now binds {self.MODEL!r} with inputs {declared}, but its "
                f"config.pbtxt has {self._inputs}; run `deploy bind` on the script again"
            )

    def execute(self, requests: list[Any]) -> list[Any] | None:
        wrapped = [self._request(request) for request in requests]
        if self._decoupled:
            self._execute_decoupled(requests, wrapped)
            return None
        try:
            results = list(self._results(wrapped))
            if len(results) != 1:
                raise ValueError(
                    f"the inference callable of {self.MODEL!r} gave {len(results)} results for "
                    "one call; only a decoupled model (ModelConfig(decoupled=True)) may give "
                    "several"
                )
            self._validate(results[0], len(requests))
            return [self._response(r, req) for r, req in zip(results[0], requests, strict=True)]
        except Exception as exc:
            error = self._error(exc)
            return [pb_utils.InferenceResponse(output_tensors=[], error=error) for _ in requests]

    def _results(self, wrapped: list[Request]) -> Iterator[Any]:
        """What the callable gives, as PyTriton takes it: a value, or each value a generator,
        coroutine or async generator yields."""
        result = self._func(wrapped)
        if inspect.isgenerator(result):
            yield from result
        elif inspect.iscoroutine(result):
            yield self._loop().run_until_complete(result)
        elif inspect.isasyncgen(result):
            loop = self._loop()
            while True:
                try:
                    yield loop.run_until_complete(result.__anext__())
                except StopAsyncIteration:
                    return
        else:
            yield result

    def _loop(self) -> asyncio.AbstractEventLoop:
        if self._event_loop is None:
            self._event_loop = asyncio.new_event_loop()
        return self._event_loop

    def _execute_decoupled(self, requests: list[Any], wrapped: list[Request]) -> None:
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        senders = [request.get_response_sender() for request in requests]
        try:
            for partial in self._results(wrapped):
                self._validate(partial, len(requests))
                for sender, result, request in zip(senders, partial, requests, strict=True):
                    sender.send(self._response(result, request))
        except Exception as exc:
            error = self._error(exc)
            for sender in senders:
                sender.send(pb_utils.InferenceResponse(output_tensors=[], error=error), flags=final)
            return
        for sender in senders:
            sender.send(flags=final)

    def finalize(self) -> None:
        if self._event_loop is not None:
            self._event_loop.close()

    def _request(self, request: Any) -> Request:
        data = {}
        for name in self._inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                data[name] = tensor.as_numpy()
        return Request(
            data=data,
            parameters=json.loads(request.parameters() or "{}"),
            requested_output_names=list(request.requested_output_names()),
        )

    def _response(self, result: dict[str, Any], request: Any) -> Any:
        requested = set(request.requested_output_names()) or set(self._output_types)
        tensors = [
            pb_utils.Tensor(name, np.asarray(value).astype(self._output_types[name]))
            for name, value in result.items()
            if name in requested and name in self._output_types
        ]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def _error(self, exc: Exception) -> Any:
        kind = type(exc).__name__
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if isinstance(exc, PyTritonUnrecoverableError):
            self._logger.log_error(f"{self.MODEL}: unrecoverable error (PyTriton would stop):")
        self._logger.log_error(f"{self.MODEL}: the inference callable raised:\n{detail}")
        return pb_utils.TritonError(f"{kind}: {exc}")

    def _validate(self, outputs: Any, requests: int) -> None:
        """PyTriton's checks of what the callable returned (`proxy/validators.py`)."""
        name = self.MODEL
        if not isinstance(outputs, list):
            raise ValueError(
                f"Outputs returned by `{name}` model callable must be list of response dicts "
                f"with numpy arrays. Got outputs={outputs} instead."
            )
        if len(outputs) != requests:
            raise ValueError(
                f"Number of outputs returned by `{name}` inference callable ({len(outputs)}) "
                f"does not match number of requests ({requests}) received from Triton."
            )
        specs = {spec.name: spec for spec in self._config.outputs or []}
        for response in outputs:
            if not isinstance(response, dict):
                raise ValueError(
                    f"Outputs returned by `{name}` model callable must be list of response "
                    f"dicts with numpy arrays. Got response={response} instead."
                )
            for key, value in response.items():
                _check_output(name, key, value)
                if self._strict:
                    _check_strict(self._config, specs, key, value)


def _check_output(model: str, name: Any, value: Any) -> None:
    if not isinstance(name, str):
        raise ValueError(f"Not all keys returned by `{model}` model callable are string")
    if not isinstance(value, np.ndarray):
        raise ValueError(f"Not all values returned by `{model}` model callable are numpy arrays")
    if value.dtype.kind not in "biufOSU":
        raise ValueError(
            "Only bool, numeric, string, unicode and object arrays are supported by Triton "
            f"(dtype.kind: biufOSU). Returned `{name}` for model `{model}` has "
            f"`{value.dtype.kind}` dtype.kind."
        )
    if value.dtype.kind == "O" and value.size:
        first = value.item(0)
        if isinstance(first, str):
            raise ValueError(
                "Use string/byte-string instead of object for passing string in NumPy array "
                f"from model `{model}`."
            )
        if not isinstance(first, bytes):
            raise ValueError(
                f"Only bytes as objects dtype are supported by PyTriton. Returned `{name}` "
                f"from `{model}` has `{type(first)}` type."
            )


def _check_strict(config: TritonModelConfig, specs: dict[str, Any], name: str, value: Any) -> None:
    model = config.model_name
    spec = specs.get(name)
    if spec is None:
        raise ValueError(
            f"Returned output `{name}` is not defined in model config for model `{model}`."
        )
    bytes_types = [bytes, object, np.bytes_, np.object_]
    if (value.dtype.kind not in "OSU" and not np.issubdtype(value.dtype, spec.dtype)) or (
        value.dtype.kind in "OSU" and spec.dtype not in bytes_types
    ):
        raise ValueError(
            f"Returned output `{name}` for model `{model}` has invalid type. "
            f"Returned: {value.dtype} ({value.dtype.kind}). Expected: {spec.dtype}."
        )
    dims = value.shape[1 if config.batching else 0 :]
    if len(dims) != len(spec.shape) or any(
        x != y != -1 for x, y in zip(dims, spec.shape, strict=False)
    ):
        raise ValueError(
            f"Returned output `{name}` for model `{model}` has invalid shapes. "
            f"Returned: {dims}. Expected: {spec.shape}."
        )
