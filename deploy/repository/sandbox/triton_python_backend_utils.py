"""Stand-in for the python backend's `triton_python_backend_utils` during auto-completion.

It has the module-level names of the real module as Triton's python backend
stub presents it to `auto_complete_config` (triton-inference-server/
python_backend `src/resources/triton_python_backend_utils.py`, plus what
`Stub::StubSetup` and `Stub::AutoCompleteModelConfig` in `src/pb_stub.cc` add),
so a hook behaves here as it does in Triton:

- data as in the real module: `TRITON_STRING_TO_NUMPY`, `triton_to_numpy_type`,
  `numpy_to_triton_type`, `triton_string_to_numpy`, the BYTES (de)serialisers,
  the `get_*_by_name` helpers, `using_decoupled_model_transaction_policy`, the
  `TRITONSERVER_*` constants, `get_model_dir`;
- `ModelConfig`, with the API and checks of the real one;
- `TritonError`, `TritonModelException`, `Tensor`, `InferenceResponse`,
  `Logger` (to stderr), `PreferredMemory`, `MetricFamily`: usable objects;
- what needs a running server (`InferenceRequest.exec`, `load_model`,
  `unload_model`, `is_model_ready`) raises `TritonModelException` saying so.

A name the real module lacks raises AttributeError, as in Triton.
"""

from __future__ import annotations

import enum
import json
import struct
import sys
from collections.abc import Iterable
from typing import Any

import numpy as np

# Set by the stub before the model is imported: model.py's folder (<model>/<version>), as
# the backend's stub sets it (pb_stub.cc `ModelContext::Init`).
_model_dir = ""

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# The python backend's own table: TYPE_BOOL maps to Python's bool, not np.bool_.
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

# model_config.proto DataType numbers (TYPE_BOOL = 1 ... TYPE_STRING = 13).
_NUMPY_BY_TRITON: dict[int, Any] = {
    1: np.bool_,
    2: np.uint8,
    3: np.uint16,
    4: np.uint32,
    5: np.uint64,
    6: np.int8,
    7: np.int16,
    8: np.int32,
    9: np.int64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
    13: np.object_,
}


def triton_to_numpy_type(data_type: int) -> Any:
    """The numpy type of a DataType number; None for one it does not know."""
    return _NUMPY_BY_TRITON.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """The DataType number of a numpy type or dtype; None for one it does not know."""
    for number, numpy_type in _NUMPY_BY_TRITON.items():
        if data_type == numpy_type:
            return number
    return 13 if data_type == np.bytes_ else None


def triton_string_to_numpy(triton_type_string: str) -> Any:
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | tuple[()] | None:
    """BYTES elements in C order, each a 4-byte little-endian length and its bytes.

    `()` for an empty tensor and None for a non-BYTES one, as in the python backend.
    """
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        return None
    parts: list[bytes] = []
    for item in input_tensor.ravel(order="C"):
        if isinstance(item, bytes):
            data = item
        elif input_tensor.dtype == np.object_:
            data = str(item).encode("utf-8")
        else:
            data = bytes(item)
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """The 1-D object array of the elements `serialize_byte_tensor` wrote."""
    items: list[bytes] = []
    offset = 0
    while offset < len(encoded_tensor):
        (length,) = struct.unpack_from("<I", encoded_tensor, offset)
        offset += 4
        items.append(bytes(encoded_tensor[offset : offset + length]))
        offset += length
    return np.array(items, dtype=np.object_)


def get_input_tensor_by_name(inference_request: Any, name: str) -> Any:
    return _named(inference_request.inputs(), name)


def get_output_tensor_by_name(inference_response: Any, name: str) -> Any:
    return _named(inference_response.output_tensors(), name)


def _named(tensors: Iterable[Any], name: str) -> Any:
    return next((tensor for tensor in tensors if tensor.name() == name), None)


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    return _config_named(model_config, "input", name)


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    return _config_named(model_config, "output", name)


def _config_named(model_config: dict[str, Any], group: str, name: str) -> dict[str, Any] | None:
    return next((t for t in model_config.get(group, ()) if t["name"] == name), None)


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    if "model_transaction_policy" in model_config:
        return bool(model_config["model_transaction_policy"]["decoupled"])
    return False


def get_model_dir() -> str:
    return _model_dir


# -- what the stub adds from its C++ module (c_python_backend_utils) ----------------


class TritonModelException(Exception):  # noqa: N818 - the python backend's name
    """What the python backend raises, and a model raises to fail a request or a load."""


class TritonError:
    """An error a response carries; `code` one of the class's TRITONSERVER_Error_Code values."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        if message is None or code is None:
            raise TypeError("TritonError(message, code): neither may be None")
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class Tensor:
    """A named numpy array, as `pb_utils.Tensor(name, array)` makes one (CPU only here)."""

    def __init__(self, name: str, numpy_array: np.ndarray) -> None:
        array = np.asarray(numpy_array)
        number = numpy_to_triton_type(array.dtype)
        if number is None:
            raise TritonModelException(
                f"tensor '{name}': numpy dtype {array.dtype} has no Triton data type"
                + ("; use np.object_ for strings" if array.dtype.kind in "SUV" else "")
            )
        self._name = name
        self._array = array
        self._dtype = number

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def triton_dtype(self) -> int:
        return self._dtype

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def is_cpu(self) -> bool:
        return True


class InferenceResponse:
    def __init__(
        self,
        output_tensors: list[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        self._output_tensors = list(output_tensors or [])
        self._error = error
        self._parameters = json.dumps(parameters or {})

    def output_tensors(self) -> list[Tensor]:
        return self._output_tensors

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return self._parameters


def _needs_server(what: str) -> TritonModelException:
    return TritonModelException(
        f"{what} needs a running Triton server, which auto-completion here does not "
        "start; keep auto_complete_config to stating the config"
    )


class InferenceRequest:
    """A BLS request: it can be built, not run (no server while the config is completed)."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs

    def inputs(self) -> list[Tensor]:
        return list(self._kwargs.get("inputs", []))

    def requested_output_names(self) -> list[str]:
        return list(self._kwargs.get("requested_output_names", []))

    def exec(self, decoupled: bool = False) -> Any:
        raise _needs_server("InferenceRequest.exec")

    async def async_exec(self, decoupled: bool = False) -> Any:
        raise _needs_server("InferenceRequest.async_exec")


def load_model(model_name: str, config: str = "", files: Any = None) -> None:
    raise _needs_server("load_model")


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    raise _needs_server("unload_model")


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    raise _needs_server("is_model_ready")


class Logger:
    """Triton's log in the server; stderr here (quoted when the hook fails)."""

    class LogLevel(enum.IntEnum):
        INFO = 0
        WARNING = 1
        ERROR = 2
        VERBOSE = 3

    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: Logger.LogLevel = LogLevel.INFO) -> None:
        print(f"{Logger.LogLevel(level).name}: {message}", file=sys.stderr)

    @staticmethod
    def log_info(message: str) -> None:
        Logger.log(message, Logger.LogLevel.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        Logger.log(message, Logger.LogLevel.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        Logger.log(message, Logger.LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        Logger.log(message, Logger.LogLevel.VERBOSE)


class MemoryType(enum.IntEnum):
    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU


class PreferredMemory:
    def __init__(self, preferred_memory_type: MemoryType, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class _Metric:
    """A metric kept in this process (Triton's metrics endpoint is not there)."""

    def __init__(self, labels: dict[str, str] | None) -> None:
        self.labels = dict(labels or {})
        self._value = 0.0

    def increment(self, value: float) -> None:
        self._value += value

    def set(self, value: float) -> None:
        self._value = value

    def observe(self, value: float) -> None:
        self._value = value

    def value(self) -> float:
        return self._value


class MetricFamily:
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2

    def __init__(self, name: str, description: str, kind: int) -> None:
        if kind not in (self.COUNTER, self.GAUGE, self.HISTOGRAM):
            raise TritonModelException(f"metric family '{name}': unknown kind {kind!r}")
        self.name = name
        self.description = description
        self.kind = kind

    def Metric(  # noqa: N802 - the python backend's name
        self, labels: dict[str, str] | None = None, buckets: list[float] | None = None
    ) -> _Metric:
        return _Metric(labels)


class ModelConfig:
    """The model configuration `auto_complete_config` receives and returns.

    Holds Triton's JSON form of the config; only `max_batch_size`, `input`,
    `output`, the scheduler and `model_transaction_policy` are taken back.
    """

    def __init__(self, model_config: str) -> None:
        self._model_config: dict[str, Any] = json.loads(model_config)

    def as_dict(self) -> dict[str, Any]:
        return self._model_config

    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        configured = int(self._model_config.get("max_batch_size", 0))
        if configured > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {configured}, but in "
                f"auto-complete-config function for model '{self._name()}' specified "
                f"max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but "
                    f"auto-complete-config function for model '{self._name()}' tries to set "
                    "scheduling_choice as 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict[str, Any]) -> None:
        self._add("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: dict[str, Any]) -> None:
        self._add("output", output, ("name", "data_type", "dims"))

    def _add(self, group: str, tensor: dict[str, Any], allowed: tuple[str, ...]) -> None:
        name = tensor.get("name", "")
        for key in tensor:
            if key not in allowed:
                raise ValueError(
                    f"{group} '{name}' in auto-complete-config function for model "
                    f"'{self._name()}' contains property other than "
                    + ", ".join(f"'{a}'" for a in allowed)
                    + "."
                )
        for required in ("name", "data_type", "dims"):
            if required not in tensor:
                raise ValueError(
                    f"{group} '{name}' in auto-complete-config function for model "
                    f"'{self._name()}' is missing '{required}' property."
                )
        entries: list[dict[str, Any]] = self._model_config.setdefault(group, [])
        for current in entries:
            if current.get("name") != tensor["name"]:
                continue
            current_type = current.get("data_type", "TYPE_INVALID")
            if current_type != "TYPE_INVALID" and current_type != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{self._name()}', configuration expects datatype "
                    f"{current_type} for {group} '{name}', model provides {tensor['data_type']}"
                )
            if current.get("dims") and current["dims"] != tensor["dims"]:
                raise ValueError(
                    f"model '{self._name()}', tensor '{name}': the model expects dims "
                    f"{tensor['dims']} but the model configuration specifies dims "
                    f"{current['dims']}"
                )
            if (
                "optional" in current
                and "optional" in tensor
                and current["optional"] != tensor["optional"]
            ):
                raise ValueError(
                    f"model '{self._name()}', tensor '{name}': the model expects optional "
                    f"{tensor['optional']} but the model configuration specifies optional "
                    f"{current['optional']}"
                )
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        entries.append(tensor)

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model "
                    f"'{self._name()}' contains property other than 'decoupled'."
                )
        policy: dict[str, Any] = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model "
                    f"'{self._name()}', which is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = wanted
