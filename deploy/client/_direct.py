"""InvokeEndpoint without botocore's request pipeline.

botocore builds each request through its model-driven serializer, a chain of
event handlers and several copies of headers and body: most of the client CPU
of a call. `DirectInvoker` builds the one request InvokeEndpoint needs itself
(the same method, path, headers and body botocore sends), signs it with
botocore's own SigV4 signer when there are credentials, and sends it over
a small pool of keep-alive `http.client` connections whose sockets stop at
the call's deadline (`Connections`). The URL, region and
credentials come from a botocore client made once, so endpoint resolution is
botocore's.

InvokeEndpoint's model does not turn payload signing off, so a signed request
hashes its body (SigV4), as botocore does. An unsigned request (the local
endpoint) is written from a head built here, byte for byte what
`http.client` would write, with the parts that stay the same made once per
target model, and a body in pieces, never joined (`send`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from deploy.client._connections import Connections, header_line

SIGNING_NAME = "sagemaker"
# botocore's names for InvokeEndpoint's header members (service model 2017-05-13).
TARGET_MODEL = "X-Amzn-SageMaker-Target-Model"
INFERENCE_COMPONENT = "X-Amzn-SageMaker-Inference-Component"
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
INFERENCE_ID = "X-Amzn-SageMaker-Inference-Id"


def invocations_url(endpoint_url: str, name: str) -> str:
    """`/endpoints/{EndpointName}/invocations` under the runtime URL, as botocore quotes it."""
    return f"{endpoint_url.rstrip('/')}/endpoints/{quote(name, safe='')}/invocations"


class DirectInvoker:
    """Sends InvokeEndpoint for one endpoint; `credentials` None sends unsigned.

    `credentials` is botocore's (refreshable or not): frozen per call, so keys
    that rotate are picked up as botocore picks them up.
    """

    def __init__(
        self,
        *,
        url: str,
        region: str,
        credentials: Any | None,
        connections: Connections,
        user_agent: str,
    ) -> None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        self.url = url
        self.region = region
        self.credentials = credentials
        self.connections = connections
        self.user_agent = user_agent
        self._auth = SigV4Auth
        self._request = AWSRequest
        self._agent_line = header_line("User-Agent", user_agent)
        # The head's fixed start per (target model, inference component) (None: send
        # through `invoke`).
        self._heads: dict[tuple[str | None, str | None], bytes | None] = {}

    def headers(
        self,
        body: Any,
        content_type: str,
        *,
        target_model: str | None = None,
        accept: str | None = None,
        custom_attributes: str | None = None,
        inference_id: str | None = None,
        inference_component: str | None = None,
    ) -> dict[str, str]:
        """The request's headers, signed when there are credentials."""
        headers = {"Content-Type": content_type}
        if target_model is not None:
            headers[TARGET_MODEL] = target_model
        if inference_component is not None:
            headers[INFERENCE_COMPONENT] = inference_component
        if custom_attributes is not None:
            headers[CUSTOM_ATTRIBUTES] = custom_attributes
        if inference_id is not None:
            headers[INFERENCE_ID] = inference_id
        if accept is not None:
            headers["Accept"] = accept
        if self.credentials is not None:
            request = self._request(method="POST", url=self.url, data=body, headers=headers)
            frozen = self.credentials.get_frozen_credentials()
            self._auth(frozen, SIGNING_NAME, self.region).add_auth(request)
            headers = dict(request.headers.items())
        headers["User-Agent"] = self.user_agent  # never signed (botocore leaves it out too)
        return headers

    def invoke(
        self,
        body: Any,
        content_type: str,
        left: float,
        *,
        target_model: str | None = None,
        inference_component: str | None = None,
    ) -> tuple[int, Any, bytes]:
        """Status, headers and the whole body of one call within `left` seconds.

        `body` (bytes or a buffer) goes to the socket as it is: no copy.
        Failures raise botocore's exceptions (see `Connections.request`),
        and ValueError for a Content-Length that is not a number, as botocore.
        """
        headers = self.headers(
            body, content_type, target_model=target_model, inference_component=inference_component
        )
        status, answer_headers, data = self.connections.request("POST", body, headers, left)
        return _checked(status, answer_headers, data)

    def send(
        self,
        parts: Sequence[bytes | memoryview],
        size: int,
        content_type: str,
        left: float,
        *,
        target_model: str | None = None,
        inference_component: str | None = None,
    ) -> tuple[int, Any, bytes]:
        """`invoke` with the body in pieces (`size` bytes in all): unsigned, they go
        to the socket as they are; signed, they are joined (SigV4 hashes the body)."""
        start = None
        if self.credentials is None:
            start = self._head_start(target_model, inference_component)
        if start is None:
            return self.invoke(
                b"".join(parts),
                content_type,
                left,
                target_model=target_model,
                inference_component=inference_component,
            )
        head = b"%sContent-Length: %d\r\nContent-Type: %s\r\n%s\r\n" % (
            self.connections.head_prefix,
            size,
            content_type.encode("latin-1"),
            start,
        )
        status, answer_headers, data = self.connections.send(head, parts, size, left)
        return _checked(status, answer_headers, data)

    def _head_start(
        self, target_model: str | None, inference_component: str | None = None
    ) -> bytes | None:
        """The header lines after Content-Type (the target model, the inference
        component, User-Agent), in the order `headers` gives them; None where
        http.client must check them."""
        key = (target_model, inference_component)
        try:
            return self._heads[key]
        except KeyError:
            pass
        lines: bytes | None = None
        target = b"" if target_model is None else header_line(TARGET_MODEL, target_model)
        component = (
            b""
            if inference_component is None
            else header_line(INFERENCE_COMPONENT, inference_component)
        )
        if (
            self.connections.head_prefix is not None
            and target is not None
            and component is not None
            and self._agent_line
        ):
            lines = target + component + self._agent_line
        if len(self._heads) > 64:  # many target models: keep the most recent few
            self._heads.clear()
        self._heads[key] = lines
        return lines


def _checked(status: int, answer_headers: Any, data: bytes) -> tuple[int, Any, bytes]:
    length = answer_headers.get("Content-Length")
    if status < 300 and length is not None and int(length) != len(data):
        # botocore's check on a payload it reads (a Content-Length that is not
        # a number raises ValueError there too).
        from botocore.exceptions import IncompleteReadError

        raise IncompleteReadError(actual_bytes=len(data), expected_bytes=int(length))
    return status, answer_headers, data
