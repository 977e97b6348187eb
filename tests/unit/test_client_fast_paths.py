"""What the SDK works out once and reuses (a model's checks, a request header,
a response's layout, a route) changes nothing a call sees: every later call is
checked as the first one was, and a changed manifest or answer is read afresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import InvalidInputError, Manifest, ResponseFormatError, decode
from deploy.client._core import Prepared, Routes, prepare, route
from deploy.client.codec import encode_input, encode_request, encode_response


def manifest(shape: list[int], *, max_batch_size: int = 4, datatype: str = "FP32") -> Manifest:
    document = {
        "format": 1,
        "models": {
            "m": {
                "target_model": "m-1.tar.gz",
                "max_batch_size": max_batch_size,
                "inputs": [{"name": "X", "datatype": datatype, "shape": shape}],
                "outputs": [{"name": "Y", "datatype": "FP32", "shape": [2]}],
            }
        },
    }
    return Manifest.parse(document, "manifest.json")


def prepared(found: Manifest, inputs: dict[str, Any], **options: Any) -> Prepared:
    chosen = route("m", None, found, None)
    return prepare(
        chosen,
        inputs,
        options.pop("outputs", None),
        class_count=None,
        parameters=options.pop("parameters", None),
        max_payload_bytes=None,
        endpoint="e",
        manifest=found,
    )


def test_every_call_is_checked_as_the_first_was() -> None:
    found = manifest([3])
    good = np.ones((2, 3), np.float32)
    assert prepared(found, {"X": good}).size > good.nbytes
    cases: list[tuple[Any, str]] = [
        (np.ones((2, 4), np.float32), r"declares \[3\] after the batch dimension"),
        (np.ones((5, 3), np.float32), "batch size 5"),
        (np.ones(3, np.float32), "add the leading batch dimension"),
        (np.ones((2, 3), np.int32), "the model expects FP32"),
        (np.ones((2, 3), np.float64), "the model expects FP32"),
    ]
    for value, message in cases:
        with pytest.raises(InvalidInputError, match=message):
            prepared(found, {"X": value})
        assert prepared(found, {"X": good}).size > good.nbytes  # and the good one again
    with pytest.raises(InvalidInputError, match="has no input 'Z'"):
        prepared(found, {"X": good, "Z": good})
    with pytest.raises(InvalidInputError, match="needs input 'X'"):
        prepared(found, {})


def test_arrays_not_sent_as_they_are_are_converted_as_before() -> None:
    """Big-endian, strided and list inputs take the general path: the same bytes."""
    found = manifest([3])
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = prepared(found, {"X": values}).request.body
    wide = np.zeros((2, 6), np.float32)
    wide[:, ::2] = values
    for other in (values.astype(">f4"), np.asfortranarray(values), wide[:, ::2], values.tolist()):
        assert prepared(found, {"X": other}).request.body == expected
    assert expected == encode_request([encode_input("X", values)]).body


def test_a_new_manifest_is_checked_by_its_own_entry() -> None:
    """The same model name with another declared shape: the new rule applies."""
    first, second = manifest([3]), manifest([4])
    assert prepared(first, {"X": np.ones((1, 3), np.float32)})
    with pytest.raises(InvalidInputError, match=r"declares \[4\]"):
        prepared(second, {"X": np.ones((1, 3), np.float32)})
    assert prepared(second, {"X": np.ones((1, 4), np.float32)})
    assert prepared(manifest([-1]), {"X": np.ones((1, 7), np.float32)})


def test_the_input_is_sent_from_its_own_memory_and_joined_only_when_asked() -> None:
    found = manifest([1000])
    values = np.ones((1, 1000), np.float32)
    ready = prepared(found, {"X": values})
    assert np.shares_memory(np.frombuffer(ready.parts[1], np.uint8), values)
    assert ready._request is None  # nothing joined yet
    body = ready.request.body
    assert len(body) == ready.size and ready.request is ready.request
    assert body[: ready.header_size] == ready.parts[0]


def test_a_repeated_header_is_reused_only_for_the_same_inputs() -> None:
    a = encode_request([encode_input("X", np.ones((1, 3), np.float32))]).body
    b = encode_request([encode_input("X", np.ones((1, 4), np.float32))]).body
    c = encode_request([encode_input("X", np.ones((1, 3), np.int32))]).body
    d = encode_request([encode_input("X", np.array([b"ab", b"c"], dtype=object))]).body
    e = encode_request([encode_input("X", np.array([b"abc", b"c"], dtype=object))]).body
    assert b'"shape":[1,3]' in a and b'"shape":[1,4]' in b and b'"datatype":"INT32"' in c
    assert b'"binary_data_size":11' in d and b'"binary_data_size":12' in e
    again = encode_request([encode_input("X", np.ones((1, 3), np.float32))]).body
    assert again == a


def answer(values: np.ndarray[Any, Any], text: list[bytes]) -> tuple[bytes, str]:
    encoded = encode_response(
        [encode_input("Y", values), encode_input("T", np.array(text, dtype=object))]
    )
    return encoded.body, encoded.content_type


def test_a_known_answer_layout_still_reads_each_body() -> None:
    body, content_type = answer(np.array([1, 2], np.float32), [b"ab", b"cd"])
    first = decode(body, content_type)
    # Same header (same sizes), other values: the values are read from this body.
    other, _ = answer(np.array([5, 6], np.float32), [b"xy", b"zw"])
    second = decode(other, content_type)
    np.testing.assert_array_equal(first.outputs["Y"], [1, 2])
    np.testing.assert_array_equal(second.outputs["Y"], [5, 6])
    assert list(second.outputs["T"]) == [b"xy", b"zw"]
    assert first.parameters == {} and first.parameters is not second.parameters


def test_a_known_header_over_a_broken_body_is_still_refused() -> None:
    body, content_type = answer(np.array([1, 2], np.float32), [b"ab", b"cd"])
    decode(body, content_type)
    with pytest.raises(ResponseFormatError, match="truncated"):
        decode(body[:-1], content_type)
    with pytest.raises(ResponseFormatError, match="after the last output"):
        decode(body + b"\0", content_type)
    # BYTES contents are parsed every time: a bad length inside is caught.
    broken = bytearray(body)
    broken[-6:-2] = (99).to_bytes(4, "little")
    with pytest.raises(ResponseFormatError, match="claims 99 bytes"):
        decode(bytes(broken), content_type)


def test_outputs_of_one_answer_view_one_buffer_read_only() -> None:
    encoded = encode_response(
        [
            encode_input("A", np.arange(3, dtype=np.float32)),
            encode_input("B", np.arange(2, dtype=np.int64)),
        ]
    )
    for _ in range(2):  # the first decode and the one from the known layout
        outputs = decode(encoded.body, encoded.content_type).outputs
        whole = np.frombuffer(encoded.body, np.uint8)
        for array in outputs.values():
            assert np.shares_memory(array, whole)
            assert not array.flags.writeable and not array.flags.owndata
    mutable = bytearray(encoded.body)
    writable = decode(mutable, encoded.content_type).outputs["A"]
    writable[0] = 7  # a bytearray answer gives writable views into it
    assert np.frombuffer(mutable, np.float32, 1, len(mutable) - 28)[0] == 7


def test_routes_are_kept_per_manifest(tmp_path: Path) -> None:
    routes = Routes()
    first, second = manifest([3]), manifest([3])
    a = routes.get("m", None, first, None)
    assert routes.get("m", None, first, None) is a
    b = routes.get("m", None, second, None)
    assert b is not a and b.info is second.models["m"]
    assert routes.get("m", "other.tar.gz", second, None).target_model == "other.tar.gz"
    assert routes.get("x.tar.gz", None, None, "no manifest").target_model == "x.tar.gz"
