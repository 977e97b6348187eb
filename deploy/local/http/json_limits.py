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

One scanner (`JsonScanner`) judges a body chunk by chunk as it arrives, so
a body streamed from S3 to Triton is checked before each chunk is sent, and
never held whole. The real-time front end, which has the whole body, uses
the same scanner behind a cheaper test: an ordinary request has fewer
brackets than the limit, which two byte counts show. A chunk is judged with
C-speed steps: escapes and strings removed (regex, translate), then the
running depth over the brackets that remain; the scanner keeps only the
depth, whether a string is open, and an escape cut by the chunk's end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import accumulate

BINARY_JSON = b"application/vnd.sagemaker-triton.binary+json;json-header-size="
MAX_JSON_DEPTH = 64

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_DECIMAL = re.compile(rb"[0-9]{1,4000}")
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
    if not _DECIMAL.fullmatch(value):  # ASCII digits; int() refuses over 4300 of them
        shown = value[:40].decode("latin-1") + ("..." if len(value) > 40 else "")
        return (
            f"json-header-size={shown!r} is not a whole number of bytes; "
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


def depth_problem(max_depth: int) -> str:
    return (
        f"the request's JSON nests arrays and objects more than {max_depth} levels deep; "
        f"the endpoint accepts at most {max_depth} (a v2 inference request needs a few)"
    )


class JsonScanner:
    """Judges the first `json_size` bytes of a body, fed in chunks as they arrive.

    `feed` returns why Triton must not parse the body (the depth limit was
    passed), or None so far. Brackets inside strings do not count; malformed
    JSON (an unterminated string, stray closing brackets) is judged
    conservatively: Triton refuses it anyway, and a recursive parser may go
    deep before it notices.
    """

    __slots__ = ("_cut_escape", "_depth", "_in_string", "max_depth", "problem", "remaining")

    def __init__(self, json_size: int, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.remaining = json_size  # JSON bytes still to come
        self.max_depth = max_depth
        self.problem: str | None = None
        self._depth = 0
        self._in_string = False
        self._cut_escape = False  # the last chunk ended inside an escape (a lone backslash)

    @classmethod
    def for_body(
        cls, content_type: bytes | None, body_size: int, max_depth: int = MAX_JSON_DEPTH
    ) -> JsonScanner:
        """A scanner for a body of `body_size` bytes sent with `content_type`; its
        `problem` is set at once when the Content-Type's JSON header size is refused."""
        size = json_header_size(content_type, body_size)
        if isinstance(size, str):
            scanner = cls(0, max_depth)
            scanner.problem = size
            return scanner
        return cls(size, max_depth)

    def feed(self, chunk: bytes) -> str | None:
        if self.problem is not None or self.remaining <= 0:
            return self.problem
        if len(chunk) > self.remaining:
            chunk = chunk[: self.remaining]  # the binary tensors that follow are not JSON
        self.remaining -= len(chunk)
        if self._deeper(chunk):
            self.problem = depth_problem(self.max_depth)
        return self.problem

    def _deeper(self, text: bytes) -> bool:
        if self._cut_escape:
            text = b"\\" + text
            self._cut_escape = False
        if b"\\" in text:
            text = _ESCAPE.sub(b"", text)  # escapes only occur in strings
            if text.endswith(b"\\"):  # every backslash left is unpaired: only a last one
                self._cut_escape = True
                text = text[:-1]
        marks = text.translate(None, _NOT_MARKS)
        if self._in_string:
            end = marks.find(b'"')
            if end < 0:
                return False
            marks = marks[end + 1 :]
            self._in_string = False
        if b'"' in marks:
            marks = _STRING.sub(b"", marks)
            start = marks.find(b'"')
            if start >= 0:  # a string this chunk does not close
                marks = marks[:start]
                self._in_string = True
        signs = marks.translate(_SIGNS)
        opens = signs.count(1)
        closes = len(signs) - opens
        room = self.max_depth - self._depth  # levels still allowed from here
        self._depth += opens - closes
        if opens <= room:
            return False  # cannot be deeper: the ordinary chunk ends here
        run = signs.find(b"\x01" * (room + 1))
        if run >= 0 and 2 * signs.count(1, 0, run) >= run:
            return True  # the common attack, found without summing (no closes sink it first)
        return _rises_above(signs, room)


def _rises_above(signs: bytes, room: int) -> bool:
    """Whether the running sum of `signs` (+1/-1 as signed bytes), from 0, passes `room`."""
    # Data nested by shape (`[[1, 2], [3, 4], ...]`) has many innermost pairs:
    # each pass removes one level of peaks at C speed. The peak of what is left
    # is at most `passes` below the true one, and never above it.
    reduced, passes = signs, 0
    while len(reduced) > 1024 and passes < 3:
        shorter = reduced.replace(b"\x01\xff", b"")
        if len(shorter) == len(reduced):
            break
        reduced, passes = shorter, passes + 1
    peak = max(accumulate(memoryview(reduced).cast("b"), initial=0))
    if peak > room or peak + passes <= room:
        return peak > room
    return max(accumulate(memoryview(signs).cast("b"), initial=0)) > room


def deeper_than(text: bytes, limit: int) -> bool:
    """True when the JSON `text` nests arrays and objects more than `limit` levels."""
    return JsonScanner(len(text), limit).feed(text) is not None


def json_problem(
    content_type: bytes | None,
    body: Sequence[bytes],
    body_size: int,
    max_depth: int = MAX_JSON_DEPTH,
) -> str | None:
    """Why tritonserver must not parse this whole request body, or None when it may."""
    size = json_header_size(content_type, body_size)
    if isinstance(size, str):
        return size
    if size == 0:
        return None
    # The ordinary request has no more brackets than the limit: counted in place.
    first = body[0] if body else b""
    if len(first) >= size and first.count(b"[", 0, size) + first.count(b"{", 0, size) <= max_depth:
        return None
    brackets = 0
    left = size
    for chunk in body:
        brackets += chunk.count(b"[", 0, left) + chunk.count(b"{", 0, left)
        left -= len(chunk)
        if left <= 0:
            break
    if brackets <= max_depth:
        return None
    # The whole body is here (at most the real-time payload limit): one feed of the
    # JSON part costs less than one per chunk.
    text = first if len(first) >= size else b"".join(_leading(body, size))
    return JsonScanner(size, max_depth).feed(text)


def _leading(body: Sequence[bytes], size: int) -> list[bytes]:
    """The chunks that hold the first `size` bytes of a body."""
    taken: list[bytes] = []
    have = 0
    for chunk in body:
        if have >= size:
            break
        taken.append(chunk)
        have += len(chunk)
    return taken
