"""What a generated Neuron model is made of: tensors, a NeuronCore range, batching.

Everything here is parsed and checked before `deploy neuron generate` writes a
byte, so bad input never leaves a half-written model folder behind.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from deploy.errors import NeuronError

# v2 datatypes a TorchScript model can take or return (BYTES and BF16 have no
# numpy/torch round trip through the python backend).
DATATYPES = frozenset({"BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"})
# python_backend's inferentia convention: `<name>__<index>`, index = position
# in the TorchScript forward() arguments (inputs) or results (outputs).
TENSOR_NAME = re.compile(r"^(?P<stem>[A-Za-z](?:[A-Za-z0-9]|_(?!_))*)__(?P<index>\d+)$")
CORE_RANGE = re.compile(r"^(?P<start>\d+):(?P<end>\d+)$")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: v2 datatype, dims without the batch dimension."""

    name: str
    datatype: str
    dims: tuple[int, ...]

    @property
    def index(self) -> int:
        match = TENSOR_NAME.match(self.name)
        if match is None:  # parse_tensor guarantees the form
            raise ValueError(self.name)
        return int(match["index"])


@dataclass(frozen=True)
class CoreRange:
    """An inclusive NeuronCore index range, `start:end` on the command line."""

    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start + 1

    def overlaps(self, other: CoreRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def __str__(self) -> str:
        return f"{self.start}:{self.end}"

    def visible_cores(self) -> str:
        """The `NEURON_RT_VISIBLE_CORES` form: `first-last`."""
        return f"{self.start}-{self.end}"


@dataclass(frozen=True)
class NeuronModelSpec:
    """Everything `deploy neuron generate` needs; build it with `build_spec`."""

    name: str
    compiled_model: Path
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    cores: CoreRange
    instances: int = 1
    threads_per_core: int = 1
    max_batch_size: int = 0
    dynamic_batching: bool = False
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    per_request: bool = False

    @property
    def batching(self) -> str:
        """`concat` (queued requests run as one batch) or `per-request`."""
        return "per-request" if self.per_request or self.max_batch_size == 0 else "concat"


def parse_tensor(text: str, *, option: str) -> TensorSpec:
    """Parse `NAME,DTYPE,DIMS` with DIMS like `3x32x32` (-1 for a variable dim)."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 3:
        raise NeuronError(
            f"expected NAME,DTYPE,DIMS, got {text!r}",
            where=option,
            fix="write e.g. INPUT__0,FP32,3x32x32",
        )
    name, datatype, dims_text = parts
    if TENSOR_NAME.match(name) is None:
        raise NeuronError(
            f"tensor name {name!r} does not follow <name>__<index>",
            where=option,
            fix="name tensors by their position in forward(), e.g. INPUT__0, INPUT__1",
        )
    datatype = datatype.upper()
    if datatype not in DATATYPES:
        raise NeuronError(
            f"datatype {datatype!r} of {name} is not supported",
            where=option,
            fix=f"use one of: {', '.join(sorted(DATATYPES))}",
        )
    try:
        dims = tuple(int(dim) for dim in dims_text.lower().split("x"))
    except ValueError:
        dims = ()
    if not dims or any(dim == 0 or dim < -1 for dim in dims):
        raise NeuronError(
            f"dims {dims_text!r} of {name} are not a list of positive sizes (or -1)",
            where=option,
            fix="write dims as e.g. 3x32x32, without the batch dimension",
        )
    return TensorSpec(name=name, datatype=datatype, dims=dims)


def parse_core_range(text: str) -> CoreRange:
    match = CORE_RANGE.match(text.strip())
    if match is None:
        raise NeuronError(
            f"core range {text!r} is not START:END",
            where="--cores",
            fix="give an inclusive NeuronCore range, e.g. 0:3",
        )
    cores = CoreRange(int(match["start"]), int(match["end"]))
    if cores.end < cores.start:
        raise NeuronError(
            f"core range {text!r} ends before it starts",
            where="--cores",
            fix="write the lower index first, e.g. 0:3",
        )
    return cores


def check_tensor_indices(tensors: tuple[TensorSpec, ...], *, option: str) -> None:
    """Indices must be 0..n-1, each once: they are forward()'s argument positions."""
    if not tensors:
        raise NeuronError("at least one tensor is required", where=option)
    names = [tensor.name for tensor in tensors]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise NeuronError(f"tensor {duplicates[0]} is given twice", where=option)
    indices = sorted(tensor.index for tensor in tensors)
    if indices != list(range(len(tensors))):
        raise NeuronError(
            f"tensor indices {indices} are not 0..{len(tensors) - 1}, each once",
            where=option,
            fix="number tensors by their position: NAME__0, NAME__1, ...",
        )


def check_torchscript(path: Path) -> None:
    """A TorchScript archive is a zip holding `<name>/code/`; torch.save files have none."""
    where = str(path)
    if not path.is_file():
        raise NeuronError(
            "compiled model file not found",
            where=where,
            fix="pass the TorchScript file written by torch.jit.save (or `deploy neuron compile`)",
        )
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        names = []
    if not any("/code/" in name for name in names):
        raise NeuronError(
            "not a TorchScript model (no code/ section in the archive)",
            where=where,
            fix="save the traced or scripted module with torch.jit.save, not torch.save",
        )


def build_spec(
    *,
    name: str,
    compiled_model: Path,
    inputs: list[str],
    outputs: list[str],
    cores: str,
    instances: int = 1,
    threads_per_core: int = 1,
    max_batch_size: int = 0,
    dynamic_batching: bool = False,
    preferred_batch_sizes: list[int] | None = None,
    max_queue_delay_us: int = 0,
    per_request: bool = False,
) -> NeuronModelSpec:
    """Parse and check every argument of `deploy neuron generate`."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise NeuronError(
            f"model name {name!r} is not a valid folder name",
            where="--model-dir",
            fix="use letters, digits, '_', '-' and '.'",
        )
    input_specs = tuple(parse_tensor(text, option="--input") for text in inputs)
    output_specs = tuple(parse_tensor(text, option="--output") for text in outputs)
    check_tensor_indices(input_specs, option="--input")
    check_tensor_indices(output_specs, option="--output")
    core_range = parse_core_range(cores)
    if instances < 1:
        raise NeuronError("need at least one instance", where="--instances")
    if instances > core_range.count:
        raise NeuronError(
            f"{instances} instances for {core_range.count} NeuronCores ({core_range})",
            where="--instances",
            fix="use at most one instance per NeuronCore, or widen --cores",
        )
    if core_range.count % instances:
        raise NeuronError(
            f"{core_range.count} NeuronCores ({core_range}) do not split evenly "
            f"across {instances} instances",
            where="--instances",
            fix="pick an instance count that divides the number of cores",
        )
    if threads_per_core < 1:
        raise NeuronError("need at least one thread per core", where="--threads-per-core")
    if max_batch_size < 0:
        raise NeuronError("max batch size cannot be negative", where="--max-batch-size")
    sizes = tuple(preferred_batch_sizes or ())
    if (dynamic_batching or sizes or max_queue_delay_us) and max_batch_size == 0:
        raise NeuronError(
            "dynamic batching needs a batch dimension",
            where="--dynamic-batching",
            fix="set --max-batch-size to 1 or more",
        )
    if any(size < 1 or size > max_batch_size for size in sizes):
        raise NeuronError(
            f"preferred batch sizes {list(sizes)} must lie in 1..{max_batch_size}",
            where="--preferred-batch-size",
        )
    if max_queue_delay_us < 0:
        raise NeuronError("queue delay cannot be negative", where="--max-queue-delay-us")
    check_torchscript(compiled_model)
    return NeuronModelSpec(
        name=name,
        compiled_model=compiled_model,
        inputs=input_specs,
        outputs=output_specs,
        cores=core_range,
        instances=instances,
        threads_per_core=threads_per_core,
        max_batch_size=max_batch_size,
        dynamic_batching=dynamic_batching or bool(sizes) or max_queue_delay_us > 0,
        preferred_batch_sizes=sizes,
        max_queue_delay_us=max_queue_delay_us,
        per_request=per_request,
    )
