"""Routing to asynchronous endpoints and the async lane, and each mode's payload limit.

Pure functions: the manifest's async sections, where a request goes, and the
errors for requests no route takes.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
import pytest

from deploy.client import AsyncInferenceOptions, Manifest, ManifestError, PayloadTooLargeError
from deploy.client._async_inference import _content_type
from deploy.client._core import ASYNC_MAX_REQUEST, DEFAULT_MAX_PAYLOAD, Prepared, prepare, route
from deploy.client.codec import decode_response, encode_input, encode_response

PREFIXES = {
    "input_prefix": "s3://store/async/ep-async/input/",
    "output_prefix": "s3://store/async/ep-async/output/",
    "failure_prefix": "s3://store/async/ep-async/failure/",
}
STRINGS = {
    "name": "strings",
    "target_model": "strings-0123456789abcdef.tar.gz",
    "max_batch_size": 0,
    "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [-1]}],
    "outputs": [{"name": "LENGTHS", "datatype": "INT32", "shape": [-1]}],
}


def manifest(hosting: str = "multi-model", **sections: Any) -> Manifest:
    document = {"format": 1, "hosting": hosting, "models": {"strings": STRINGS}, **sections}
    return Manifest.parse(document, "manifest.json")


def text_of(size: int) -> dict[str, Any]:
    # One BYTES element of `size` bytes (4 more on the wire for its length).
    return {"TEXT": np.array([b"x" * size], dtype=object)}


def prepared(chosen_manifest: Manifest, inputs: dict[str, Any], **kw: Any) -> Prepared:
    chosen = route("strings", None, chosen_manifest, None)
    return prepare(
        chosen,
        inputs,
        None,
        class_count=None,
        parameters=None,
        max_payload_bytes=kw.pop("limit", None),
        endpoint="ep",
        manifest=chosen_manifest,
    )


def parameters(request: Prepared) -> dict[str, Any]:
    header = json.loads(request.request.body[: request.request.header_size])
    return dict(header.get("parameters", {}))


def test_async_manifest_needs_its_prefixes() -> None:
    # A package's manifest before `deploy up` binds it to a stage has none: refused on use.
    unbound = manifest("async")
    with pytest.raises(ManifestError, match="hosting async but names no S3 prefixes"):
        route("strings", None, unbound, None)
    broken = {**PREFIXES, "failure_prefix": "s3://store/no-slash"}
    with pytest.raises(ManifestError, match="failure_prefix 's3://store/no-slash'"):
        manifest("async", async_inference=broken)
    lane = {"input_prefix": PREFIXES["input_prefix"]}
    with pytest.raises(ManifestError, match="async_lane: has no endpoint_name"):
        manifest(async_lane=lane)


def test_async_endpoint_routes_by_parameter_through_s3() -> None:
    document = manifest("async", async_inference=PREFIXES)
    request = prepared(document, text_of(10))
    assert request.route.target_model is None
    assert request.route.asynchronous is not None
    assert request.route.asynchronous.endpoint is None  # the endpoint itself
    assert request.route.asynchronous.locations.failure_prefix == PREFIXES["failure_prefix"]
    assert parameters(request)["target_model"] == "strings"


def test_async_endpoint_takes_requests_over_six_megabytes() -> None:
    document = manifest("async", async_inference=PREFIXES)
    request = prepared(document, text_of(DEFAULT_MAX_PAYLOAD + 1))
    assert len(request.request.body) > DEFAULT_MAX_PAYLOAD


def test_async_endpoint_refuses_over_its_limit_with_both_sizes() -> None:
    document = manifest("async", async_inference=PREFIXES)
    with pytest.raises(PayloadTooLargeError) as raised:
        prepared(document, text_of(2000), limit=1000)
    error = raised.value
    assert error.limit == 1000 and error.size > 2000 and error.hosting == "async"
    assert error.alternative is None
    assert f"{error.size} bytes, over the async endpoint's limit of 1000 bytes" in str(error)
    assert "no hosting mode takes a larger request" in str(error)


def test_real_time_request_over_six_megabytes_names_the_async_mode() -> None:
    with pytest.raises(PayloadTooLargeError) as raised:
        prepared(manifest(), text_of(DEFAULT_MAX_PAYLOAD))
    error = raised.value
    assert (error.limit, error.hosting, error.alternative) == (
        DEFAULT_MAX_PAYLOAD,
        "multi-model",
        "async",
    )
    text = str(error)
    assert (
        f"{error.size} bytes, over the multi-model endpoint's limit of {DEFAULT_MAX_PAYLOAD}"
        in text
    )
    assert f"hosting 'async' takes requests up to {ASYNC_MAX_REQUEST} bytes" in text
    assert "async_lane" in (error.fix or "")


def test_lane_takes_large_requests_and_leaves_small_ones(caplog: pytest.LogCaptureFixture) -> None:
    lane = {"endpoint_name": "ep-async", **PREFIXES}
    document = manifest(async_lane=lane)
    small = prepared(document, text_of(1024 * 1024))
    assert small.route.asynchronous is None
    assert small.route.target_model == STRINGS["target_model"]
    assert "target_model" not in parameters(small)

    with caplog.at_level(logging.DEBUG, logger="deploy.client"):
        large = prepared(document, text_of(DEFAULT_MAX_PAYLOAD))
    assert large.route.target_model is None
    assert large.route.asynchronous is not None
    assert large.route.asynchronous.endpoint == "ep-async"
    assert parameters(large)["target_model"] == "strings"
    (record,) = [r for r in caplog.records if "async lane" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    assert "'ep-async'" in record.getMessage() and PREFIXES["input_prefix"] in record.getMessage()


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="invocation_timeout"):
        AsyncInferenceOptions(invocation_timeout=3601)
    with pytest.raises(ValueError, match="part_size"):
        AsyncInferenceOptions(part_size=1024)


def test_answer_without_header_size_is_still_decoded() -> None:
    # The answer object should carry Triton's content type; if S3 kept another one,
    # the JSON header's end is found in the body.
    lengths = encode_input("LENGTHS", np.array([3, 1], dtype=np.int32))
    body = encode_response([lengths]).body
    content_type = _content_type(body, "application/octet-stream")
    decoded = decode_response(body, content_type)
    assert decoded.outputs["LENGTHS"].tolist() == [3, 1]
    assert _content_type(b'{"outputs": []}', None) == "application/json"
