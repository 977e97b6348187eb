"""`AsyncEndpoint`: the same surface as `Endpoint` for asyncio applications.

Requests go over one pooled aiohttp session and are signed with botocore's
SigV4 signer (service `sagemaker`), so no thread is tied up per call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from deploy.client._async_inference import AsyncInferenceOptions, AsyncPendingInference
from deploy.client._core import Prepared, finish, prepare
from deploy.client._discovery import DEFAULT_MANIFEST_TTL, ManifestSource
from deploy.client._errors import (
    EndpointError,
    InferenceTimeoutError,
    ModelNotFoundError,
)
from deploy.client._failures import ErrorAnswer, error_document, to_exception
from deploy.client._manifest import ModelInfo
from deploy.client._metrics import Call, MetricsOption, counted
from deploy.client._result import InferResult
from deploy.client._retry import Attempts, RetryPolicy, TransientError
from deploy.client._sync import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Endpoint

_TLS_SHUTDOWN_S = 0.25
_SIGNING_NAME = "sagemaker"
_TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
_INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"


class AsyncEndpoint:
    """Async twin of `Endpoint`; use it as `async with AsyncEndpoint(...) as ep:`.

    Arguments mean what they mean for `Endpoint`; `max_connections` sizes the
    connection pool.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        session: Any | None = None,
        manifest: str | Path | Any | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 10.0,
        retries: RetryPolicy | int = DEFAULT_RETRIES,
        max_payload_bytes: int | None = None,
        max_connections: int = 64,
        async_options: AsyncInferenceOptions | None = None,
        async_endpoint_url: str | None = None,
        manifest_ttl: float | None = DEFAULT_MANIFEST_TTL,
        sticky_key: str | None = None,
        metrics: MetricsOption = None,
    ) -> None:
        if importlib.util.find_spec("aiohttp") is None:
            raise ModuleNotFoundError(
                "AsyncEndpoint needs aiohttp: pip install 'triton-sagemaker-deploy[async]'",
                name="aiohttp",
            )
        # The sync endpoint owns credentials, region and endpoint resolution; its
        # client is only used to learn the URL and is never called.
        self._sync = Endpoint(
            name,
            region=region,
            endpoint_url=endpoint_url,
            session=session,
            manifest=manifest,
            timeout=timeout,
            connect_timeout=connect_timeout,
            retries=retries,
            max_payload_bytes=max_payload_bytes,
            async_options=async_options,
            async_endpoint_url=async_endpoint_url,
            manifest_ttl=manifest_ttl,
            sticky_key=sticky_key,
            metrics=metrics,
        )
        self.name = self._sync.name
        self._metrics = self._sync._metrics
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retries = self._sync.retries
        self.max_payload_bytes = max_payload_bytes
        self.max_connections = max_connections
        self._manifest: ManifestSource = self._sync._manifest
        self._http: Any | None = None
        self._url: str | None = None
        self._signer: Any | None = None
        self._signed = True
        self._tls: ssl.SSLContext | bool = True  # aiohttp's default verification

    async def infer(
        self,
        model: str,
        inputs: Mapping[str, Any],
        outputs: Sequence[str] | None = None,
        *,
        target_model: str | None = None,
        class_count: int | None = None,
        parameters: Mapping[str, Any] | None = None,
        sticky_key: str | None = None,
    ) -> InferResult:
        """See `Endpoint.infer`."""
        if self._metrics is None:
            return await self._infer(
                model, inputs, outputs, target_model, class_count, parameters, sticky_key, None
            )
        call = Call()
        try:
            result = await self._infer(
                model, inputs, outputs, target_model, class_count, parameters, sticky_key, call
            )
        except Exception as exc:
            if counted(exc):
                self._metrics.emit(call, exc)
            raise
        self._metrics.emit(call, None)
        return result

    async def _infer(
        self,
        model: str,
        inputs: Mapping[str, Any],
        outputs: Sequence[str] | None,
        target_model: str | None,
        class_count: int | None,
        parameters: Mapping[str, Any] | None,
        sticky_key: str | None,
        call: Call | None,
    ) -> InferResult:
        prepared = await self._prepare(
            model, inputs, outputs, target_model, class_count, parameters, sticky_key, call
        )
        try:
            return await self._send(prepared, call)
        except ModelNotFoundError:
            if not prepared.route.from_manifest:
                raise
            await asyncio.to_thread(self._manifest.refresh, self._sync.discovery_timeout)
            again = await self._prepare(
                model, inputs, outputs, target_model, class_count, parameters, sticky_key, call
            )
            if (again.route.target_model, again.route.inference_component) == (
                prepared.route.target_model,
                prepared.route.inference_component,
            ):
                raise
            return await self._send(again, call)

    async def submit(
        self,
        model: str,
        inputs: Mapping[str, Any],
        outputs: Sequence[str] | None = None,
        *,
        target_model: str | None = None,
        class_count: int | None = None,
        parameters: Mapping[str, Any] | None = None,
        sticky_key: str | None = None,
    ) -> AsyncPendingInference:
        """See `Endpoint.submit`; the handle's `done()` and `wait()` are awaited."""
        prepared = await self._prepare(
            model, inputs, outputs, target_model, class_count, parameters, sticky_key
        )
        if prepared.route.asynchronous is None:
            return AsyncPendingInference(result=await self._send(prepared))
        client = self._sync._asynchronous()
        call = await asyncio.to_thread(client.submit, prepared, self.name)
        return AsyncPendingInference(call=call, client=client)

    async def model_info(self, model: str) -> ModelInfo | None:
        """See `Endpoint.model_info`."""
        return await asyncio.to_thread(self._sync.model_info, model)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
            # Closed transports finish on the loop's next turn, a TLS one only after its
            # shutdown exchange (aiohttp's advice: about 250 ms); an asyncio.run() that
            # ends right after would leave them unclosed.
            secure = self._url is not None and self._url.startswith("https:")
            await asyncio.sleep(_TLS_SHUTDOWN_S if secure else 0)
        self._sync.close()

    async def __aenter__(self) -> AsyncEndpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _prepare(
        self,
        model: str,
        inputs: Mapping[str, Any],
        outputs: Sequence[str] | None,
        target_model: str | None,
        class_count: int | None,
        parameters: Mapping[str, Any] | None,
        sticky_key: str | None = None,
        call: Call | None = None,
    ) -> Prepared:
        if not self._manifest.loaded:
            # Discovery and S3 reads are blocking boto3 calls; keep them off the loop.
            await asyncio.to_thread(self._manifest.get, self._sync.discovery_timeout)
        manifest = self._manifest.get()
        origin = self._manifest.origin
        chosen = self._sync._routes.get(
            model,
            target_model,
            manifest,
            self._manifest.reason,
            origin,
            self._sync.sticky_key if sticky_key is None else sticky_key,
        )
        if call is not None:
            call.route = chosen
        prepared = prepare(
            chosen,
            inputs,
            outputs,
            class_count=class_count,
            parameters=parameters,
            max_payload_bytes=self.max_payload_bytes,
            endpoint=self.name,
            manifest=manifest,
            origin=origin,
        )
        if call is not None:
            call.route, call.request_bytes = prepared.route, prepared.size
        return prepared

    async def _send(self, prepared: Prepared, call: Call | None = None) -> InferResult:
        if prepared.route.asynchronous is not None:
            # S3 transfers and InvokeEndpointAsync are boto3 calls: in a thread.
            client = self._sync._asynchronous()
            pending = await asyncio.to_thread(client.submit, prepared, self.name)
            return await client.wait_async(pending)
        attempts = Attempts(self.retries, f"endpoint {self.name!r}")
        while True:
            attempts.start()
            try:
                body, content_type = await self._invoke(prepared, attempts.remaining())
            except TransientError as failure:
                await asyncio.sleep(attempts.delay_after(failure))
                continue
            if call is not None:
                call.response_bytes = len(body)
            return finish(prepared, body, content_type)

    def _resolve(self) -> None:
        """URL, region and credentials; blocking (credential providers may call out)."""
        from botocore.auth import SigV4Auth

        runtime = self._sync.runtime
        self._url = (
            f"{runtime.meta.endpoint_url.rstrip('/')}/endpoints/{quote(self.name, safe='')}"
            "/invocations"
        )
        session = self._sync._boto_session()
        # Verify TLS as botocore would (AWS_CA_BUNDLE / the profile's ca_bundle).
        ca_bundle = getattr(session, "_session", session).get_config_variable("ca_bundle")
        if ca_bundle:
            self._tls = ssl.create_default_context(cafile=ca_bundle)
        credentials = session.get_credentials()
        self._signed = credentials is not None
        if credentials is not None:
            self._signer = (SigV4Auth, credentials, runtime.meta.region_name)

    async def _start(self) -> None:
        import aiohttp

        if self._url is None:
            await asyncio.to_thread(self._resolve)
        if self._http is None:
            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections, ssl=self._tls),
                timeout=aiohttp.ClientTimeout(
                    total=self.timeout, sock_connect=self.connect_timeout
                ),
                auto_decompress=False,
            )

    def _headers(self, prepared: Prepared) -> dict[str, str]:
        headers = {"Content-Type": prepared.request.content_type}
        if prepared.route.target_model is not None:
            headers[_TARGET_MODEL_HEADER] = prepared.route.target_model
        if prepared.route.inference_component is not None:
            headers[_INFERENCE_COMPONENT_HEADER] = prepared.route.inference_component
        if not self._signed or self._signer is None:
            return headers
        from botocore.awsrequest import AWSRequest

        signer_class, credentials, region = self._signer
        request = AWSRequest(
            method="POST", url=self._url, data=prepared.request.body, headers=headers
        )
        # Frozen per request: refreshable credentials may rotate between calls.
        signer_class(credentials.get_frozen_credentials(), _SIGNING_NAME, region).add_auth(request)
        return dict(request.headers.items())

    async def _invoke(self, prepared: Prepared, left: float) -> tuple[bytes, str | None]:
        """One attempt, all of it (connect, send, reading the whole answer) within
        `timeout` and within `left`, what the retry policy's total_timeout leaves."""
        import aiohttp

        if self._http is None:
            await self._start()
        assert self._http is not None and self._url is not None  # set by _start
        model = prepared.route.model
        where = f"endpoint {self.name!r}, model {model!r}"
        budget = min(self.timeout, left)
        timeout = aiohttp.ClientTimeout(
            total=budget, sock_connect=min(self.connect_timeout, budget)
        )
        try:
            async with self._http.post(
                self._url,
                data=prepared.request.body,
                headers=self._headers(prepared),
                timeout=timeout,
            ) as response:
                body = await response.read()
                if response.status == 200:
                    return body, response.headers.get("Content-Type")
                answer = _answer_from_http(response.status, response.headers, body)
        except TimeoutError as exc:  # aiohttp's total and connect timeouts included
            raise InferenceTimeoutError(
                f"no complete answer within timeout={self.timeout}s"
                + ("" if left >= self.timeout else f" (total_timeout left {left:.3g}s)"),
                where=where,
                fix="raise timeout= for slow models",
            ) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise TransientError(EndpointError(f"connection failed: {exc!r}", where=where)) from exc
        except aiohttp.ClientError as exc:
            # A response aiohttp cannot parse (ClientResponseError from a bad status
            # line or header): as broken as a dropped connection.
            raise TransientError(
                EndpointError(f"malformed response: {exc!r}", where=where)
            ) from exc
        raise to_exception(answer, endpoint=self.name, model=model)


def _answer_from_http(status: int, headers: Mapping[str, str], body: bytes) -> ErrorAnswer:
    """Read an AWS JSON error answer (the same facts botocore would parse)."""
    document = error_document(body) or {}
    code = headers.get("x-amzn-ErrorType") or str(document.get("__type", "")) or None
    if code:
        code = code.split(":", 1)[0].rsplit("#", 1)[-1]
    message = document.get("message") or document.get("Message")
    if not isinstance(message, str):
        message = body[:200].decode("utf-8", "replace") or f"HTTP {status}"
    original = document.get("OriginalStatusCode")
    original_message = document.get("OriginalMessage")
    return ErrorAnswer(
        status=status,
        code=code,
        message=message,
        original_status=original if isinstance(original, int) else None,
        original_message=original_message if isinstance(original_message, str) else None,
    )
