"""PyTriton's inference-callable decorators, without wrapt (`pytriton.decorators`).

Behaviour, names and error messages follow `pytriton/decorators.py` of NVIDIA
PyTriton 0.7.0 (Apache License 2.0, github.com/triton-inference-server/pytriton);
the code is written for this stand-in: a small function wrapper replaces
`wrapt` (which the SageMaker Triton image does not have) and telemetry spans
are left out. A decorated callable is called with a list of requests (dicts
of numpy arrays); `@batch` turns them into keyword arguments of batched arrays.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import itertools
import operator
import struct
import types
from bisect import bisect_left
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import numpy as np

from .constants import TRITON_CONTEXT_FIELD_NAME
from .exceptions import PyTritonBadParameterError, PyTritonRuntimeError, PyTritonValidationError

Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]
_SPECIAL_KEYS = ["__triton_context__"]


class _FunctionWrapper:
    """Calls `wrapper(wrapped, instance, args, kwargs)`, as wrapt's FunctionWrapper does.

    Attribute reads and writes go to the wrapped callable (so PyTriton's
    `__triton_context__` reaches the function itself); used as a method, it
    binds like the function it wraps.
    """

    def __init__(self, wrapped: Any, wrapper: Wrapper, instance: Any = None) -> None:
        object.__setattr__(self, "__wrapped__", wrapped)
        object.__setattr__(self, "_self_wrapper", wrapper)
        object.__setattr__(self, "_self_instance", instance)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        getter = getattr(self.__wrapped__, "__get__", None)
        if getter is None:
            return self
        return _FunctionWrapper(getter(instance, owner), self._self_wrapper, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        instance = self._self_instance
        if instance is None and isinstance(self.__wrapped__, types.MethodType):
            instance = self.__wrapped__.__self__  # a bound method wrapped directly
        return self._self_wrapper(self.__wrapped__, instance, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "__wrapped__"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_self_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.__wrapped__, name, value)

    @property  # type: ignore[misc]
    def __class__(self) -> Any:  # isinstance/inspect see the wrapped callable's type
        return type(self.__wrapped__)

    def __str__(self) -> str:
        return str(self.__wrapped__)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)


def _decorator(wrapper: Wrapper) -> Callable[[Any], Any]:
    def apply(wrapped: Any) -> Any:
        return _FunctionWrapper(wrapped, wrapper)

    apply.__name__ = getattr(wrapper, "__name__", "decorator")
    apply.__doc__ = wrapper.__doc__
    apply._self_wrapper = wrapper  # type: ignore[attr-defined]
    return apply


def _wrappers_of(wrapped: Any) -> list[Any]:
    """The wrapper functions applied to `wrapped`, outermost first."""
    found = []
    current = wrapped
    while current is not None:
        wrapper = current.__dict__.get("_self_wrapper") if hasattr(current, "__dict__") else None
        if wrapper is not None:
            found.append(wrapper)
        current = current.__dict__.get("__wrapped__") if hasattr(current, "__dict__") else None
    return found


def get_inference_request_batch_size(inference_request: Any) -> int:
    first_input_value = next(iter(inference_request.values()))
    return int(first_input_value.shape[0])


class ModelConfigDict(MutableMapping[Any, Any]):
    """Model configs keyed by inference callable (a bound `__call__` counts as its object)."""

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self._keys: list[Any] = []

    def __getitem__(self, infer_callable: Any) -> Any:
        return self._data[self._key(infer_callable)]

    def __setitem__(self, infer_callable: Any, item: Any) -> None:
        self._keys.append(infer_callable)
        self._data[self._key(infer_callable)] = item

    def __delitem__(self, infer_callable: Any) -> None:
        del self._data[self._key(infer_callable)]

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._keys)

    @staticmethod
    def _key(infer_callable: Any) -> str:
        key = infer_callable
        if inspect.ismethod(key) and key.__name__ == "__call__":
            key = key.__self__
        return str(key)


@dataclasses.dataclass
class TritonContext:
    model_configs: ModelConfigDict = dataclasses.field(default_factory=ModelConfigDict)


def get_triton_context(wrapped: Any, instance: Any) -> TritonContext:
    caller = instance or wrapped
    if not hasattr(caller, "__triton_context__"):
        raise PyTritonValidationError(
            "Wrapped function or object must bound with triton to get  __triton_context__"
        )
    context: TritonContext = caller.__triton_context__
    return context


def get_model_config(wrapped: Any, instance: Any) -> Any:
    return get_triton_context(wrapped, instance).model_configs[wrapped]


def convert_output(
    outputs: Any, wrapped: Any = None, instance: Any = None, model_config: Any = None
) -> dict[str, Any]:
    """Outputs as a dict: a list or tuple is matched to the config's outputs in order."""
    if isinstance(outputs, dict):
        return outputs
    if isinstance(outputs, (list, tuple)):
        if model_config is None:
            model_config = get_model_config(wrapped, instance)
        if len(outputs) != len(model_config.outputs):
            raise PyTritonValidationError("Outputs length different than config outputs length")
        return {
            spec.name: output for spec, output in zip(model_config.outputs, outputs, strict=False)
        }
    raise PyTritonValidationError(f"Unsupported output type {type(outputs)}.")


def _sample(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Calls a non-batching callable with the first request's inputs as keyword arguments."""
    kwargs.update(args[0][0])
    outputs = wrapped(*args[1:], **kwargs)
    return [convert_output(outputs, wrapped, instance)]


sample = _decorator(_sample)


def _batch(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Concatenates the requests' inputs along the batch axis and splits the outputs back."""
    req_list = args[0]
    input_names = req_list[0].keys()
    for other in req_list[1:]:
        if input_names != other.keys():
            raise PyTritonValidationError("Cannot batch requests with different set of inputs keys")
    inputs = {name: np.concatenate([req[name] for req in req_list]) for name in input_names}
    new_kwargs = dict(kwargs)
    new_kwargs.update(inputs)
    outputs = wrapped(*args[1:], **new_kwargs)

    def split(result: Any) -> list[dict[str, Any]]:
        result = convert_output(result, wrapped, instance)
        total = sum(get_inference_request_batch_size(req) for req in req_list)
        mismatched = {
            name: tensor.shape for name, tensor in result.items() if tensor.shape[0] != total
        }
        if mismatched:
            listed = ", ".join(": ".join(map(str, item)) for item in mismatched.items())
            raise ValueError(
                f"Received output tensors with different batch sizes: {listed}. "
                f"Expected batch size: {total}. "
            )
        out_list = []
        start = 0
        for request in req_list:
            size = get_inference_request_batch_size(request)
            out_list.append({name: t[start : start + size, ...] for name, t in result.items()})
            start += size
        return out_list

    if inspect.isgenerator(outputs):
        return (split(result) for result in outputs)
    return split(outputs)


batch = _decorator(_batch)


def _serialize_byte_tensor(tensor: np.ndarray) -> bytes:
    """Length-prefixed bytes of every element (a hashable key for byte tensors)."""
    parts = []
    for item in np.asarray(tensor, dtype=object).ravel(order="C"):
        data = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts.append(struct.pack("<I", len(data)) + data)
    return b"".join(parts)


def group_by_values(*keys: str, pad_fn: Callable[[Any], Any] | None = None) -> Any:
    """Splits a batch into sub-batches of equal values of `keys`; use after `@batch`."""

    def value_to_key(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            if value.dtype == np.object_ or value.dtype.type == np.bytes_:
                return _serialize_byte_tensor(value)
            return value.tobytes()
        return value

    def sort_key(request: dict[str, Any], index: int) -> tuple[Any, ...]:
        return tuple(value_to_key(request[key][index]) for key in keys)

    def groups(request: dict[str, Any], size: int) -> Iterator[tuple[Any, dict[str, Any]]]:
        indexed = [(index, sort_key(request, index)) for index in range(size)]
        indexed.sort(key=operator.itemgetter(1))
        for _, group in itertools.groupby(indexed, key=operator.itemgetter(1)):
            indices, _ = zip(*group, strict=False)
            yield indices, {name: value[indices, ...] for name, value in request.items()}

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _batch in _wrappers_of(wrapped):
            raise PyTritonRuntimeError(
                "The @group_by_values decorator must be used after the @batch decorator."
            )
        request = {k: v for k, v in kwargs.items() if k not in _SPECIAL_KEYS}
        other = {k: v for k, v in kwargs.items() if k in _SPECIAL_KEYS}
        size = get_inference_request_batch_size(request)
        interim: Any = [
            (indices, wrapped(*args, **sub_request, **other))
            for indices, sub_request in groups(request, size)
        ]
        if pad_fn is not None:
            indices_list, results = tuple(map(tuple, zip(*interim, strict=False)))
            interim = tuple(zip(indices_list, pad_fn(results), strict=False))
        _, first = interim[0]
        result = {
            name: np.zeros((size, *data.shape[1:]), dtype=data.dtype)
            for name, data in first.items()
        }
        for indices, results in interim:
            for name, data in results.items():
                result[name][indices, ...] = data
        return result

    return _decorator(wrapper)


class ConstantPadder:
    """Pads batches to a common shape with a constant (for `group_by_values(pad_fn=...)`)."""

    def __init__(self, pad_value: Any = 0) -> None:
        self.pad_value = pad_value

    def __call__(self, batches_list: Any) -> Any:
        def padded_shape(batches: list[Any]) -> tuple[int, ...]:
            return tuple(np.max([b.shape[1:] for b in batches if b is not None], axis=0))

        def padded_dtype(batches: list[Any]) -> np.dtype[Any]:
            dtypes = [b.dtype for b in batches if b is not None]
            result = dtypes[0]
            if not all(d.kind == result.kind for d in dtypes):
                raise PyTritonRuntimeError(
                    "All input arrays for given input name must have the same dtype."
                )
            if result.kind in "SU":
                longest = max(int(d.str[2:]) for d in dtypes)
                return np.dtype(f"{result.str[:2]}{longest}")
            if not all(d == result for d in dtypes):
                raise PyTritonRuntimeError(
                    "All input arrays for given input name must have the same dtype."
                )
            resolved: np.dtype[Any] = np.dtype(result)
            return resolved

        names = list(collections.OrderedDict.fromkeys(n for b in batches_list for n in b))
        by_name = {name: [b.get(name) for b in batches_list] for name in names}
        for batches in by_name.values():
            shape, dtype = padded_shape(batches), padded_dtype(batches)
            for index, array in enumerate(batches):
                if array is not None:
                    batches[index] = np.pad(
                        array,
                        [(0, 0)]
                        + [(0, b - a) for a, b in zip(array.shape[1:], shape, strict=False)],
                        mode="constant",
                        constant_values=self.pad_value if dtype.kind not in "SUO" else b"",
                    ).astype(dtype)
        return [
            {name: arrays[index] for name, arrays in by_name.items() if arrays[index] is not None}
            for index in range(len(batches_list))
        ]


def _group_by_keys(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Calls the callable once per group of requests with the same input names."""
    inputs = args[0]
    indexed = [(i, tuple(sorted(request.keys())), request) for i, request in enumerate(inputs)]
    indexed.sort(key=operator.itemgetter(1))
    results: list[tuple[int, Any]] = []
    for _, group in itertools.groupby(indexed, key=operator.itemgetter(1)):
        indices, _keys, requests = zip(*group, strict=False)
        outputs = wrapped(list(requests), *args[1:], **kwargs)
        results.extend(zip(indices, outputs, strict=False))
    results.sort(key=operator.itemgetter(0))
    return [result for _, result in results]


group_by_keys = _decorator(_group_by_keys)


def fill_optionals(**defaults: Any) -> Any:
    """Fills inputs a request lacks with `defaults` (numpy arrays without the batch axis)."""

    def verify(model_config: Any) -> None:
        inputs = {spec.name: spec for spec in model_config.inputs}
        unknown = sorted(set(defaults) - set(inputs))
        if unknown:
            raise PyTritonBadParameterError(f"Could not found {', '.join(unknown)} inputs")
        non_numpy = {k: v for k, v in defaults.items() if not isinstance(v, np.ndarray)}
        if non_numpy:
            listed = ", ".join(f"{k}={v}" for k, v in non_numpy.items())
            raise PyTritonBadParameterError(
                f"Could not use {listed} defaults as they are not NumPy arrays"
            )
        wrong_dtypes = {
            k: (v.dtype, inputs[k].dtype) for k, v in defaults.items() if v.dtype != inputs[k].dtype
        }
        if wrong_dtypes:
            listed = ", ".join(
                f"{name}: dtype={have} expected_dtype={want}"
                for name, (have, want) in wrong_dtypes.items()
            )
            raise PyTritonBadParameterError(
                f"Could not use {listed} defaults as they have different than input "
                "signature dtypes"
            )

        def shape_matches(have: tuple[int, ...], want: tuple[int, ...]) -> bool:
            return len(have) == len(want) and all(
                w == -1 or h == w for h, w in zip(have, want, strict=False)
            )

        wrong_shapes = {
            k: (v.shape, inputs[k].shape)
            for k, v in defaults.items()
            if not shape_matches(v.shape, tuple(inputs[k].shape))
        }
        if wrong_shapes:
            listed = ", ".join(
                f"{name}: shape={have} expected_shape={want}"
                for name, (have, want) in wrong_shapes.items()
            )
            raise PyTritonBadParameterError(
                f"Could not use {listed} defaults as they have different than input "
                "signature shapes"
            )

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        model_config = get_model_config(wrapped, instance)
        verify(model_config)
        (requests,) = args
        for request in requests:
            size = get_inference_request_batch_size(request) if model_config.batching else None
            for key, value in defaults.items():
                if key in request:
                    continue
                if model_config.batching:
                    value = np.tile(value, (size,) + (1,) * value.ndim)
                request[key] = value
        return wrapped(*args, **kwargs)

    return _decorator(wrapper)


def _triton_context(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Passes the Triton context (the model configs) as the keyword argument `triton_context`."""
    kwargs[TRITON_CONTEXT_FIELD_NAME] = get_triton_context(wrapped, instance)
    return wrapped(*args, **kwargs)


triton_context = _decorator(_triton_context)


def _pad_batch(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Repeats the last row up to the nearest preferred batch size (or max_batch_size)."""
    inputs = {k: v for k, v in kwargs.items() if k != "__triton_context__"}
    first_input = next(iter(inputs.values()))
    config = get_model_config(wrapped, instance)
    sizes = (
        []
        if config.batcher is None or config.batcher.preferred_batch_size is None
        else sorted(config.batcher.preferred_batch_size)
    )
    sizes.append(config.max_batch_size)
    size = sizes[bisect_left(sizes, first_input.shape[0])]
    kwargs.update(
        {
            name: np.repeat(
                array,
                np.concatenate(
                    [np.ones(array.shape[0] - 1), np.array([size - array.shape[0] + 1])]
                ).astype(np.int64),
                axis=0,
            )
            for name, array in inputs.items()
        }
    )
    return wrapped(*args, **kwargs)


pad_batch = _decorator(_pad_batch)


def first_value(*keys: str, squeeze_single_values: bool = True, strict: bool = True) -> Any:
    """Replaces the inputs `keys` with their first value (checked equal when `strict`)."""
    if any(k in _SPECIAL_KEYS for k in keys):
        not_allowed = [key for key in keys if key in _SPECIAL_KEYS]
        raise PyTritonBadParameterError(
            f"The keys {', '.join(not_allowed)} are not allowed as keys for @first_value "
            f"wrapper. The set of not allowed keys are {', '.join(_SPECIAL_KEYS)}"
        )

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        model_config = get_model_config(wrapped, instance)
        if not model_config.batching:
            raise PyTritonRuntimeError(
                "The @first_value decorator can only be used with models that support batching."
            )

        def replace(request: Any) -> Any:
            for name in keys:
                if name not in request:
                    continue
                values = request[name]
                if strict:
                    axis = None if values.dtype == object else 0
                    if len(np.unique(values, axis=axis)) > 1:
                        raise PyTritonRuntimeError(
                            f"The values on the {name!r} input are not equal. "
                            "To proceed, either disable strict mode in @first_value wrapper "
                            "or ensure that the values always are consistent. "
                            f"The current values of {name!r} are {request[name]!r}."
                        )
                value = values[0]
                if (
                    squeeze_single_values
                    and not np.isscalar(value)
                    and all(dim == 1 for dim in value.shape)
                ):
                    value = np.squeeze(value)[()]
                request[name] = value
            return request

        if set(kwargs) - set(_SPECIAL_KEYS):
            return wrapped(*args, **replace(kwargs))
        requests, *other = args
        return wrapped([replace(request) for request in requests], *other, **kwargs)

    return _decorator(wrapper)
