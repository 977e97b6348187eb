"""The stand-in's PyTriton decorators, called as PyTriton calls a bound callable.

The stand-in is imported under its package path here (not as the top-level
`pytriton`, which would hide the real wheel that locates tritonserver).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deploy.pytriton.standin.pytriton import decorators as d
from deploy.pytriton.standin.pytriton._context import inject_triton_context, triton_model_config
from deploy.pytriton.standin.pytriton.exceptions import PyTritonRuntimeError
from deploy.pytriton.standin.pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from deploy.pytriton.standin.pytriton.proxy.types import Request
from deploy.pytriton.standin.pytriton.triton import Binding


def bound(func: Any, inputs: list[Tensor], outputs: list[Tensor], **config: Any) -> Any:
    """`func` with the Triton context PyTriton gives it when it serves the model."""
    binding = Binding(
        model_name="m",
        infer_funcs=[func],
        inputs=inputs,
        outputs=outputs,
        model_version=1,
        config=ModelConfig(**config),
        strict=False,
        context=d.TritonContext(),
        file="",
        line=0,
    )
    inject_triton_context(binding, func, triton_model_config(binding))
    return func


def requests(*datas: dict[str, np.ndarray]) -> list[Request]:
    return [Request(data=dict(data)) for data in datas]


F32 = np.float32


def test_batch_concatenates_requests_and_splits_the_outputs_back() -> None:
    seen = {}

    @d.batch
    def infer(a: np.ndarray, b: np.ndarray) -> Any:
        seen["shape"] = a.shape
        return [a + b]  # a list: matched to the config's outputs by position

    func = bound(infer, [Tensor((2,), F32, "a"), Tensor((2,), F32, "b")], [Tensor((2,), F32)])
    one = {"a": np.ones((1, 2), F32), "b": np.ones((1, 2), F32)}
    two = {"a": np.zeros((2, 2), F32), "b": np.full((2, 2), 3, F32)}
    result = func(requests(one, two))
    assert seen["shape"] == (3, 2)
    assert [r["OUTPUT_1"].tolist() for r in result] == [[[2, 2]], [[3, 3], [3, 3]]]


def test_batch_refuses_outputs_of_another_batch_size() -> None:
    @d.batch
    def infer(a: np.ndarray) -> Any:
        return {"out": a[:1]}

    func = bound(infer, [Tensor((1,), F32, "a")], [Tensor((1,), F32, "out")])
    with pytest.raises(ValueError, match="Expected batch size: 3"):
        func(requests({"a": np.ones((3, 1), F32)}))


def test_batch_on_call_of_a_list_of_objects_uses_each_objects_context() -> None:
    class Scaler:
        def __init__(self, factor: float) -> None:
            self.factor = factor

        @d.batch
        @d.triton_context
        def __call__(self, triton_context: Any, x: np.ndarray) -> Any:
            config = triton_context.model_configs[self]
            return {"y": x * self.factor + config.max_batch_size}

    first, second = Scaler(2.0), Scaler(3.0)
    for scaler in (first, second):
        bound(scaler, [Tensor((1,), F32, "x")], [Tensor((1,), F32, "y")], max_batch_size=10)
    x = {"x": np.ones((1, 1), F32)}
    assert first(requests(x))[0]["y"].tolist() == [[12.0]]
    assert second(requests(x))[0]["y"].tolist() == [[13.0]]


def test_sample_passes_the_first_request_as_keywords() -> None:
    @d.sample
    def infer(sequence: np.ndarray) -> Any:
        return {"doubled": sequence * 2}

    func = bound(
        infer,
        [Tensor((-1,), np.int64, "sequence")],
        [Tensor((-1,), np.int64, "doubled")],
        batching=False,
    )
    assert func(requests({"sequence": np.arange(3)}))[0]["doubled"].tolist() == [0, 2, 4]


def test_group_by_keys_calls_once_per_set_of_inputs_and_keeps_the_order() -> None:
    calls = []

    @d.group_by_keys
    @d.batch
    def infer(a: np.ndarray, b: np.ndarray | None = None) -> Any:
        calls.append(b is None)
        return {"out": a if b is None else a + b}

    func = bound(
        infer,
        [Tensor((1,), F32, "a"), Tensor((1,), F32, "b", optional=True)],
        [Tensor((1,), F32, "out")],
    )
    result = func(
        requests(
            {"a": np.array([[1]], F32)},
            {"a": np.array([[1]], F32), "b": np.array([[5]], F32)},
            {"a": np.array([[2]], F32)},
        )
    )
    assert [r["out"].tolist() for r in result] == [[[1]], [[6]], [[2]]]
    assert sorted(calls) == [False, True]


def test_group_by_values_and_first_value_give_each_group_its_scalar() -> None:
    temperatures = []

    @d.fill_optionals(temperature=np.array([0.5], F32))
    @d.batch
    @d.group_by_values("temperature")
    @d.first_value("temperature")
    def infer(x: np.ndarray, temperature: Any) -> Any:
        temperatures.append(float(temperature))
        return {"y": x * temperature}

    func = bound(
        infer,
        [Tensor((1,), F32, "x"), Tensor((1,), F32, "temperature", optional=True)],
        [Tensor((1,), F32, "y")],
    )
    x = np.ones((3, 1), F32)
    result = func(requests({"x": x, "temperature": np.array([[2], [3], [2]], F32)}))
    assert result[0]["y"].tolist() == [[2], [3], [2]]
    assert sorted(temperatures) == [2.0, 3.0]
    assert func(requests({"x": x}))[0]["y"].tolist() == [[0.5]] * 3  # filled default


def test_first_value_strict_refuses_different_values() -> None:
    @d.batch
    @d.first_value("t")
    def infer(x: np.ndarray, t: Any) -> Any:
        return {"y": x}

    func = bound(infer, [Tensor((1,), F32, "x"), Tensor((1,), F32, "t")], [Tensor((1,), F32, "y")])
    with pytest.raises(PyTritonRuntimeError, match="The values on the 't' input are not equal"):
        func(requests({"x": np.ones((2, 1), F32), "t": np.array([[1], [2]], F32)}))


def test_group_by_values_before_batch_is_refused() -> None:
    @d.group_by_values("x")
    @d.batch
    def infer(x: np.ndarray) -> Any:
        return {"y": x}

    func = bound(infer, [Tensor((1,), F32, "x")], [Tensor((1,), F32, "y")])
    with pytest.raises(PyTritonRuntimeError, match="must be used after the @batch"):
        func(x=np.ones((1, 1), F32))


def test_pad_batch_repeats_the_last_row_up_to_the_preferred_size() -> None:
    seen = {}

    @d.batch
    @d.pad_batch
    def infer(x: np.ndarray) -> Any:
        seen["x"] = x.copy()
        return {"y": x[:3]}

    func = bound(
        infer,
        [Tensor((1,), F32, "x")],
        [Tensor((1,), F32, "y")],
        max_batch_size=16,
        batcher=DynamicBatcher(preferred_batch_size=[4, 8]),
    )
    func(requests({"x": np.array([[1], [2], [3]], F32)}))
    assert seen["x"].ravel().tolist() == [1, 2, 3, 3]


def test_constant_padder_pads_to_the_longest() -> None:
    padded = d.ConstantPadder(0)([{"a": np.ones((1, 2), F32)}, {"a": np.ones((1, 3), F32)}])
    assert [p["a"].shape for p in padded] == [(1, 3), (1, 3)]
    assert padded[0]["a"].tolist() == [[1, 1, 0]]


def test_the_wrapper_passes_attributes_to_the_function() -> None:
    def infer(requests: Any) -> Any:
        return requests

    wrapped = d.batch(infer)
    wrapped.__triton_context__ = "context"
    assert infer.__triton_context__ == "context"  # type: ignore[attr-defined]
    assert str(wrapped) == str(infer)
    assert wrapped.__name__ == "infer"
