"""The SDK's v2 binary codec: per-datatype interop with tritonclient, round trips, errors."""

from __future__ import annotations

import json
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as httpclient
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from deploy.client import (
    InvalidInputError,
    ResponseFormatError,
    Tensor,
    decode,
    encode,
    from_bfloat16,
    to_bfloat16,
)
from deploy.client.codec import (
    BINARY_CONTENT_TYPE,
    decode_request,
    encode_input,
    encode_response,
    header_size_of,
)

NUMERIC = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


def sample(datatype: str) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(7)
    if datatype == "BOOL":
        return rng.integers(0, 2, size=(2, 3)).astype(np.bool_)
    if datatype == "BYTES":
        return np.array([[b"a\x00b", b""], ["h\u00e9", b"\x00\x00"]], dtype=object)
    if datatype == "BF16":
        return rng.standard_normal((2, 3)).astype(ml_dtypes.bfloat16)
    dtype = np.dtype(NUMERIC[datatype])
    if dtype.kind == "f":
        return rng.standard_normal((2, 3)).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=(2, 3), dtype=dtype, endpoint=True)


def content_type(size: int) -> str:
    return f"{BINARY_CONTENT_TYPE};json-header-size={size}"


def expected_bytes(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.vectorize(lambda x: x.encode() if isinstance(x, str) else x, otypes=[object])(array)


ALL = [*NUMERIC, "BF16", "BYTES"]


@pytest.mark.parametrize("datatype", ALL)
def test_tritonclient_request_decodes_with_our_codec(datatype: str) -> None:
    array = sample(datatype)
    tensor = httpclient.InferInput("X", list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=True)
    body, header_length = httpclient.InferenceServerClient.generate_request_body([tensor])

    decoded = decode_request(body, content_type(header_length))

    got = decoded.outputs["X"]
    assert decoded.datatypes["X"] == datatype
    if datatype == "BYTES":
        np.testing.assert_array_equal(got, expected_bytes(array))
    elif datatype == "BF16":
        np.testing.assert_array_equal(got, array.view(np.uint16))
    else:
        np.testing.assert_array_equal(got, array)
        assert got.dtype == array.dtype


@pytest.mark.parametrize("datatype", ALL)
def test_our_response_parses_with_tritonclient(datatype: str) -> None:
    array = sample(datatype)
    body = encode_response([encode_input("Y", array)])

    result = httpclient.InferenceServerClient.parse_response_body(
        body.body, header_length=body.header_size
    )

    got = result.as_numpy("Y")
    if datatype == "BYTES":
        np.testing.assert_array_equal(got, expected_bytes(array))
    elif datatype == "BF16":
        np.testing.assert_array_equal(got.view(np.uint16), array.view(np.uint16))
    else:
        np.testing.assert_array_equal(got, array)


@pytest.mark.parametrize("datatype", ALL)
def test_our_request_matches_tritonclient_request(datatype: str) -> None:
    array = sample(datatype)
    tensor = httpclient.InferInput("X", list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=True)
    theirs, their_size = httpclient.InferenceServerClient.generate_request_body([tensor])

    ours = encode({"X": array})

    assert json.loads(ours.body[: ours.header_size]) == json.loads(theirs[:their_size])
    assert ours.body[ours.header_size :] == theirs[their_size:]
    assert ours.content_type == content_type(ours.header_size)


def test_outputs_are_zero_copy_views_of_the_body() -> None:
    array = np.arange(1000, dtype=np.float32)
    body = encode_response([encode_input("Y", array)]).body

    out = decode(body, content_type(len(body) - array.nbytes)).outputs["Y"]

    assert np.shares_memory(out, np.frombuffer(body, dtype=np.uint8))
    assert not out.flags.writeable


def test_json_response_is_decoded() -> None:
    header = {
        "model_name": "m",
        "outputs": [
            {"name": "A", "datatype": "FP32", "shape": [2, 2], "data": [1, 2.5, 3, 4]},
            {"name": "B", "datatype": "BYTES", "shape": [2], "data": ["x", "y\u00e9"]},
            {"name": "C", "datatype": "BOOL", "shape": [1], "data": [True]},
            {"name": "D", "datatype": "INT64", "shape": [2], "data": [[-1], [2]]},
        ],
    }
    decoded = decode(json.dumps(header).encode(), "application/json")
    np.testing.assert_array_equal(decoded.outputs["A"], [[1, 2.5], [3, 4]])
    assert decoded.outputs["B"].tolist() == [b"x", "y\u00e9".encode()]
    assert decoded.outputs["C"].dtype == np.bool_
    assert decoded.outputs["D"].tolist() == [-1, 2]
    assert decoded.model_name == "m"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"datatype": "FP32", "shape": [3], "data": [1, 2]}, "2 JSON values but shape"),
        ({"datatype": "INT8", "shape": [1], "data": [300]}, "out of range"),
        ({"datatype": "INT32", "shape": [1], "data": [1.5]}, "not INT32"),
        ({"datatype": "BOOL", "shape": [1], "data": [1]}, "not BOOL"),
        ({"datatype": "FP32", "shape": [1], "data": ["1"]}, "not FP32"),
        ({"datatype": "FP32", "shape": [1]}, "neither binary data nor JSON"),
        ({"datatype": "FP33", "shape": [1], "data": [1]}, "unknown datatype 'FP33'"),
        ({"datatype": "FP32", "shape": [-1], "data": [1]}, "invalid shape"),
    ],
)
def test_malformed_json_outputs_name_the_problem(entry: dict[str, Any], message: str) -> None:
    body = json.dumps({"outputs": [{"name": "OUT", **entry}]}).encode()
    with pytest.raises(ResponseFormatError, match=message) as caught:
        decode(body, "application/json")
    assert "OUT" in str(caught.value) or "FP33" in str(caught.value)


def binary_response(*arrays: tuple[str, Any]) -> tuple[bytes, int]:
    encoded = encode_response([encode_input(name, array) for name, array in arrays])
    return encoded.body, encoded.header_size


def test_lying_binary_size_is_reported() -> None:
    body, size = binary_response(("A", np.arange(4, dtype=np.float32)))
    header = json.loads(body[:size])
    header["outputs"][0]["parameters"]["binary_data_size"] = 12
    head = json.dumps(header).encode()
    forged = head + body[size:]
    with pytest.raises(
        ResponseFormatError, match=r"'A'.*12 bytes but shape \[4\] of FP32 needs 16"
    ):
        decode(forged, content_type(len(head)))


def test_missing_header_size_on_binary_content_type() -> None:
    with pytest.raises(ResponseFormatError, match="json-header-size"):
        header_size_of(BINARY_CONTENT_TYPE)
    with pytest.raises(ResponseFormatError, match="non-numeric"):
        header_size_of(BINARY_CONTENT_TYPE + ";json-header-size=-3")
    assert header_size_of("application/json") is None
    assert header_size_of(f"{BINARY_CONTENT_TYPE}; JSON-Header-Size=12") == 12


def test_truncated_bytes_element_is_reported() -> None:
    body, size = binary_response(("S", np.array([b"hello", b"world"], dtype=object)))
    header = json.loads(body[:size])
    header["outputs"][0]["parameters"]["binary_data_size"] -= 3
    head = json.dumps(header).encode()
    with pytest.raises(ResponseFormatError, match="element 1 claims 5 bytes but only 2 remain"):
        decode(head + body[size:-3], content_type(len(head)))


def test_error_body_becomes_model_error() -> None:
    from deploy.client import ModelError

    with pytest.raises(ModelError, match="bad input"):
        decode(b'{"error": "bad input"}', "application/json")


def test_bfloat16_rounds_to_nearest_even_and_widens_exactly() -> None:
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, 3.0e38], dtype=np.float32)
    bits = to_bfloat16(values)
    np.testing.assert_array_equal(bits, values.astype(ml_dtypes.bfloat16).view(np.uint16))
    np.testing.assert_array_equal(from_bfloat16(bits), values.astype(ml_dtypes.bfloat16))
    assert np.isnan(from_bfloat16(to_bfloat16(np.array([np.nan], np.float32))))[0]


def test_bf16_input_from_float32_or_bits() -> None:
    values = np.array([0.1, 0.2], dtype=np.float32)
    from_floats = encode({"X": Tensor(values, "BF16")})
    from_bits = encode({"X": Tensor(to_bfloat16(values), "BF16")})
    assert from_floats.body == from_bits.body
    with pytest.raises(InvalidInputError, match="BF16 needs uint16"):
        encode({"X": Tensor(np.array([1], np.int32), "BF16")})


def test_input_dtype_mismatch_names_the_tensor() -> None:
    with pytest.raises(InvalidInputError, match=r"input 'X'.*int64 \(INT64\).*FP32"):
        encode_input("X", np.array([1, 2]), "FP32")
    with pytest.raises(InvalidInputError, match=r"input 'T'.*BYTES elements must be bytes or str"):
        encode({"T": np.array([1, "a"], dtype=object)})
    with pytest.raises(InvalidInputError, match="no Triton datatype"):
        encode({"C": np.array([1 + 2j])})


def test_big_endian_input_is_converted() -> None:
    array = np.arange(4, dtype=">f4")
    body = encode({"X": array})
    decoded = decode_request(body.body, body.content_type)
    np.testing.assert_array_equal(decoded.outputs["X"], array)


def test_class_count_requests_classification_per_output() -> None:
    request = encode({"X": np.zeros(3, np.float32)}, ["P"], class_count=3)
    header = json.loads(request.body[: request.header_size])
    assert header["outputs"] == [
        {"name": "P", "parameters": {"binary_data": True, "classification": 3}}
    ]
    assert "parameters" not in header
    with pytest.raises(InvalidInputError, match="class_count needs the output names"):
        encode({"X": np.zeros(3, np.float32)}, class_count=3)


# -- property-based round trips ---------------------------------------------------------

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
numeric_arrays = st.sampled_from(sorted(NUMERIC)).flatmap(
    lambda name: hnp.arrays(np.dtype(NUMERIC[name]), shapes)
)
byte_strings = st.one_of(st.binary(max_size=12), st.text(max_size=6))
bytes_arrays = shapes.flatmap(
    lambda shape: hnp.arrays(np.dtype(object), shape, elements=byte_strings)
)


@settings(max_examples=150, deadline=None)
@given(arrays=st.lists(st.one_of(numeric_arrays, bytes_arrays), min_size=1, max_size=4))
def test_round_trip_any_dtype_and_shape(arrays: list[np.ndarray[Any, Any]]) -> None:
    named = {f"T{index}": array for index, array in enumerate(arrays)}
    body = encode_response([encode_input(name, array) for name, array in named.items()])

    decoded = decode(body.body, body.content_type)

    assert list(decoded.outputs) == list(named)
    for name, array in named.items():
        got = decoded.outputs[name]
        assert got.shape == array.shape
        if array.dtype == object:
            assert got.tolist() == expected_bytes(array).tolist()
        else:
            assert got.dtype == array.dtype
            np.testing.assert_array_equal(got, array)


# -- fuzzing the response parser ----------------------------------------------------------

SEED_BODY, SEED_HEADER = binary_response(
    ("A", np.arange(6, dtype=np.float32).reshape(2, 3)),
    ("S", np.array([b"x\x00y", b"", b"zz"], dtype=object)),
    ("B", np.array([True, False])),
)


def decode_or_format_error(body: bytes, content: str) -> None:
    """The parser may refuse (with our error) but never crash or mis-shape."""
    try:
        decoded = decode(body, content)
    except ResponseFormatError:
        return
    for name, array in decoded.outputs.items():
        assert isinstance(array, np.ndarray), name


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(SEED_BODY) - 1))
def test_any_truncation_is_an_error(cut: int) -> None:
    with pytest.raises(ResponseFormatError):
        decode(SEED_BODY[:cut], content_type(SEED_HEADER))


@settings(max_examples=300, deadline=None)
@given(delta=st.integers(min_value=-SEED_HEADER, max_value=200).filter(lambda d: d != 0))
def test_any_lying_header_size_is_an_error(delta: int) -> None:
    with pytest.raises(ResponseFormatError):
        decode(SEED_BODY, content_type(SEED_HEADER + delta))


@settings(max_examples=500, deadline=None)
@given(
    flips=st.lists(
        st.tuples(st.integers(0, len(SEED_BODY) - 1), st.integers(0, 7)), min_size=1, max_size=4
    )
)
def test_bit_flips_never_crash(flips: list[tuple[int, int]]) -> None:
    mutated = bytearray(SEED_BODY)
    for position, bit in flips:
        mutated[position] ^= 1 << bit
    decode_or_format_error(bytes(mutated), content_type(SEED_HEADER))


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(max_size=64), size=st.integers(0, 80))
def test_random_bodies_never_crash(garbage: bytes, size: int) -> None:
    decode_or_format_error(garbage, content_type(size))
    decode_or_format_error(garbage, "application/json")


def test_forged_huge_bytes_shape_is_refused_without_allocating() -> None:
    body, size = binary_response(("S", np.array([b"ab"], dtype=object)))
    header = json.loads(body[:size])
    header["outputs"][0]["shape"] = [10**12]
    head = json.dumps(header).encode()
    with pytest.raises(ResponseFormatError, match="cannot hold 1000000000000 elements"):
        decode(head + body[size:], content_type(len(head)))


def test_python_lists_take_the_declared_datatype() -> None:
    item = encode_input("X", [[1, 2.5]], "FP32")
    assert (item.datatype, item.shape, item.nbytes) == ("FP32", (1, 2), 8)
    assert encode_input("T", ["a", b"b"], "BYTES").nbytes == 10
    assert encode_input("B", [1.0], "BF16").nbytes == 2
    with pytest.raises(InvalidInputError, match=r"input 'X'.*not INT8"):
        encode_input("X", [1000], "INT8")
    # Arrays keep their dtype: a mismatch is the caller's to fix, not silently cast.
    with pytest.raises(InvalidInputError, match="FP32"):
        encode_input("X", np.array([1.0]), "FP32")
