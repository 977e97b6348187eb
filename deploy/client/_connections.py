"""Keep-alive HTTP(S) connections to one host, for the direct transport.

urllib3's `urlopen` spends about 0.05 ms of CPU per call on its own
machinery (timeouts, retries and response objects, header dicts), as much
as the whole exchange over `http.client`; the direct transport talks to one
host only, so it keeps `http.client` connections in a small LIFO pool of its
own. The sockets are `DeadlineTransport`'s: every blocking operation stops
at the calling thread's deadline. Failures raise botocore's exceptions, as
`DeadlineTransport.urlopen` does, so both transports fail alike.

`send` writes a request whose head the caller built once (`head_prefix` and
`header_line` check what `http.client` checks) and whose body is a list of
pieces, written as they are: `http.client`'s per-call header handling costs
as much CPU as a small call's encoding and decoding together, and joining a
large body into one `bytes` first would copy it. Answers are read by
`http.client` either way.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.util.url import parse_url
from urllib3.util.wait import wait_for_read

from deploy.client._deadline import DeadlineExceededError
from deploy.client._transport import _adopt, _DeadlineSSLSocket


def _connect(address: tuple[str, int], timeout: Any = None, source: Any = None) -> socket.socket:
    return _adopt(socket.create_connection(address, timeout, source))


# Bodies up to this size go out in one write with the head (one small copy); larger
# ones after it, from the caller's buffers.
_JOIN_BELOW = 64 * 1024
_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")


def header_line(name: str, value: str) -> bytes | None:
    """`Name: value\r\n` as `http.client.putheader` would send it; None where it would
    refuse the value (the caller then sends through `request`, which raises as before)."""
    try:
        encoded = value.encode("latin-1")
    except UnicodeEncodeError:
        return None
    if _CONTROL.search(encoded):  # stricter than http.client: no control byte at all
        return None
    return name.encode("ascii") + b": " + encoded + b"\r\n"


class BodyTooLargeError(Exception):
    """An answer announced (or sent) more than the caller's `max_bytes`; `at_least`
    when `size` is what was read before stopping rather than the announced length."""

    def __init__(self, size: int, *, at_least: bool) -> None:
        super().__init__(f"the answer has {'at least ' if at_least else ''}{size} bytes")
        self.size = size
        self.at_least = at_least


class Connections:
    """Up to `max_idle` idle connections to `url`'s host; `ca_bundle` verifies TLS
    (None: botocore's default bundle)."""

    def __init__(
        self, url: str, *, connect_timeout: float, max_idle: int, ca_bundle: str | None = None
    ) -> None:
        parts = parse_url(url)
        self.url = url
        self.tls = parts.scheme == "https"
        self.host = parts.host or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.path = parts.request_uri
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self._context: ssl.SSLContext | None = None
        if self.tls:
            from botocore.httpsession import get_cert_path

            self._context = ssl.create_default_context(cafile=ca_bundle or get_cert_path(True))
            self._context.sslsocket_class = _DeadlineSSLSocket
        self._idle: deque[http.client.HTTPConnection] = deque()
        self.head_prefix = self._head_prefix()

    def _head_prefix(self) -> bytes | None:
        """`POST <path> HTTP/1.1`, `Host` and `Accept-Encoding` as `http.client`
        writes them for this URL; None if it would refuse the path or the host."""
        # http.client's own reading of host and port (brackets dropped, port split off).
        probe = http.client.HTTPConnection(self.host, self.port)
        default = http.client.HTTPS_PORT if self.tls else http.client.HTTP_PORT
        try:
            host = probe.host.encode("ascii")
            path = self.path.encode("ascii")
        except UnicodeEncodeError:
            return None
        if _CONTROL.search(host + path) or b" " in host + path or not path.startswith(b"/"):
            return None
        if ":" in probe.host:
            host = b"[" + host + b"]"
        if probe.port != default:
            host += b":%d" % probe.port
        return (
            b"POST " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\nAccept-Encoding: identity\r\n"
        )

    def _new(self, left: float) -> http.client.HTTPConnection:
        timeout = min(self.connect_timeout, max(left, 0.001))
        connection: http.client.HTTPConnection
        if self._context is not None:
            connection = http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self._context
            )
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        connection._create_connection = _connect  # type: ignore[attr-defined]
        try:
            try:
                connection.connect()
            except BaseException:
                connection.close()  # a socket connected before TLS (or the deadline) failed
                raise
        except ssl.SSLError as exc:
            raise SSLError(endpoint_url=self.url, error=exc) from exc
        except (TimeoutError, DeadlineExceededError) as exc:
            raise ConnectTimeoutError(endpoint_url=self.url, error=exc) from exc
        except OSError as exc:
            raise EndpointConnectionError(endpoint_url=self.url, error=exc) from exc
        assert connection.sock is not None
        connection.sock.settimeout(None)  # from here the deadline alone bounds it
        return connection

    def _take(self, left: float) -> http.client.HTTPConnection:
        while self._idle:
            try:
                connection = self._idle.pop()
            except IndexError:  # another thread took the last one
                break
            # Readable while idle: the server closed it (or sent garbage).
            if connection.sock is not None and not wait_for_read(connection.sock, timeout=0.0):
                return connection
            connection.close()
        return self._new(left)

    def request(
        self,
        method: str,
        body: Any,
        headers: Mapping[str, str],
        left: float,
        *,
        max_bytes: int | None = None,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """Status, headers and the whole body of one exchange; a body over
        `max_bytes` raises `BodyTooLargeError`, unread past that limit."""

        def exchange(connection: http.client.HTTPConnection) -> http.client.HTTPResponse:
            connection.request(method, self.path, body, dict(headers))
            return connection.getresponse()

        return self._exchange(exchange, left, max_bytes)

    def send(
        self, head: bytes, parts: Sequence[bytes | memoryview], size: int, left: float
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """`request` for a head built beforehand (it starts with `head_prefix` and
        ends with the blank line) and a body of `size` bytes in `parts`."""

        def exchange(connection: http.client.HTTPConnection) -> http.client.HTTPResponse:
            sock = connection.sock
            assert sock is not None
            if size < _JOIN_BELOW:
                sock.sendall(b"".join([head, *parts]))
            else:
                sock.sendall(head)
                for part in parts:
                    sock.sendall(part)
            response = http.client.HTTPResponse(sock, method="POST")
            try:
                response.begin()
            except BaseException:
                response.close()
                raise
            return response

        return self._exchange(exchange, left, None)

    def _exchange(
        self,
        exchange: Callable[[http.client.HTTPConnection], http.client.HTTPResponse],
        left: float,
        max_bytes: int | None,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        connection = self._take(left)
        try:
            response = exchange(connection)
            try:
                data = response.read() if max_bytes is None else _read_at_most(response, max_bytes)
            except BaseException:
                # An answer that closes the connection owns its socket: close it too.
                response.close()
                raise
        except ssl.SSLError as exc:
            connection.close()
            raise SSLError(endpoint_url=self.url, error=exc) from exc
        except (TimeoutError, DeadlineExceededError) as exc:
            connection.close()
            raise ReadTimeoutError(endpoint_url=self.url, error=exc) from exc
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise ConnectionClosedError(endpoint_url=self.url) from exc
        except BaseException:  # BodyTooLargeError included: the rest stays unread
            connection.close()
            raise
        if response.will_close or len(self._idle) >= self.max_idle:
            connection.close()
        else:
            self._idle.append(connection)
        return response.status, response.headers, data

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


def _read_at_most(response: http.client.HTTPResponse, max_bytes: int) -> bytes:
    length = response.getheader("Content-Length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise BodyTooLargeError(int(length), at_least=False)
    data = response.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BodyTooLargeError(len(data), at_least=True)
    return data
