"""Running a corpus model directly, without Triton: the answers the endpoint must match.

A reference takes the case's repository (with its stand-ins written), the
inputs the client sent and the request parameters (sequence flags), and
returns the outputs the model computes: TorchScript through `torch.jit.load`,
ONNX through onnxruntime, python models through the numpy code they run.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

Arrays = dict[str, np.ndarray]
Reference = Callable[[Path, Arrays, Mapping[str, Any]], Arrays]


def torchscript(
    relative: str,
    inputs: list[str],
    outputs: list[str],
    reshape: Mapping[str, tuple[int, ...]] | None = None,
) -> Reference:
    """Positional inputs and outputs, as Triton's PyTorch backend passes them.

    `reshape` gives the shape the model sees per input (the config's `reshape`).
    """

    def run(repo: Path, given: Arrays, _: Mapping[str, Any]) -> Arrays:
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(repo / relative))
        with torch.inference_mode():
            arrays = [
                given[name].reshape((reshape or {}).get(name, given[name].shape)) for name in inputs
            ]
            result = module(*[torch.from_numpy(np.array(array)) for array in arrays])
        values = list(result) if isinstance(result, tuple | list) else [result]
        return {name: value.numpy() for name, value in zip(outputs, values, strict=True)}

    return run


def onnx(relative: str, reshape: Mapping[str, tuple[int, ...]] | None = None) -> Reference:
    """onnxruntime on the model file; `reshape` gives the shape the model sees per input."""

    def run(repo: Path, given: Arrays, _: Mapping[str, Any]) -> Arrays:
        import onnxruntime

        session = onnxruntime.InferenceSession(
            str(repo / relative), providers=["CPUExecutionProvider"]
        )
        feed = {
            name: array.reshape((reshape or {}).get(name, array.shape))
            for name, array in given.items()
        }
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, feed), strict=True))

    return run


def onnx_strings(relative: str) -> Reference:
    """onnxruntime takes string tensors as `str` objects and returns `str` objects."""
    inner = onnx(relative)

    def run(repo: Path, given: Arrays, parameters: Mapping[str, Any]) -> Arrays:
        decoded = {
            name: np.vectorize(
                lambda v: v.decode() if isinstance(v, bytes) else v, otypes=[object]
            )(array)
            for name, array in given.items()
        }
        outputs = inner(repo, decoded, parameters)
        return {
            name: np.vectorize(lambda v: str(v).encode(), otypes=[object])(array)
            for name, array in outputs.items()
        }

    return run


def onnx_sequence(relative: str, controls: Mapping[str, str]) -> Reference:
    """A sequence model run with the control tensors Triton's sequence batcher supplies.

    `controls` maps the model's control input names to their kind (START, END,
    READY, CORRID), as its config's `sequence_batching.control_input` does.
    """
    inner = onnx(relative)

    def run(repo: Path, given: Arrays, parameters: Mapping[str, Any]) -> Arrays:
        batch = next(iter(given.values())).shape[0]
        values = {
            "START": int(bool(parameters.get("sequence_start"))),
            "END": int(bool(parameters.get("sequence_end"))),
            "READY": 1,
        }
        feed = dict(given)
        for name, kind in controls.items():
            if kind == "CORRID":
                feed[name] = np.full((batch, 1), int(parameters["sequence_id"]), np.uint64)
            else:
                feed[name] = np.full((batch, 1), values[kind], np.int32)
        return inner(repo, feed, parameters)

    return run


def numpy_function(function: Callable[[Arrays], Arrays]) -> Reference:
    """A python-backend model's `execute`, as the numpy it runs."""

    def run(_: Path, given: Arrays, __: Mapping[str, Any]) -> Arrays:
        return function(given)

    return run


def reshaped(inner: Reference, shapes: Mapping[str, tuple[int, ...]]) -> Reference:
    """Outputs reported with the config's dims (an output `reshape` in the config)."""

    def run(repo: Path, given: Arrays, parameters: Mapping[str, Any]) -> Arrays:
        outputs = inner(repo, given, parameters)
        return {
            name: value.reshape(shapes[name]) if name in shapes else value
            for name, value in outputs.items()
        }

    return run


def classification(
    inner: Reference, output: str, count: int, labels: str | None = None, *, batched: bool
) -> Reference:
    """Triton's classification extension: the top `count` scores as "score:index[:label]".

    A batching model gets `count` classes per batch entry; a model without
    batching (max_batch_size 0) gets `count` classes over the whole tensor.
    """

    def run(repo: Path, given: Arrays, parameters: Mapping[str, Any]) -> Arrays:
        scores = inner(repo, given, parameters)[output]
        names = (repo / labels).read_text().splitlines() if labels else None
        rows = scores.reshape(scores.shape[0], -1) if batched else scores.reshape(1, -1)
        result = []
        for row in rows:
            top = np.argsort(-row, kind="stable")[:count]
            result.append(
                [
                    f"{row[i]:f}:{i}".encode() + (f":{names[i]}".encode() if names else b"")
                    for i in top.tolist()
                ]
            )
        classes = np.array(result, dtype=object)
        return {output: classes if batched else classes[0]}

    return run
