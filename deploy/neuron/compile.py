"""`deploy neuron compile`: trace a TorchScript model for Inferentia (inf1) with torch-neuron.

torch-neuron and neuron-cc come from the Neuron package repository, not PyPI
(PyPI's packages of those names are placeholders), and support torch 1.13 on
Python 3.7-3.10. Compiling needs no Inferentia device; running the result does.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from deploy._files import with_umask
from deploy.errors import NeuronError
from deploy.neuron.spec import TensorSpec, check_tensor_indices, check_torchscript, parse_tensor

NEURON_PIP_INDEX = "https://pip.repos.neuron.amazonaws.com"
INSTALL_HINT = (
    f'pip install "torch-neuron==1.13.1.*" "neuron-cc[tensorflow]" "torch==1.13.1" '
    f"--extra-index-url={NEURON_PIP_INDEX} (Python 3.7-3.10; see the AWS Neuron "
    "documentation, inf1 setup)"
)
_TORCH_DTYPES = {
    "BOOL": "bool",
    "UINT8": "uint8",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
}


def load_torch_neuron() -> Any:
    """The `torch_neuron` module, or a `NeuronError` that says where to get it."""
    try:
        return importlib.import_module("torch_neuron")
    except ImportError as exc:
        raise NeuronError(
            f"torch-neuron is not installed ({exc})",
            where="deploy neuron compile",
            fix=INSTALL_HINT,
        ) from None


def compile_model(
    model: Path,
    inputs: list[str],
    output: Path,
    *,
    batch_size: int = 1,
    force: bool = False,
) -> Path:
    """Trace `model` with example inputs of `inputs`' shapes; write `output` atomically."""
    specs = tuple(parse_tensor(text, option="--input") for text in inputs)
    check_tensor_indices(specs, option="--input")
    if batch_size < 0:
        raise NeuronError("batch size cannot be negative", where="--batch-size")
    if any(dim < 0 for spec in specs for dim in spec.dims):
        raise NeuronError(
            "Neuron compiles for fixed shapes: replace -1 dims with sizes",
            where="--input",
        )
    check_torchscript(model)
    if output.exists() and not force:
        raise NeuronError("output file exists", where=str(output), fix="pass --force to replace it")
    load_torch_neuron()  # registers torch.neuron
    torch: Any = importlib.import_module("torch")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(model), map_location="cpu")
    module.eval()
    example = [_example(torch, spec, batch_size) for spec in sorted(specs, key=lambda s: s.index)]
    try:
        compiled = torch.neuron.trace(module, example_inputs=example)
    except Exception as exc:  # neuron-cc reports unsupported operators this way
        raise NeuronError(
            f"torch.neuron.trace failed: {exc}",
            where=str(model),
            fix="check the model's operators against the Neuron supported-operator list",
        ) from exc
    output.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
    os.close(handle)
    try:
        torch.jit.save(compiled, partial)
        with_umask(Path(partial)).replace(output)
    finally:
        Path(partial).unlink(missing_ok=True)
    return output


def _example(torch: Any, spec: TensorSpec, batch_size: int) -> Any:
    shape = ((batch_size,) if batch_size else ()) + spec.dims
    return torch.zeros(shape, dtype=getattr(torch, _TORCH_DTYPES[spec.datatype]))
