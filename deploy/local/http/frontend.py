"""The front end: SageMaker's runtime data plane over HTTP/1.1 on asyncio.

    POST /endpoints/{EndpointName}/invocations   InvokeEndpoint (TargetModel header)
    GET  /ping                                   health
    GET  /models                                 loaded and available models (status)
    GET  /deploy/manifest.json                   the store's manifest (logical names)
    GET  /metrics                                per-model call metrics (deploy.local.http.metrics)

The hot path is kept small because client, front end and Triton share the
CPU: httptools parses requests, only the headers the endpoint uses are kept,
a small message goes out in one `write` (uvloop's `writelines` cost more per
call here; large bodies still go out without a copy), bodies are never
parsed, requests go over a pool of keep-alive connections to Triton's
SageMaker port, and Triton's response body is passed back untouched. A call
to a loaded model runs on callbacks alone (no task per request). A
TargetModel that is not loaded yet goes to the platform in a worker thread;
everything else stays on the event loop.

Large request bodies stream: once a body's first read is in and more is to
come, a call to a loaded model sends its head and what has arrived to
tritonserver, and every further read goes on as it comes (`_Stream`), read
past httptools (which would copy it once more). The JSON depth check judges
each read before it goes on; a body found bad midway is read to its end and
refused as a whole one would be, and its tritonserver connection, holding a
half request, is closed, never reused. A streamed body is not kept (holding
it made each read land in memory the CPU cache no longer held): when
tritonserver restarted meanwhile and lost the model, the call is answered
ServiceUnavailable, which AWS clients retry, instead of being sent again.
Pipelined requests, models still to load and bodies of unknown length are
read whole first, as before. The other way, a call on the hot path passes
tritonserver's large 200 answer on to its client as it arrives
(`_Upstream.relay`), also past httptools; small answers go out in one write,
and error answers are read whole to build their error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter
from typing import Protocol
from urllib.parse import unquote

import httptools

from deploy.client import manifest as contract
from deploy.errors import LocalEndpointError
from deploy.local.http import wire
from deploy.local.http.connections import (
    BODY,
    CLOSING,
    HEAD,
    IDLE,
    ConnectionGuard,
    ConnectionLimits,
)
from deploy.local.http.json_limits import JsonScanner, json_problem
from deploy.local.http.memory import keep_freed_memory
from deploy.local.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from deploy.local.http.metrics import ModelMetrics
from deploy.local.models.archive import DiskFullError
from deploy.local.models.platform import (
    LoadedModel,
    LoadTimeoutError,
    ModelLoadError,
    ModelPlatform,
    ServerNotReadyError,
)
from deploy.local.models.store import ModelNotInStoreError
from deploy.local.triton.listener import VerifiedServer

log = logging.getLogger(__name__)

_KEPT_HEADERS = frozenset(
    {
        b"content-type",
        b"content-length",
        b"accept",
        b"expect",
        wire.TARGET_MODEL.encode(),
        wire.CUSTOM_ATTRIBUTES.encode(),
    }
)
# A reply body is bytes, or the chunks a large one arrived in from tritonserver,
# sent on as they are (joining them would copy every byte once more).
Body = bytes | list[bytes]
Reply = tuple[int, list[tuple[str, str]], Body]
# The body of a reply already passed on to the client as it arrived (by identity).
RELAYED: list[bytes] = []
# Starts passing a 200 answer on: (Content-Type, Content-Length) -> the client's
# transport, its head written; None: the client is gone.
Relay = Callable[[bytes, int], asyncio.Transport | None]
_TARGET_HEADER = wire.TARGET_MODEL.encode()
_CUSTOM_ATTRIBUTES = wire.CUSTOM_ATTRIBUTES.encode()


_JOIN_BELOW = 64 * 1024
_STREAM_FROM = 64 * 1024  # smaller bodies are forwarded whole (one write, not two)
_SETTLE_S = 0.05  # how long a broken upstream call waits to learn whether Triton died


def _send_message(transport: asyncio.Transport, head: bytes, body: list[bytes]) -> None:
    """Small messages in one `write` (a joined copy is cheaper than uvloop's
    `writelines` here); large bodies are handed over without copying."""
    if len(body) == 1 and len(body[0]) < _JOIN_BELOW:
        transport.write(head + body[0])
    elif sum(len(chunk) for chunk in body) < _JOIN_BELOW:
        transport.write(b"".join([head, *body]))
    else:
        transport.writelines([head, *body])


def response_head(
    status: int, headers: list[tuple[str, str]], size: int, keep_alive: bool = True
) -> bytes:
    lines = [f"HTTP/1.1 {status} {wire.reason(status)}\r\nContent-Length: {size}\r\n"]
    lines += [f"{name}: {value}\r\n" for name, value in headers]
    if not keep_alive:
        lines.append("Connection: close\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


def joined(body: Body) -> bytes:
    """A body as one bytes object (for the small bodies that are read, such as errors)."""
    return body if isinstance(body, bytes) else b"".join(body)


class UpstreamError(Exception):
    """The connection to tritonserver broke or timed out."""


class _Upstream(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection to tritonserver.

    A response body of known length is read past the parser (its first read
    aside), as the front end's requests are. With `relay` set, a large 200
    answer goes on to the client as it arrives and the call's body is `RELAYED`; if
    the answer breaks off midway, the client's connection is aborted (its
    head promised the whole body).
    """

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.future: asyncio.Future[tuple[int, bytes, Body]] | None = None
        self.content_type = b""
        self.length = -1  # the answer's Content-Length; -1: none
        self.received = 0
        self.body_left = 0  # body bytes still to come, read past the parser
        self.in_body = False
        self.status = 0
        self.keep_alive = True
        self.body: list[bytes] = []
        self.closed = False
        self.sending = False  # a streamed request body is still on its way
        self.relay: Relay | None = None
        self.client: asyncio.Transport | None = None  # where a relayed answer goes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        left = self.body_left
        if left:
            if len(data) < left and self.client is not None:  # the hot path, inlined
                self.body_left = left - len(data)
                self.received += len(data)
                if not self.client.is_closing():
                    self.client.write(data)
                return
            data = self._read_body(data)
            if not data:
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UpstreamError(f"malformed response from tritonserver: {exc}"))
            self.close()
            return
        if self.in_body and self.length > self.received:
            self.body_left = self.length - self.received

    def _read_body(self, data: bytes) -> bytes:
        left = self.body_left
        rest = b""
        if len(data) > left:
            data, rest = data[:left], data[left:]
        self.body_left = left - len(data)
        self.on_body(data)
        if self.body_left == 0:
            self.parser = httptools.HttpResponseParser(self)
            self.on_message_complete()
        return rest

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-type":
            self.content_type = value
        elif name == b"content-length" and value.isdigit():
            self.length = int(value)

    def on_headers_complete(self) -> None:
        self.in_body = True
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        relay, self.relay = self.relay, None
        if relay is not None and self.status == 200 and self.length >= _STREAM_FROM:
            # (a small answer is read whole: head and body then go out in one write)
            self.client = relay(self.content_type, self.length)

    def on_body(self, body: bytes) -> None:
        self.received += len(body)
        client = self.client
        if client is None:
            self.body.append(body)
        elif not client.is_closing():
            client.write(body)

    def on_message_complete(self) -> None:
        future, self.future = self.future, None
        body: Body = self.body[0] if len(self.body) == 1 else self.body
        if self.client is not None:
            body, self.client = RELAYED, None
        content_type, self.content_type, self.body = self.content_type, b"", []
        self.in_body, self.length, self.received = False, -1, 0
        if self.keep_alive and not self.sending:
            self.pool.release(self)
        else:
            self.close()
        if future is not None and not future.done():
            future.set_result((self.status, content_type, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        self._fail(UpstreamError("tritonserver closed the connection"))

    def _fail(self, exc: Exception) -> None:
        future, self.future = self.future, None
        self.relay = None
        client, self.client = self.client, None
        if client is not None:  # part of the answer went out: the client cannot use it
            client.abort()
        if future is not None and not future.done():
            future.set_exception(exc)

    def time_out(self) -> None:
        self._fail(UpstreamError(f"no answer from tritonserver in {self.pool.timeout:g}s"))
        self.close()  # a late answer must not reach the next request

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(
        self, head: bytes, body: list[bytes], *, more: bool = False
    ) -> asyncio.Future[tuple[int, bytes, Body]]:
        """Send a request; `more`: the rest of its body follows (`_Stream`)."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.future = future = loop.create_future()
        self.sending = more
        self.relay = None
        _send_message(self.transport, head, body)
        return future

    def discard(self) -> None:
        """Close a connection that holds a half-sent request; its call is abandoned."""
        future, self.future = self.future, None
        if future is not None:
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: the failure is expected
            future.cancel()
        self.close()


class UpstreamPool:
    """Idle keep-alive connections to tritonserver's SageMaker port."""

    def __init__(self, server: VerifiedServer, timeout: float) -> None:
        self._server = server
        self._idle: deque[_Upstream] = deque()
        self._open: set[_Upstream] = set()
        self.timeout = timeout

    def forget(self, connection: _Upstream) -> None:
        self._open.discard(connection)

    def abort_all(self, reason: str) -> None:
        """Fail every call in flight and drop every connection (tritonserver died)."""
        for connection in list(self._open):
            connection._fail(UpstreamError(reason))
            connection.close()
        self._open.clear()
        self._idle.clear()

    def release(self, connection: _Upstream) -> None:
        if not connection.closed:
            self._idle.append(connection)

    def idle(self) -> _Upstream | None:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return None

    async def _acquire(self) -> _Upstream:
        connection = self.idle()
        if connection is not None:
            return connection
        loop = asyncio.get_running_loop()
        try:
            port, token = self._server.verified()
            _, protocol = await loop.create_connection(lambda: _Upstream(self), "127.0.0.1", port)
        except OSError as exc:
            raise UpstreamError(f"cannot connect to tritonserver: {exc}") from exc
        if not self._server.still_verified(token):  # it stopped: the port may be another's
            protocol.close()
            raise UpstreamError("tritonserver stopped while the connection opened")
        self._open.add(protocol)
        return protocol

    async def request(
        self,
        path: str,
        target_model: str,
        headers: dict[bytes, bytes],
        body: list[bytes],
        size: int,
    ) -> tuple[int, bytes, Body]:
        connection = await self._acquire()
        future = self.send(connection, path, target_model, headers, body, size)
        timer = asyncio.get_running_loop().call_later(self.timeout, connection.time_out)
        try:
            return await future
        finally:
            timer.cancel()

    def send(
        self,
        connection: _Upstream,
        path: str,
        target_model: str,
        headers: dict[bytes, bytes],
        body: list[bytes],
        size: int,
        *,
        more: bool = False,
    ) -> asyncio.Future[tuple[int, bytes, Body]]:
        """Send a request of `size` body bytes; `more`: `body` is only its start."""
        head = [
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}\r\n"
            f"X-Amzn-SageMaker-Target-Model: {target_model}\r\n".encode()
        ]
        content_type = headers.get(b"content-type")
        if content_type is not None:
            head.append(b"Content-Type: " + content_type + b"\r\n")
        accept = headers.get(b"accept")
        if accept is not None:
            head.append(b"Accept: " + accept + b"\r\n")
        attributes = headers.get(_CUSTOM_ATTRIBUTES)
        if attributes is not None:  # passed to the container verbatim, as SageMaker does
            head.append(b"X-Amzn-SageMaker-Custom-Attributes: " + attributes + b"\r\n")
        head.append(b"\r\n")
        return connection.send(b"".join(head), body, more=more)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class _Request:
    __slots__ = (
        "body",
        "client",
        "headers",
        "keep_alive",
        "length",
        "method",
        "sent",
        "size",
        "started",
        "stream",
        "too_large",
        "url",
    )

    def __init__(self) -> None:
        self.url = b""
        self.method = b""
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.size = 0
        self.length = -1  # Content-Length; -1: none (chunked, or no body)
        self.too_large = False
        self.keep_alive = True
        self.stream: _Stream | None = None  # the body goes to tritonserver as it arrives
        self.client: asyncio.Transport | None = None  # set while the request is answered
        self.started = 0.0  # perf_counter() when the head was in (for /metrics)
        self.sent = 0  # a relayed answer's body size (for /metrics)


# A request as a mode's `Invoker` sees it: read it, never keep it past the answer.
Request = _Request


class Invoker(Protocol):
    """A hosting mode's InvokeEndpoint, and any operation of its own, on this front end.

    The front end reads and bounds every request, answers /ping, /models, the
    manifest and /metrics, and refuses an invocation whose JSON or custom
    attributes tritonserver must not see; the rest is the invoker's. Without one
    (`FrontEnd(invoker=None)`) invocations go to the multi-model platform. A front
    end given an invoker serves every call through `FrontEnd.handle`: the hot path
    and streamed bodies look TargetModels up in the multi-model platform.
    """

    # Request headers the mode reads, kept besides the front end's own.
    headers: frozenset[bytes]

    async def route(self, frontend: FrontEnd, request: Request, path: bytes) -> Reply | None:
        """The answer to an operation of the mode's own at `path`; None: not one."""
        ...

    async def invoke(self, frontend: FrontEnd, request: Request, endpoint: str) -> Reply:
        """Answer InvokeEndpoint on `endpoint` (the name in the request's path)."""
        ...

    async def close(self) -> None:
        """The front end is closing: finish what the mode holds, while the loop runs."""
        ...


class _Stream:
    """A request body forwarded to tritonserver as it arrives.

    Each read is judged by the JSON depth check before it goes on. When a read
    fails it, nothing more is sent, `problem` says why, and the tritonserver
    connection (holding a half request, which it never answers) is closed.
    """

    __slots__ = ("connection", "future", "generation", "model", "problem", "scanner", "target")

    def __init__(
        self,
        connection: _Upstream,
        future: asyncio.Future[tuple[int, bytes, Body]],
        scanner: JsonScanner,
        model: LoadedModel,
        target: str,
        generation: int,
    ) -> None:
        self.connection = connection
        self.future = future
        self.scanner = scanner
        self.model: LoadedModel | None = model  # pinned until the call ends
        self.target = target
        self.generation = generation
        self.problem: str | None = None

    def forward(self, chunk: bytes) -> None:
        if self.problem is not None:
            return
        if self.scanner.remaining > 0:
            problem = self.scanner.feed(chunk)
            if problem is not None:
                self.problem = problem
                self.connection.discard()
                return
        connection = self.connection
        if not connection.closed:  # else the call failed; the answer says so
            connection.transport.write(chunk)  # type: ignore[union-attr]

    def drop(self, platform: ModelPlatform) -> None:
        """Abandon the call (the client went away, or its body was refused)."""
        self.connection.discard()
        model, self.model = self.model, None
        if model is not None:
            platform.release(model)


class _RefusedError(Exception):
    """Raised from a parser callback to stop reading a connection with `reply`."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply[0])
        self.reply = reply


class _Connection(asyncio.Protocol):
    """One client connection: requests are parsed and answered in order.

    `phase` and `since` tell the connection guard (`deploy.local.http.connections`)
    what the connection waits for and since when. After a malformed, timed-out
    or oversized request the connection reads no more: the requests before it
    are answered first, then its error, then the connection closes.
    """

    def __init__(self, frontend: FrontEnd) -> None:
        self.frontend = frontend
        self.guard = frontend.guard
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.current = _Request()
        self.queue: deque[_Request] = deque()
        self.busy = False
        self.paused = False
        self.phase = HEAD
        self.since = self.guard.now
        self.head_bytes = 0  # bytes read while a head is incomplete (see data_received)
        self.head_size = 0  # the current head's URL and header bytes
        self.body_left = 0  # body bytes still to come, read past the parser
        self.max_head = self.guard.limits.max_header_bytes
        self.kept_headers = frontend.kept_headers
        self.stopped = False  # reads no more requests
        self.last_reply: Reply | None = None  # the error answered once the queue is done

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if not self.guard.admit(self):
            self._stop(
                wire.service_unavailable(
                    f"the endpoint is serving its limit of {self.guard.max_connections} "
                    "connections and all are busy; retry shortly (deploy serve "
                    "--max-connections raises the limit)"
                ).encode()
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.guard.forget(self)
        self._drop_stream()

    def data_received(self, data: bytes) -> None:
        if self.stopped:
            return  # lingering after an error answer: read and dropped
        left = self.body_left
        if left:
            stream = self.current.stream
            if len(data) < left and stream is not None:  # the hot path, inlined
                self.body_left = left - len(data)
                self.current.size += len(data)
                stream.forward(data)
                return
            data = self._read_body(data)
            if not data or self.stopped:
                return
        if self.phase != BODY:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._stop(wire.validation_error("protocol upgrades are not supported").encode())
            return
        except httptools.HttpParserError as exc:
            refused = exc.__context__
            if isinstance(refused, _RefusedError):
                self._stop(refused.reply)
            else:
                self._stop(wire.validation_error(f"malformed HTTP request: {exc}").encode())
            return
        if self.phase == BODY:
            self._body_follows()
        elif self.head_bytes > self.max_head and self.phase == HEAD:
            self._stop(self._head_too_large())

    def _body_follows(self) -> None:
        """A body of known length is still to come: read it past the parser, and
        forward it as it arrives when it may go to tritonserver now."""
        request = self.current
        left = request.length - request.size
        if request.too_large or left <= 0:
            return
        self.body_left = left
        if not self.busy and request.length >= _STREAM_FROM and request.stream is None:
            request.stream = self.frontend.stream(request)

    def _read_body(self, data: bytes) -> bytes:
        """Take the current body's bytes from `data` without the parser's copy;
        returns what follows the body (a pipelined request)."""
        left = self.body_left
        rest = b""
        if len(data) > left:
            data, rest = data[:left], data[left:]
        self.body_left = left - len(data)
        self.on_body(data)
        if self.body_left == 0:
            # The parser saw the head and the body's start: a fresh one reads the
            # next request.
            self.parser = httptools.HttpRequestParser(self)
            self.on_message_complete()
        return rest

    def _drop_stream(self) -> None:
        stream, self.current.stream = self.current.stream, None
        if stream is not None:
            stream.drop(self.frontend.platform)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.current = _Request()
        self.head_size = 0
        if self.phase != HEAD:
            self.phase = HEAD
            self.since = self.guard.now

    def on_url(self, url: bytes) -> None:
        self.current.url += url
        self.head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_size += len(name) + len(value) + 4
        name = name.lower()
        if name in self.kept_headers:
            self.current.headers[name] = value

    def on_headers_complete(self) -> None:
        # A head that arrives in pieces is measured as it comes (data_received);
        # one that arrived in one read is measured here.
        if self.head_size > self.max_head:
            raise _RefusedError(self._head_too_large())
        self.head_bytes = 0
        self.phase = BODY
        self.since = self.guard.now
        request = self.current
        request.started = perf_counter()
        request.method = self.parser.get_method()
        request.keep_alive = self.parser.should_keep_alive()
        length = request.headers.get(b"content-length")
        if length is not None and length.isdigit():  # the parser refuses it with chunked
            request.length = int(length)
            if request.length > self.frontend.max_payload:
                request.too_large = True
        if request.headers.get(b"expect", b"").lower() == b"100-continue" and self.transport:
            # curl and others wait for this before sending a body (an oversized
            # one is drained, then refused).
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        request = self.current
        if request.too_large:
            return  # drained, never buffered
        request.size += len(body)
        if request.size > self.frontend.max_payload:
            request.too_large = True
            request.body = []
        else:
            if request.stream is not None:
                # Not kept: held until the answer, reads land in fresh memory each
                # time instead of the memory the last one just freed (the CPU cache).
                request.stream.forward(body)
            else:
                request.body.append(body)

    def on_message_complete(self) -> None:
        self.phase = IDLE
        self.since = self.guard.now
        self.head_bytes = 0
        if self.busy:  # pipelined: answered in order
            self.queue.append(self.current)
            if len(self.queue) >= self.guard.limits.max_pipelined and self.transport:
                self.paused = True
                self.transport.pause_reading()
            return
        self.busy = True
        self._dispatch(self.current)

    def _head_too_large(self) -> Reply:
        limit = self.guard.limits.max_header_bytes
        return wire.AwsErrorReply(
            "RequestHeaderFieldsTooLarge",
            431,
            f"the request line and headers exceed {limit} bytes, the endpoint's limit",
        ).encode()

    # connection guard callbacks
    def time_out(self, what: str, limit: float) -> None:
        if self.head_bytes == 0 and self.phase == HEAD and not self.busy:
            # Nothing of a request arrived: close quietly (a client that sends one
            # just now would take an answer here for the answer to its request).
            self.evict()
            return
        self._stop(
            wire.AwsErrorReply(
                "RequestTimeout", 408, f"{what} did not arrive within {limit:g}s"
            ).encode()
        )

    def evict(self) -> None:
        self.stopped = True
        self._close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # answering
    def _stop(self, reply: Reply) -> None:
        """Read no more requests; answer `reply` after those already read, then close."""
        self.stopped = True
        self.last_reply = reply
        self._drop_stream()  # a body cut off (timed out): its call is abandoned
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()  # dropped from now on (see data_received)
        if not self.busy:
            self._answer_last()

    def _answer_last(self) -> None:
        reply, self.last_reply = self.last_reply, None
        if reply is not None:
            self._write(*reply, False)
        self.phase = CLOSING
        self.since = self.guard.now
        transport = self.transport
        if transport is None:
            return
        if transport.can_write_eof() and self.guard.closing_started(self):
            transport.write_eof()  # the client reads the answer, then sees the end
        else:
            self._close()

    def _dispatch(self, request: _Request) -> None:
        # Hot path: a loaded model and an idle upstream connection are served with
        # callbacks only; anything else (first load, errors) goes through a task.
        request.client = self.transport
        if request.stream is not None:
            self.frontend.finish_stream(request, self._finish)
        elif not self.frontend.forward_now(request, self._finish):
            asyncio.get_running_loop().create_task(self._serve(request))

    async def _serve(self, request: _Request) -> None:
        try:
            reply = await self.frontend.handle(request)
        except Exception as exc:  # a bug: answer InternalFailure, keep serving
            log.exception("front end failed on %r", request.url)
            reply = wire.internal_failure(f"the local endpoint failed: {exc}").encode()
        self._finish(request, reply)

    def _finish(self, request: _Request, reply: Reply) -> None:
        request.client = None
        body = reply[2]
        sent = request.sent if body is RELAYED else self._write(*reply, request.keep_alive)
        frontend = self.frontend
        url = request.url
        if url == frontend.invocations_path or url.startswith(frontend.invocations_query):
            frontend.metrics.observe(
                request.headers.get(_TARGET_HEADER, b""),
                reply[0],
                request.size,
                sent,
                perf_counter() - request.started,
            )
        if not request.keep_alive:
            self._close()
            self.queue.clear()
            self.busy = False
            return
        if self.queue:
            if self.paused and len(self.queue) <= self.guard.limits.max_pipelined // 2:
                self.paused = False
                if self.transport is not None:
                    self.transport.resume_reading()
            self._dispatch(self.queue.popleft())
            return
        self.busy = False
        if self.stopped:
            self._answer_last()
        elif self.phase == IDLE:
            self.since = self.guard.now  # idle from now on

    def _write(
        self, status: int, headers: list[tuple[str, str]], body: Body, keep_alive: bool = True
    ) -> int:
        """Send an answer; its body's size (0: the client is gone)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return 0
        chunks = [body] if isinstance(body, bytes) else body
        size = sum(len(chunk) for chunk in chunks)
        _send_message(transport, response_head(status, headers, size, keep_alive), chunks)
        return size

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class FrontEnd:
    """Routes requests to the platform and tritonserver; see the module docstring."""

    def __init__(
        self,
        platform: ModelPlatform,
        server_ready: Callable[[], bool],
        server_generation: Callable[[], int] = lambda: 0,
        *,
        endpoint_name: str = "local",
        max_payload: int = wire.DEFAULT_MAX_PAYLOAD,
        model_wait: float = 120.0,
        invoke_timeout: float = 60.0,
        log_path: str = "tritonserver.log",
        manifest: Callable[[], contract.Manifest | None] = lambda: None,
        limits: ConnectionLimits | None = None,
        invoker: Invoker | None = None,
    ) -> None:
        self.platform = platform
        # The hosting mode's invocations (None: the multi-model platform's, `_invoke`).
        self.invoker = invoker
        # Request headers kept for routing: the front end's, and its mode's.
        self.kept_headers = _KEPT_HEADERS | invoker.headers if invoker else _KEPT_HEADERS
        self.manifest = manifest
        self.server_ready = server_ready
        self.server_generation = server_generation
        self.endpoint_name = endpoint_name
        self._invocations_path = f"/endpoints/{endpoint_name}/invocations".encode()
        # Calls counted in /metrics: to this endpoint, with or without a query.
        self.invocations_path = self._invocations_path
        self.invocations_query = self._invocations_path + b"?"
        self.metrics = ModelMetrics()
        self._request_prefix = str(uuid.uuid4())[:24]
        self._requests = 0
        self.max_payload = max_payload
        self.model_wait = model_wait
        self.upstream = UpstreamPool(platform.server, invoke_timeout)
        self.log_stream = f"file://{log_path}"
        # Loads wait (bounded) for room and for Triton; status has its own thread.
        self._executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="model-load")
        self._status = ThreadPoolExecutor(max_workers=1, thread_name_prefix="status")
        self._loads: dict[str, list[asyncio.Future[LoadedModel]]] = {}  # callers per load
        self._server: asyncio.Server | None = None
        self.guard = ConnectionGuard(limits or ConnectionLimits())

    async def start(self, host: str, port: int) -> int:
        keep_freed_memory()  # large bodies reuse memory instead of faulting it in each time
        loop = asyncio.get_running_loop()
        self.guard.start(loop)
        self._server = await loop.create_server(
            lambda: _Connection(self), host, port, reuse_address=True, backlog=1024
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.invoker is not None:
            await self.invoker.close()
        if self._server is not None:
            self._server.close()
        self.guard.stop()
        for connection in [*self.guard.open, *self.guard.closing]:
            connection.abort()
        self.upstream.close()
        await asyncio.sleep(0)  # let the transports finish closing
        if self._server is not None:
            await self._server.wait_closed()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._status.shutdown(wait=False, cancel_futures=True)

    # -- routing -------------------------------------------------------------
    async def handle(self, request: _Request) -> Reply:
        path = request.url.split(b"?", 1)[0]
        invoker = self.invoker
        if invoker is not None:
            answer = await invoker.route(self, request, path)
            if answer is not None:
                return answer
        if path.startswith(b"/endpoints/") and path.endswith(b"/invocations"):
            if request.method != b"POST":
                return wire.validation_error("InvokeEndpoint is a POST").encode()
            refused = self._refused(request)
            if refused is not None:
                return refused.encode()
            endpoint = unquote(path[11:-12].decode("utf-8", "replace"))
            if invoker is not None:
                return await invoker.invoke(self, request, endpoint)
            return await self._invoke(request, endpoint)
        if path == b"/ping":
            return (200, [], b"") if self.server_ready() else (503, [], b"")
        if path == b"/models" and request.method == b"GET":
            listing = await asyncio.get_running_loop().run_in_executor(
                self._status, self.platform.listing
            )
            listing["endpoint_name"] = self.endpoint_name
            return 200, [("Content-Type", "application/json")], json.dumps(listing).encode()
        if path == wire.MANIFEST_ROUTE.encode() and request.method == b"GET":
            return await self._manifest()
        if path == b"/metrics" and request.method == b"GET":
            return await self._metrics()
        return wire.AwsErrorReply(
            "UnknownOperationException", 404, f"no operation at {path.decode('latin-1')}"
        ).encode()

    async def _manifest(self) -> Reply:
        """The manifest the endpoint serves from (file or S3 I/O: off the loop)."""
        try:
            manifest = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.manifest
            )
        except LocalEndpointError as exc:
            return wire.AwsErrorReply("InternalFailure", 500, str(exc)).encode()
        named = (wire.ENDPOINT_NAME_HEADER, self.endpoint_name)
        if manifest is None:
            status, headers, body = wire.AwsErrorReply(
                "ResourceNotFound", 404, "the model store has no manifest.json"
            ).encode()
            return status, [*headers, named], body
        body = json.dumps(manifest.to_document()).encode()
        return 200, [("Content-Type", "application/json"), named], body

    async def _metrics(self) -> Reply:
        """Per-model metrics under the manifest's logical names (Prometheus text)."""
        try:
            manifest = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.manifest
            )
        except LocalEndpointError:
            manifest = None  # counted all the same, under their TargetModels alone
        models = manifest.models if manifest is not None else {}
        names = {entry.target_model: name for name, entry in models.items()}
        return 200, [("Content-Type", METRICS_CONTENT_TYPE)], self.metrics.exposition(names)

    async def invoke_platform(self, request: Request, endpoint: str) -> Reply:
        """InvokeEndpoint on the multi-model platform, by the request's TargetModel (for
        an invoker that maps its own addressing onto the platform's models)."""
        return await self._invoke(request, endpoint)

    async def _invoke(self, request: _Request, endpoint: str) -> Reply:
        if endpoint != self.endpoint_name:
            return wire.validation_error(
                f"Endpoint {endpoint} of account {wire.LOCAL_ACCOUNT} not found."
            ).encode()
        raw_target = request.headers.get(wire.TARGET_MODEL.encode())
        if not raw_target:
            return wire.validation_error(
                f"Endpoint {endpoint} is a multi-model endpoint: the request needs a "
                "TargetModel (X-Amzn-SageMaker-Target-Model header)"
            ).encode()
        if request.too_large:
            return wire.payload_too_large(self.max_payload)
        target = wire.target_model(raw_target)
        if isinstance(target, wire.AwsErrorReply):
            return target.encode()
        for attempt in (1, 2):
            # Pinned for the call: eviction waits for it (see platform.py).
            model = self.platform.acquire(target)
            if model is None:
                loaded = await self._load(target)
                if isinstance(loaded, tuple):
                    return loaded
                model = loaded
            generation = self.server_generation()
            try:
                status, content_type, body = await self.upstream.request(
                    f"/models/{model.hash}/invoke",
                    target,
                    request.headers,
                    request.body,
                    request.size,
                )
            except UpstreamError as exc:
                await asyncio.sleep(_SETTLE_S)  # see forward_now
                return self._upstream_failed(target, exc, generation)
            finally:
                self.platform.release(model)
            if status == 404 and attempt == 1:
                # Triton no longer has it (restarted): load again, once.
                self.platform.forget(target, model)
                continue
            break
        return self._answer(target, status, content_type, body)

    def _answer(self, target: str, status: int, content_type: bytes, body: Body) -> Reply:
        if status == 200:
            return 200, self._answer_headers(content_type), body
        message = wire.triton_error_message(joined(body)) or wire.reason(status)
        return wire.model_error(target, status, message, self.log_stream).encode()

    def _answer_headers(self, content_type: bytes) -> list[tuple[str, str]]:
        self._requests += 1
        return [
            ("Content-Type", content_type.decode("latin-1")),
            (wire.INVOKED_VARIANT, wire.DEFAULT_VARIANT),
            # Unique per endpoint run, cheaper than a uuid4 per call.
            ("x-amzn-RequestId", f"{self._request_prefix}{self._requests:012x}"),
        ]

    def _relay_head(
        self, client: asyncio.Transport, content_type: bytes, size: int, request: _Request
    ) -> asyncio.Transport | None:
        """Write a 200 answer's head; its body follows as tritonserver sends it."""
        if client.is_closing():
            return None
        request.sent = size
        client.write(
            response_head(200, self._answer_headers(content_type), size, request.keep_alive)
        )
        return client

    def _upstream_failed(self, target: str, exc: BaseException, generation: int) -> Reply:
        # `generation` counts tritonserver crashes: one since the call was sent means
        # the server died under it (it may already be back: restarts take ~0.1 s).
        if self.server_ready() and self.server_generation() == generation:
            return wire.model_error(target, 0, str(exc), self.log_stream).encode()
        return wire.service_unavailable(
            f"the model server stopped while serving {target} ({exc}); it is restarting"
        ).encode()

    def _restarted(self, target: str) -> Reply:
        # ServiceUnavailable, as for a call in flight when the server died: AWS
        # clients retry it, and the retry loads the model again.
        return wire.service_unavailable(
            f"the model server restarted while {target} was called and no longer has it "
            "loaded; retry the request (it loads the model again)"
        ).encode()

    def _refused(self, request: _Request) -> wire.AwsErrorReply | None:
        """Why tritonserver must not see this invocation (checked on every call)."""
        headers = request.headers
        if not request.too_large:
            problem = json_problem(headers.get(b"content-type"), request.body, request.size)
            if problem is not None:
                return wire.validation_error(problem)
        attributes = headers.get(_CUSTOM_ATTRIBUTES)
        if attributes is not None:
            return wire.custom_attributes_problem(attributes)
        return None

    def forward_now(self, request: _Request, done: Callable[[_Request, Reply], None]) -> bool:
        """Forward a call to a loaded model without a task; False: use `handle`."""
        if self.invoker is not None:
            return False  # a mode's invocations go through `handle` (see `Invoker`)
        path = request.url
        raw_target = request.headers.get(_TARGET_HEADER)
        if (
            raw_target is None
            or request.too_large
            or request.method != b"POST"
            or path != self._invocations_path
            or self._refused(request) is not None
        ):
            return False
        try:
            target = raw_target.decode("utf-8")
        except UnicodeDecodeError:
            return False
        model = self.platform.acquire(target)  # only names that passed `_invoke` are loaded
        if model is None:
            return False
        connection = self.upstream.idle()
        if connection is None:
            self.platform.release(model)
            return False
        generation = self.server_generation()
        future = self.upstream.send(
            connection,
            f"/models/{model.hash}/invoke",
            target,
            request.headers,
            request.body,
            request.size,
        )
        self._answer_when_done(request, done, connection, future, model, target, generation)
        return True

    def stream(self, request: _Request) -> _Stream | None:
        """Start forwarding a call whose body is still arriving (`_Stream`), or None:
        it is read whole first (not a call to a loaded model, no idle connection to
        tritonserver, or refused already by what has arrived)."""
        raw_target = request.headers.get(_TARGET_HEADER)
        if (
            raw_target is None
            or self.invoker is not None  # a mode's invocations are read whole
            or request.method != b"POST"
            or request.url != self._invocations_path
            or _CUSTOM_ATTRIBUTES in request.headers  # checked on the whole request
        ):
            return None
        scanner = JsonScanner.for_body(request.headers.get(b"content-type"), request.length)
        for chunk in request.body:
            scanner.feed(chunk)
        if scanner.problem is not None:
            return None
        try:
            target = raw_target.decode("utf-8")
        except UnicodeDecodeError:
            return None
        model = self.platform.acquire(target)
        if model is None:
            return None
        connection = self.upstream.idle()
        if connection is None:
            self.platform.release(model)
            return None
        future = self.upstream.send(
            connection,
            f"/models/{model.hash}/invoke",
            target,
            request.headers,
            request.body,
            request.length,
            more=True,
        )
        return _Stream(connection, future, scanner, model, target, self.server_generation())

    def finish_stream(self, request: _Request, done: Callable[[_Request, Reply], None]) -> None:
        """The streamed body is all in: wait for tritonserver's answer, or refuse it."""
        stream, request.stream = request.stream, None
        assert stream is not None and stream.model is not None
        if stream.problem is not None:
            stream.drop(self.platform)
            done(request, wire.validation_error(stream.problem).encode())
            return
        stream.connection.sending = False
        model, stream.model = stream.model, None
        self._answer_when_done(
            request,
            done,
            stream.connection,
            stream.future,
            model,
            stream.target,
            stream.generation,
            streamed=True,
        )

    def _answer_when_done(
        self,
        request: _Request,
        done: Callable[[_Request, Reply], None],
        connection: _Upstream,
        future: asyncio.Future[tuple[int, bytes, Body]],
        model: LoadedModel,
        target: str,
        generation: int,
        *,
        streamed: bool = False,
    ) -> None:
        """Answer a call sent on the hot path once tritonserver answers it (a 200
        answer goes on to the client as it arrives)."""
        timer = asyncio.get_running_loop().call_later(self.upstream.timeout, connection.time_out)
        client = request.client
        if client is not None:
            connection.relay = lambda content_type, size: self._relay_head(
                client, content_type, size, request
            )

        def finished(future: asyncio.Future[tuple[int, bytes, Body]]) -> None:
            timer.cancel()
            self.platform.release(model)
            exc = future.exception()
            if exc is not None:
                # A dead server closes its sockets a moment before it shows as exited:
                # decide between ServiceUnavailable and ModelError a little later.
                asyncio.get_running_loop().call_later(
                    _SETTLE_S,
                    lambda: done(request, self._upstream_failed(target, exc, generation)),
                )
                return
            status, content_type, body = future.result()
            if body is RELAYED:
                done(request, (200, [], RELAYED))
                return
            if status == 404 and not streamed:  # restarted meanwhile: the slow path reloads it
                asyncio.get_running_loop().create_task(self._finish_slowly(request, done))
                return
            if status == 404:  # a streamed body was not kept to be sent again
                self.platform.forget(target, model)
                done(request, self._restarted(target))
                return
            done(request, self._answer(target, status, content_type, body))

        future.add_done_callback(finished)

    async def _finish_slowly(
        self, request: _Request, done: Callable[[_Request, Reply], None]
    ) -> None:
        try:
            reply = await self.handle(request)
        except Exception as exc:
            log.exception("front end failed on %r", request.url)
            reply = wire.internal_failure(f"the local endpoint failed: {exc}").encode()
        done(request, reply)

    async def _load(self, target: str) -> LoadedModel | Reply:
        """The model, loaded and pinned for this call (release it), or an error reply.

        Concurrent callers share one load; each gets its own pin the moment it
        ends, so no eviction comes between the load and their calls.
        """
        loop = asyncio.get_running_loop()
        waiters = self._loads.get(target)
        if waiters is None:
            waiters = self._loads[target] = []
            future = loop.run_in_executor(self._executor, self.platform.load_and_acquire, target)
            future.add_done_callback(lambda done: self._hand_out(target, done))
        mine: asyncio.Future[LoadedModel] = loop.create_future()
        waiters.append(mine)
        try:
            return await asyncio.wait_for(mine, self.model_wait)
        except TimeoutError:
            return wire.model_not_ready(
                f"Model {target} is still loading after {self.model_wait:g}s; retry the request."
            ).encode()
        except ModelNotInStoreError as exc:
            return wire.validation_error(str(exc)).encode()
        except ModelLoadError as exc:
            return wire.model_error(
                target, exc.status, exc.triton_message, self.log_stream, fix=exc.fix
            ).encode()
        except LoadTimeoutError as exc:
            return wire.model_not_ready(str(exc)).encode()
        except (ServerNotReadyError, DiskFullError) as exc:
            return wire.service_unavailable(str(exc)).encode()
        except LocalEndpointError as exc:
            return wire.validation_error(str(exc)).encode()
        except Exception as exc:
            log.exception("loading %s failed", target)
            return wire.internal_failure(f"loading {target} failed: {exc}").encode()

    def _hand_out(self, target: str, done: asyncio.Future[LoadedModel]) -> None:
        """A load ended: one pin (or the error) for each caller still waiting."""
        waiting = [w for w in self._loads.pop(target, []) if not w.done()]
        if done.cancelled():  # the executor was shut down
            for waiter in waiting:
                waiter.cancel()
            return
        error = done.exception()
        if error is not None:
            for waiter in waiting:
                waiter.set_exception(error)
            return
        model = done.result()  # pinned once, by the platform
        if not waiting:
            self.platform.release(model)
            return
        self.platform.add_pins(model, len(waiting) - 1)
        for waiter in waiting:
            waiter.set_result(model)
