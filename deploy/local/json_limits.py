"""Limits on the JSON tritonserver parses, checked before a request reaches it.

tritonserver parses a v2 inference request with a recursive JSON parser: a
body nested ~200k levels deep (400 KB) overflows its stack and the server
segfaults, taking every loaded model down. A v2 request needs only a few
levels (request → inputs → input → data, plus one per tensor dimension when
`data` is nested by shape), so bodies nested deeper than `MAX_JSON_DEPTH` are
refused here.

Which bytes Triton reads as JSON (server `src/sagemaker_server.cc`,
`GetInferenceHeaderLength`): the whole body, unless the Content-Type has
`application/vnd.sagemaker-triton.binary+json;json-header-size=N`, in which
case only the first N bytes (N = 0: none, the body is one raw input). N
must lie within the body.

The check costs two byte counts for an ordinary request; deeper analysis
(escapes and strings removed with C-speed regex and translate, then a prefix
sum over the brackets) runs only when a body has more brackets than the limit.
"""

from __future__ import annotations

import re

BINARY_JSON = b"application/vnd.sagemaker-triton.binary+json;json-header-size="
MAX_JSON_DEPTH = 64

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_MARKS = b'"[]{}'
_NOT_MARKS = bytes(b for b in range(256) if b not in _MARKS)
# Opening brackets become +1, closing ones -1 (as signed bytes).
_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def _declared_size(content_type: bytes | None) -> int | str | None:
    """The JSON header size a Content-Type declares (None: the whole body), or why
    it is refused."""
    if content_type is None or BINARY_JSON not in content_type:
        return None
    if not content_type.startswith(BINARY_JSON):
        return None  # Triton refuses this itself, before parsing anything
    value = content_type[len(BINARY_JSON) :].strip()
    if not value.isdigit():
        return (
            f"json-header-size={value.decode('latin-1')!r} is not a whole number of bytes; "
            "send the length of the JSON header that starts the body"
        )
    return int(value)


# Clients send the same few Content-Types over and over (the header size varies
# with the request's shape): remember what each declares.
_DECLARED: dict[bytes | None, int | str | None] = {}
_DECLARED_KEPT = 4096


def json_header_size(content_type: bytes | None, body_size: int) -> int | str:
    """Bytes of the body Triton parses as JSON, or why the Content-Type is refused."""
    try:
        size = _DECLARED[content_type]
    except KeyError:
        size = _declared_size(content_type)
        if len(_DECLARED) >= _DECLARED_KEPT:
            _DECLARED.clear()
        _DECLARED[content_type] = size
    if size is None:
        return body_size
    if isinstance(size, int) and size > body_size:
        return (
            f"json-header-size={size} is larger than the request body ({body_size} bytes): "
            f"the JSON header can be at most {body_size} bytes"
        )
    return size


def deeper_than(text: bytes, limit: int) -> bool:
    """True when the JSON `text` nests arrays and objects more than `limit` levels.

    Brackets inside strings do not count; malformed JSON (an unterminated
    string, stray closing brackets) is judged conservatively: Triton refuses
    it anyway, and a recursive parser may go deep before it notices.
    """
    if text.count(b"[") + text.count(b"{") <= limit:
        return False  # cannot be deeper: the ordinary request ends here
    if b"\\" in text:
        text = _ESCAPE.sub(b"", text)  # escapes only occur in strings
    marks = text.translate(None, _NOT_MARKS)
    if b'"' in marks:
        marks = _STRING.sub(b"", marks)
    signs = marks.translate(_SIGNS)
    if b"\x01" * (limit + 1) in signs:
        return True  # the common attack, found without summing
    # Data nested by shape (`[[1, 2], [3, 4], ...]`) has many innermost pairs:
    # removing them lowers the depth by exactly one per pass, at C speed.
    for _ in range(3):
        if len(signs) <= 1024:
            break
        signs = signs.replace(b"\x01\xff", b"")
        limit -= 1
    depth = deepest = 0
    for step in memoryview(signs).cast("b"):
        depth += step
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return True
    return False


def json_problem(
    content_type: bytes | None, body: list[bytes], body_size: int, max_depth: int = MAX_JSON_DEPTH
) -> str | None:
    """Why tritonserver must not parse this request body, or None when it may."""
    size = json_header_size(content_type, body_size)
    if isinstance(size, str):
        return size
    if size == 0:
        return None
    first = body[0] if body else b""
    if len(first) >= size:  # the JSON is all in the first chunk (any request of a few MB)
        if first.count(b"[", 0, size) + first.count(b"{", 0, size) <= max_depth:
            return None  # the ordinary request: counted in place, nothing copied
        text = first[:size]
    else:
        text = _leading(body, size)
    if deeper_than(text, max_depth):
        return (
            f"the request's JSON nests arrays and objects more than {max_depth} levels deep; "
            f"the endpoint accepts at most {max_depth} (a v2 inference request needs a few)"
        )
    return None


def _leading(body: list[bytes], size: int) -> bytes:
    """The first `size` bytes of a body that arrived in chunks, joining only those."""
    taken: list[bytes] = []
    have = 0
    for chunk in body:
        if have >= size:
            break
        taken.append(chunk)
        have += len(chunk)
    return b"".join(taken)[:size]
