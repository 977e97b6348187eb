"""The front door's stdlib codec, checked against tritonclient, numpy and torch."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np
import pytest
import torch
import tritonclient.http as httpclient
from hypothesis import given
from hypothesis import strategies as st
from tritonclient.utils import serialize_byte_tensor

from deploy_handlers.front_door.binary import (
    BINARY_CONTENT_TYPE,
    decode_response,
    decode_tensor,
    encode_request,
    encode_tensor,
)
from deploy_handlers.front_door.request import RequestError

NUMPY_TYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


def triton_response(outputs: dict[str, np.ndarray]) -> tuple[bytes, str]:
    """A response body shaped like Triton's binary answer (header JSON + raw tensors)."""
    header: dict[str, Any] = {"model_name": "addsub-0123.tar.gz", "outputs": []}
    chunks = []
    for name, array in outputs.items():
        raw = (
            serialize_byte_tensor(array).item()
            if array.dtype == np.object_
            else array.astype(array.dtype.newbyteorder("<")).tobytes()
        )
        datatype = "BYTES" if array.dtype == np.object_ else _v2(array.dtype)
        header["outputs"].append(
            {
                "name": name,
                "datatype": datatype,
                "shape": list(array.shape),
                "parameters": {"binary_data_size": len(raw)},
            }
        )
        chunks.append(raw)
    head = json.dumps(header).encode()
    return head + b"".join(chunks), f"{BINARY_CONTENT_TYPE};json-header-size={len(head)}"


def _v2(dtype: np.dtype[Any]) -> str:
    return next(k for k, v in NUMPY_TYPES.items() if np.dtype(v) == dtype)


@pytest.mark.parametrize("datatype", sorted(NUMPY_TYPES))
def test_numeric_tensors_match_numpy_bytes(datatype: str) -> None:
    dtype = np.dtype(NUMPY_TYPES[datatype])
    array = (np.arange(6) % 2 == 0) if datatype == "BOOL" else np.arange(6).astype(dtype)
    nested = array.reshape(2, 3).tolist()
    assert encode_tensor("X", datatype, [2, 3], nested) == array.astype(dtype).tobytes()
    data, encoding = decode_tensor(datatype, [2, 3], array.astype(dtype).tobytes())
    assert encoding is None
    assert data == array.tolist()


def test_request_body_matches_tritonclient() -> None:
    # GIVEN the same two inputs built with tritonclient's binary request body
    a = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    b = np.array([["x", "héllo"]], dtype=np.object_)
    inputs = [
        httpclient.InferInput("A", [1, 4], "FP32"),
        httpclient.InferInput("B", [1, 2], "BYTES"),
    ]
    inputs[0].set_data_from_numpy(a, binary_data=True)
    inputs[1].set_data_from_numpy(b, binary_data=True)
    outputs = [httpclient.InferRequestedOutput("OUT", binary_data=True)]
    expected, header_size = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs
    )
    # WHEN the front door encodes the v2 JSON form of that request
    body, content_type = encode_request(
        {
            "inputs": [
                {"name": "A", "datatype": "FP32", "shape": [1, 4], "data": a.tolist()},
                {"name": "B", "datatype": "BYTES", "shape": [1, 2], "data": ["x", "héllo"]},
            ],
            "outputs": [{"name": "OUT"}],
        }
    )
    # THEN the JSON headers say the same and the tensor bytes are identical
    size = int(content_type.rsplit("=", 1)[1])
    assert content_type.startswith(BINARY_CONTENT_TYPE + ";")
    ours, theirs = json.loads(body[:size]), json.loads(expected[:header_size])
    assert ours["inputs"] == theirs["inputs"]
    assert ours["outputs"] == theirs["outputs"]
    assert body[size:] == expected[header_size:]


def test_response_decoding_matches_tritonclient() -> None:
    sums = np.array([[1.5, -2.0, 3.25, 4.0]], dtype=np.float32)
    ids = np.array([[1, 2, 3]], dtype=np.int64)
    words = np.array([b"cat", "dög".encode()], dtype=np.object_)
    body, content_type = triton_response({"SUM": sums, "IDS": ids, "WORDS": words})
    size = int(content_type.rsplit("=", 1)[1])
    reference = httpclient.InferenceServerClient.parse_response_body(body, header_length=size)

    response = decode_response(body, content_type)

    by_name = {o["name"]: o for o in response["outputs"]}
    assert by_name["SUM"]["data"] == reference.as_numpy("SUM").ravel().tolist()
    assert by_name["IDS"]["data"] == reference.as_numpy("IDS").ravel().tolist()
    assert by_name["WORDS"]["data"] == [w.decode() for w in reference.as_numpy("WORDS")]
    assert all("parameters" not in o for o in response["outputs"])


def test_json_only_response_passes_through() -> None:
    body = json.dumps(
        {"outputs": [{"name": "Y", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}
    )
    assert decode_response(body.encode(), "application/json")["outputs"][0]["data"] == [1, 2]


def test_request_without_outputs_asks_for_binary_outputs() -> None:
    body, content_type = encode_request(
        {"id": "r1", "inputs": [{"name": "X", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}
    )
    header = json.loads(body[: int(content_type.rsplit("=", 1)[1])])
    assert header["parameters"] == {"binary_data_output": True}
    assert header["id"] == "r1"
    assert "outputs" not in header


def test_bf16_matches_torch() -> None:
    values = [1.0, -2.5, 3.140625, 1e-3, 65504.0, 0.1]
    expected = torch.tensor(values, dtype=torch.bfloat16).view(torch.int16).numpy().tobytes()
    assert encode_tensor("X", "BF16", [6], values) == expected
    decoded, _ = decode_tensor("BF16", [6], expected)
    assert decoded == torch.tensor(values, dtype=torch.bfloat16).float().tolist()


def test_non_utf8_bytes_come_back_base64() -> None:
    raw = struct.pack("<I", 2) + b"\xff\xfe"
    assert decode_tensor("BYTES", [1], raw) == (["//4="], "base64")


def test_non_finite_floats_become_strings() -> None:
    raw = np.array([np.nan, np.inf, 1.0], dtype=np.float32).tobytes()
    data, _ = decode_tensor("FP32", [3], raw)
    assert data == ["nan", "inf", 1.0]


def test_large_finite_floats_stay_numbers() -> None:
    raw = np.array([1e308, 1e308, -np.inf], dtype=np.float64).tobytes()
    assert decode_tensor("FP64", [2], raw[:16])[0] == [1e308, 1e308]
    assert decode_tensor("FP64", [3], raw)[0] == [1e308, 1e308, "-inf"]


def test_truncated_tensor_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple of item size"):
        decode_tensor("FP32", [2], b"\x00" * 7)


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        ({"name": "X", "datatype": "FP32", "shape": [3], "data": [1, 2]}, r"holds 3 elements"),
        ({"name": "X", "datatype": "FP31", "shape": [1], "data": [1]}, r"unknown datatype"),
        ({"name": "X", "datatype": "INT8", "shape": [1], "data": [300]}, r"does not fit INT8"),
        ({"name": "X", "datatype": "BOOL", "shape": [1], "data": [1]}, r"true/false"),
        ({"name": "X", "datatype": "INT8", "shape": [-1], "data": [1]}, r"non-negative"),
        ({"name": "X", "datatype": "BYTES", "shape": [1], "data": [{"a": 1}]}, r"BYTES elements"),
        ({"name": "X", "shape": [1], "data": [1]}, r"needs 'name', 'datatype'"),
    ],
)
def test_bad_inputs_name_the_tensor(tensor: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        encode_request({"inputs": [tensor]})


def test_empty_inputs_are_refused() -> None:
    with pytest.raises(RequestError, match="non-empty 'inputs'"):
        encode_request({"inputs": []})


finite_floats = st.floats(allow_nan=False, allow_infinity=False, width=32)


@given(st.lists(finite_floats, min_size=0, max_size=64))
def test_fp32_round_trip(values: list[float]) -> None:
    raw = encode_tensor("X", "FP32", [len(values)], values)
    assert decode_tensor("FP32", [len(values)], raw)[0] == values


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=32))
def test_int64_round_trip(values: list[int]) -> None:
    raw = encode_tensor("X", "INT64", [len(values)], values)
    assert decode_tensor("INT64", [len(values)], raw)[0] == values


@given(st.lists(st.text(max_size=20), max_size=16))
def test_bytes_round_trip_matches_tritonclient(values: list[str]) -> None:
    raw = encode_tensor("X", "BYTES", [len(values)], values)
    if values:
        expected = serialize_byte_tensor(np.array(values, dtype=np.object_)).item()
        assert raw == expected
    assert decode_tensor("BYTES", [len(values)], raw) == (values, None)


@given(st.lists(finite_floats, min_size=1, max_size=16))
def test_bf16_round_trip_is_within_bf16_precision(values: list[float]) -> None:
    raw = encode_tensor("X", "BF16", [len(values)], values)
    decoded, _ = decode_tensor("BF16", [len(values)], raw)
    for before, after in zip(values, decoded, strict=True):
        assert math.isclose(before, after, rel_tol=2**-8, abs_tol=1e-38) or math.isinf(after)
