"""A deadline on a whole call: connect, send and every read of the answer.

botocore's `read_timeout` bounds each socket read, so a server (or a proxy in
between) that sends a byte every few seconds keeps a call alive for as long
as it likes. The sockets here check the calling thread's deadline before
each blocking operation, so no thread or timer runs per call. The direct
transport (`deploy.client._connections`) sends over them; with
`transport="boto3"`, `Endpoint` sends InvokeEndpoint through
`DeadlineTransport`, hooked into botocore's `before-send` event (a handler
may answer the request itself): botocore still builds, signs and parses every
request; the transport only moves its bytes, over urllib3 (botocore's own
HTTP library).

A proxy from the environment (HTTP(S)_PROXY) is left to botocore's own
transport, where `timeout` bounds each read only.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import urllib3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError as URLLib3ConnectTimeoutError,
)
from urllib3.exceptions import (
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
)
from urllib3.exceptions import (
    ReadTimeoutError as URLLib3ReadTimeoutError,
)
from urllib3.util.ssl_ import create_urllib3_context

from deploy.client._deadline import DeadlineExceededError, remaining


class _DeadlineMixin:
    """Arms the socket timeout to what is left of the deadline before each
    blocking call (never more than the timeout urllib3 asked for)."""

    _wanted: float | None = None

    def settimeout(self, value: float | None) -> None:
        self._wanted = value
        super().settimeout(value)  # type: ignore[misc]

    def _arm(self) -> None:
        left = remaining()
        if left is None:
            return
        if left <= 0:
            raise DeadlineExceededError("the call's deadline passed")
        wanted = self._wanted
        super().settimeout(left if wanted is None else min(wanted, left))  # type: ignore[misc]

    def recv(self, *args: Any) -> bytes:
        self._arm()
        return super().recv(*args)  # type: ignore[misc, no-any-return]

    def recv_into(self, *args: Any) -> int:
        self._arm()
        return super().recv_into(*args)  # type: ignore[misc, no-any-return]

    def send(self, *args: Any) -> int:
        self._arm()
        return super().send(*args)  # type: ignore[misc, no-any-return]

    def sendall(self, *args: Any) -> None:
        # A plain socket's sendall applies its timeout to the whole send; an SSL
        # socket's loops over `send`, armed above.
        self._arm()
        super().sendall(*args)  # type: ignore[misc]


class _DeadlineSocket(_DeadlineMixin, socket.socket):
    pass


class _DeadlineSSLSocket(_DeadlineMixin, ssl.SSLSocket):
    pass


def _adopt(plain: socket.socket) -> socket.socket:
    """The same connected socket as a `_DeadlineSocket` (TLS wraps it later)."""
    timeout = plain.gettimeout()
    sock = _DeadlineSocket(plain.family, plain.type, plain.proto, plain.detach())
    sock.settimeout(timeout)
    return sock


class _Connection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _adopt(super()._new_conn())


class _TLSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _adopt(super()._new_conn())


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


class DeadlineTransport:
    """Sends botocore's prepared requests within the caller's `deadline`.

    `ca_bundle` is what botocore would verify TLS with (a file, or None for
    its default bundle); `max_connections` per host, as botocore's pool.
    """

    def __init__(
        self, *, connect_timeout: float, max_connections: int, ca_bundle: str | None = None
    ) -> None:
        from botocore.httpsession import get_cert_path

        self.connect_timeout = connect_timeout
        context = create_urllib3_context()
        context.sslsocket_class = _DeadlineSSLSocket
        self._tls: dict[str, Any] = {
            "ssl_context": context,
            "ca_certs": ca_bundle or get_cert_path(True),
        }
        self._max_connections = max_connections
        self._pools = urllib3.PoolManager(num_pools=10, maxsize=max_connections, **self._tls)
        self._pools.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}
        self._proxied: dict[str, bool] = {}

    def register(self, client: Any, operation: str | None = "InvokeEndpoint") -> None:
        """Send `client`'s `operation` (None: all its operations) within the deadline."""
        event = f"before-send.{client.meta.service_model.service_id.hyphenize()}"
        if operation is not None:
            event += f".{operation}"
        client.meta.events.register_last(event, self.send)

    def uses_proxy(self, url: str) -> bool:
        """Whether the environment sends `url` through a proxy (left to botocore)."""
        parts = urlsplit(url)
        key = f"{parts.scheme}://{parts.netloc}"
        if key not in self._proxied:
            proxy = urllib.request.getproxies().get(parts.scheme)
            self._proxied[key] = bool(proxy) and not urllib.request.proxy_bypass(
                parts.hostname or ""
            )
        return self._proxied[key]

    def send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        """botocore's `before-send` handler: the response, or None to let botocore send."""
        left = remaining()
        if left is None or self.uses_proxy(request.url):
            return None
        if left <= 0:  # a retry botocore starts after the deadline
            raise ReadTimeoutError(
                endpoint_url=request.url, error=DeadlineExceededError("the call's deadline passed")
            )
        answer = self.urlopen(
            request.method, request.url, request.body, dict(request.headers.items()), left
        )
        headers: Any = answer.headers  # what botocore's transport passes too
        response = AWSResponse(request.url, answer.status, headers, answer)
        if not request.stream_output:
            # A body botocore parses whole is read here, where failures are mapped,
            # as botocore's own transport does; a streamed one is read by the caller.
            try:
                with _botocore_errors(request.url):
                    preloaded = response.content  # the property reads and keeps the body
                    del preloaded
            except BaseException:
                answer.close()  # a half-read body leaves a connection nobody can reuse
                raise
        return response

    def urlopen(
        self,
        method: str,
        url: str,
        body: Any,
        headers: Mapping[str, str],
        left: float,
        *,
        preload: bool = False,
    ) -> urllib3.BaseHTTPResponse:
        """One exchange within `left` seconds (and the thread's deadline); the body
        is read here when `preload`. Failures raise botocore's exceptions, as its
        own transport does, so every caller maps them one way."""
        timeout = urllib3.Timeout(connect=min(self.connect_timeout, max(left, 0.001)), read=left)
        with _botocore_errors(url):
            return self._pools.urlopen(
                method,
                url,
                body=body,
                headers=headers,
                retries=False,
                redirect=False,
                assert_same_host=False,
                preload_content=preload,
                decode_content=False,
                timeout=timeout,
            )

    def close(self) -> None:
        self._pools.clear()


@contextlib.contextmanager
def _botocore_errors(url: str) -> Iterator[None]:
    """urllib3's failures as botocore's exceptions."""
    try:
        yield
    # urllib3's NewConnectionError (refused, unreachable) subclasses its
    # ConnectTimeoutError: it goes first, or a refused connection reads as a timeout.
    except (NewConnectionError, NameResolutionError) as exc:
        raise EndpointConnectionError(endpoint_url=url, error=exc) from exc
    except URLLib3ConnectTimeoutError as exc:
        raise ConnectTimeoutError(endpoint_url=url, error=exc) from exc
    except (URLLib3ReadTimeoutError, DeadlineExceededError) as exc:
        raise ReadTimeoutError(endpoint_url=url, error=exc) from exc
    except ProtocolError as exc:
        raise ConnectionClosedError(endpoint_url=url) from exc
    except urllib3.exceptions.SSLError as exc:
        raise SSLError(endpoint_url=url, error=exc) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise HTTPClientError(error=exc) from exc
