"""`deploy.local.http.json_limits`: the nesting depth Triton would recurse to, and which
bytes of a request it parses as JSON."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.local.http.json_limits import (
    BINARY_JSON,
    JsonScanner,
    deeper_than,
    json_header_size,
    json_problem,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(alphabet=st.sampled_from('[]{}"\\ab\n'), max_size=8),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(alphabet=st.sampled_from('[]{}"\\k'), max_size=4), children),
    ),
    max_leaves=40,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def nest(value: Any, levels: int) -> Any:
    for index in range(levels):
        value = [value] if index % 2 else {"k[": value}
    return value


@settings(max_examples=400, deadline=None)
@given(documents, st.integers(0, 40), st.integers(0, 12))
def test_depth_matches_the_document_whatever_its_strings_hold(
    document: Any, extra: int, limit: int
) -> None:
    value = nest(document, extra)
    text = json.dumps(value).encode()
    assert deeper_than(text, limit) == (depth(value) > limit)


def test_long_bodies_are_judged_alike() -> None:
    # Over 1 KiB of brackets takes the path that strips innermost pairs first.
    rows = [[[i, i + 1]] * 3 for i in range(400)]
    assert not deeper_than(json.dumps(rows).encode(), 3)
    assert deeper_than(json.dumps(rows).encode(), 2)
    deep = nest(rows, 62)
    assert deeper_than(json.dumps(deep).encode(), 64)
    assert not deeper_than(json.dumps(deep).encode(), 65)


def test_the_attack_is_found_fast() -> None:
    assert deeper_than(b"[" * 200_000 + b"]" * 200_000, 64)
    assert deeper_than(b'{"a":' * 100 + b"1" + b"}" * 100, 64)
    assert deeper_than(b"[" * 100, 64)  # never closed: a recursive parser goes deep first


def test_which_bytes_triton_parses_as_json() -> None:
    assert json_header_size(None, 10) == 10
    assert json_header_size(b"application/json", 10) == 10
    assert json_header_size(BINARY_JSON + b"4", 10) == 4
    assert json_header_size(BINARY_JSON + b"0", 10) == 0
    assert json_header_size(b"x;" + BINARY_JSON + b"4", 10) == 10  # Triton refuses it itself
    assert "larger than the request body (10 bytes)" in str(
        json_header_size(BINARY_JSON + b"11", 10)
    )
    assert "not a whole number" in str(json_header_size(BINARY_JSON + b"-1", 10))
    assert "not a whole number" in str(json_header_size(BINARY_JSON + b"9" * 5000, 10))


def test_binary_tensor_bytes_are_not_json() -> None:
    header = b'{"inputs": []}'
    body = header + b"[" * 1000
    content_type = BINARY_JSON + str(len(header)).encode()
    assert json_problem(content_type, [body], len(body)) is None
    assert json_problem(b"application/json", [body], len(body)) is not None
    # split across reads, as the front end receives large bodies
    parts = [body[:5], body[5:9], body[9:]]
    assert json_problem(content_type, parts, len(body)) is None
    assert "more than 64 levels" in str(json_problem(None, parts, len(body)))


def _fed(text: bytes, cuts: list[int], limit: int) -> bool:
    """Whether a scanner fed `text` in pieces cut at `cuts` refuses it."""
    scanner = JsonScanner(len(text), limit)
    edges = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    for start, end in itertools.pairwise(edges):
        scanner.feed(text[start:end])
    return scanner.problem is not None


@settings(max_examples=400, deadline=None)
@given(documents, st.integers(0, 40), st.integers(0, 12), st.lists(st.integers(0, 10**6)))
def test_chunks_cut_anywhere_are_judged_as_the_whole(
    document: Any, extra: int, limit: int, cuts: list[int]
) -> None:
    # Cuts fall inside strings, between a backslash and what it escapes, between brackets.
    value = nest(document, extra)
    text = json.dumps(value).encode()
    assert _fed(text, cuts, limit) == (depth(value) > limit)


def test_the_attack_is_found_in_a_stream_before_its_end() -> None:
    scanner = JsonScanner(2_000_000)
    chunks = [b'{"inputs": [{"data": ' + b"[" * 65536, b"[" * 65536, b"]" * 65536]
    assert scanner.feed(chunks[0]) is not None
    assert "more than 64 levels" in str(scanner.problem)
    assert scanner.feed(chunks[1]) == scanner.problem  # stays refused


def test_an_escaped_quote_cut_between_chunks_does_not_close_the_string() -> None:
    # '"\\"' + brackets inside the string: cut after the backslash.
    text = b'["a\\"' + b"[" * 100 + b'"]'
    assert not deeper_than(text, 2)
    assert not _fed(text, [4], 2)
    assert not _fed(text, [3, 4, 5], 2)


def test_a_stream_scans_only_the_declared_json_header() -> None:
    header = b'{"inputs": []}'
    body = header + b"[" * 1000
    content_type = BINARY_JSON + str(len(header)).encode()
    scanner = JsonScanner.for_body(content_type, len(body))
    assert scanner.problem is None
    assert all(scanner.feed(body[i : i + 3]) is None for i in range(0, len(body), 3))
    assert scanner.remaining == 0
    refused = JsonScanner.for_body(BINARY_JSON + b"99", 10)
    assert "larger than the request body" in str(refused.feed(b"0123456789"))
