"""`deploy.local.json_limits`: the nesting depth Triton would recurse to, and which
bytes of a request it parses as JSON."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.local.json_limits import BINARY_JSON, deeper_than, json_header_size, json_problem

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
