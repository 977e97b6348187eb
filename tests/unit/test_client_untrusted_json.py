"""Deep or huge JSON from an endpoint or a manifest is an SDK error, never a crash.

Python's JSON parser raises RecursionError on deep nesting; every place the SDK
parses JSON (the manifest, KServe JSON and binary+json responses, the header of
an asynchronous answer, error answers) must turn that into `ManifestError` or
`ResponseFormatError`, and a manifest over the contract's size limit is refused
before it is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.client import Manifest, ManifestError, ResponseFormatError, decode
from deploy.client._async import _answer_from_http
from deploy.client._async_inference import _content_type
from deploy.client._failures import answer_from_response
from deploy.client.codec import BINARY_CONTENT_TYPE
from deploy.client.manifest import MAX_MANIFEST_BYTES

DEPTH = 100_000
DEEP = b"[" * DEPTH + b"]" * DEPTH
DEEP_OBJECT = b'{"outputs": ' + DEEP + b"}"


def test_a_deeply_nested_manifest_is_a_manifest_error() -> None:
    with pytest.raises(ManifestError, match="nested too deeply") as raised:
        Manifest.from_bytes(
            b'{"format": 1, "models": {"m": ' + DEEP + b"}}", "s3://b/manifest.json"
        )
    assert raised.value.where == "s3://b/manifest.json"


def test_a_deeply_nested_manifest_file_is_a_manifest_error(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(DEEP)
    with pytest.raises(ManifestError, match="nested too deeply"):
        Manifest.from_path(path)


def test_a_manifest_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    # A sparse 400 MB file: refused from its size, before a byte is read.
    path = tmp_path / "manifest.json"
    with path.open("wb") as stream:
        stream.truncate(400 * 1024 * 1024)
    with pytest.raises(ManifestError) as raised:
        Manifest.from_path(path)
    assert f"has {400 * 1024 * 1024} bytes, over the {MAX_MANIFEST_BYTES}-byte limit" in str(
        raised.value
    )
    path.unlink()
    with pytest.raises(ManifestError, match=f"over the {MAX_MANIFEST_BYTES}-byte limit"):
        Manifest.from_bytes(b" " * (MAX_MANIFEST_BYTES + 1), "manifest.json")


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (DEEP_OBJECT, "application/json"),
        (DEEP, None),
        (DEEP_OBJECT + b"\0" * 8, f"{BINARY_CONTENT_TYPE};json-header-size={len(DEEP_OBJECT)}"),
    ],
    ids=["kserve-json", "no-content-type", "binary+json-header"],
)
def test_a_deeply_nested_response_is_a_response_format_error(
    body: bytes, content_type: str | None
) -> None:
    with pytest.raises(ResponseFormatError, match="nested too deeply"):
        decode(body, content_type)


def test_a_deeply_nested_asynchronous_answer_is_a_response_format_error() -> None:
    # An answer object without Triton's content type: its JSON header's end is searched.
    with pytest.raises(ResponseFormatError, match="nested too deeply"):
        _content_type(b'{"outputs": ' + b"[" * 2000 + b"]" * 2000 + b"}\0\0", None)
    with pytest.raises(ResponseFormatError, match="nested too deeply"):
        _content_type(DEEP_OBJECT + b"\0\0", "binary/octet-stream")


def test_deep_or_huge_error_answers_are_read_as_text() -> None:
    answer = answer_from_response(400, {}, DEEP)
    assert answer.status == 400 and answer.message.startswith("[[[")
    huge = b'{"message": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    answer = answer_from_response(400, {}, huge)
    assert len(answer.message) == 4096 and answer.message.startswith('{"message": "xxx')
    assert _answer_from_http(400, {}, DEEP).status == 400
    assert _answer_from_http(400, {}, DEEP_OBJECT).message.startswith('{"outputs"')
