"""Parsing and checking `deploy neuron generate` arguments (no files written)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from deploy.errors import NeuronError
from deploy.neuron.spec import (
    CoreRange,
    NeuronModelSpec,
    build_spec,
    check_torchscript,
    parse_core_range,
    parse_tensor,
)


def _zip(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, b"x")
    return path


@pytest.fixture
def torchscript(tmp_path: Path) -> Path:
    # The layout torch.jit.save writes: <archive>/data.pkl, <archive>/code/__torch__/...
    return _zip(tmp_path / "model.pt", ["model/data.pkl", "model/code/__torch__.py"])


def _spec(torchscript: Path, **overrides: object) -> NeuronModelSpec:
    arguments: dict[str, object] = {
        "name": "classifier",
        "compiled_model": torchscript,
        "inputs": ["INPUT__0,FP32,3x32x32"],
        "outputs": ["OUTPUT__0,FP32,10"],
        "cores": "0:3",
    }
    arguments.update(overrides)
    return build_spec(**arguments)  # type: ignore[arg-type]


def test_parse_tensor_reads_name_dtype_dims() -> None:
    tensor = parse_tensor("INPUT__1,fp16,3x-1x32", option="--input")
    assert (tensor.name, tensor.datatype, tensor.dims, tensor.index) == (
        "INPUT__1",
        "FP16",
        (3, -1, 32),
        1,
    )


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("INPUT0,FP32,4", "<name>__<index>"),
        ("INPUT__x,FP32,4", "<name>__<index>"),
        ("IN__PUT__0,FP32,4", "<name>__<index>"),
        ("__0,FP32,4", "<name>__<index>"),
        ("INPUT__0,STRING,4", "datatype"),
        ("INPUT__0,BYTES,4", "datatype"),
        ("INPUT__0,FP32,4x0", "dims"),
        ("INPUT__0,FP32,4xa", "dims"),
        ("INPUT__0,FP32", "NAME,DTYPE,DIMS"),
    ],
)
def test_parse_tensor_rejects(text: str, complaint: str) -> None:
    with pytest.raises(NeuronError, match=complaint) as raised:
        parse_tensor(text, option="--input")
    assert raised.value.where == "--input"


def test_core_range_parses_and_rejects() -> None:
    assert parse_core_range("4:7") == CoreRange(4, 7)
    assert CoreRange(4, 7).count == 4
    assert CoreRange(4, 7).visible_cores() == "4-7"
    for bad in ("7:4", "4-7", "a:b", "-1:3"):
        with pytest.raises(NeuronError, match="core range"):
            parse_core_range(bad)


def test_overlap_is_symmetric_and_inclusive() -> None:
    assert CoreRange(0, 3).overlaps(CoreRange(3, 5))
    assert CoreRange(3, 5).overlaps(CoreRange(0, 3))
    assert not CoreRange(0, 3).overlaps(CoreRange(4, 5))


def test_build_spec_defaults_and_batching(torchscript: Path) -> None:
    spec = _spec(torchscript)
    assert spec.batching == "per-request"
    batched = _spec(torchscript, max_batch_size=8, preferred_batch_sizes=[4])
    assert batched.batching == "concat"
    assert batched.dynamic_batching
    assert _spec(torchscript, max_batch_size=8, per_request=True).batching == "per-request"


@pytest.mark.parametrize(
    ("overrides", "where", "complaint"),
    [
        ({"instances": 5}, "--instances", "5 instances for 4 NeuronCores"),
        ({"instances": 3}, "--instances", "do not split evenly"),
        ({"instances": 0}, "--instances", "at least one"),
        ({"threads_per_core": 0}, "--threads-per-core", "at least one"),
        ({"dynamic_batching": True}, "--dynamic-batching", "batch dimension"),
        ({"max_batch_size": 4, "preferred_batch_sizes": [8]}, "--preferred-batch-size", "1..4"),
        ({"inputs": ["INPUT__1,FP32,4"]}, "--input", "not 0..0"),
        ({"inputs": ["INPUT__0,FP32,4", "INPUT__0,FP32,4"]}, "--input", "given twice"),
        ({"outputs": ["OUTPUT__0,FP32,4", "OUTPUT__2,FP32,4"]}, "--output", "not 0..1"),
        ({"name": "bad/name"}, "--model-dir", "folder name"),
        ({"cores": "3:0"}, "--cores", "ends before"),
    ],
)
def test_build_spec_rejects(
    torchscript: Path, overrides: dict[str, object], where: str, complaint: str
) -> None:
    with pytest.raises(NeuronError, match=complaint) as raised:
        _spec(torchscript, **overrides)
    assert raised.value.where == where


def test_compiled_model_must_exist_and_be_torchscript(tmp_path: Path) -> None:
    with pytest.raises(NeuronError, match="not found"):
        check_torchscript(tmp_path / "missing.pt")
    state_dict = _zip(tmp_path / "weights.pt", ["weights/data.pkl", "weights/version"])
    with pytest.raises(NeuronError, match="not a TorchScript model"):
        check_torchscript(state_dict)
    text = tmp_path / "model.onnx"
    text.write_bytes(b"\x08\x07onnx")
    with pytest.raises(NeuronError, match="not a TorchScript model") as raised:
        check_torchscript(text)
    assert raised.value.where == str(text)
