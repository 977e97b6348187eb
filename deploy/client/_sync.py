"""`Endpoint`: blocking calls, sent directly (`DirectInvoker`) or through boto3's
sagemaker-runtime `invoke_endpoint`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from deploy.client._async_inference import (
    AsyncInferenceClient,
    AsyncInferenceOptions,
    PendingInference,
)
from deploy.client._core import Prepared, Routes, finish, prepare
from deploy.client._deadline import deadline
from deploy.client._discovery import (
    DEFAULT_MANIFEST_TTL,
    ManifestLocation,
    ManifestSource,
    endpoint_name_at,
)
from deploy.client._errors import (
    ClientError,
    EndpointError,
    InferenceTimeoutError,
    ModelNotFoundError,
    ResponseFormatError,
)
from deploy.client._failures import ErrorAnswer, answer_from_response, to_exception
from deploy.client._manifest import ModelInfo
from deploy.client._metrics import Call, MetricsOption, MetricsSink, counted, sink_for
from deploy.client._result import InferResult
from deploy.client._retry import Attempts, RetryPolicy, TransientError

if TYPE_CHECKING:
    from deploy.client._connections import Connections
    from deploy.client._direct import DirectInvoker
    from deploy.client._transport import DeadlineTransport

DEFAULT_TIMEOUT = 60.0
DEFAULT_REGION = "us-east-1"
DEFAULT_RETRIES = RetryPolicy()
_MAX_CONNECTIONS = 32
_CONTROL_PLANE_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER")


class Endpoint:
    """A SageMaker endpoint serving Triton models, called with numpy arrays.

    `manifest` locates the model store's manifest.json (a path, an
    `s3://bucket/prefix/manifest.json` URL, or None to discover it: from the
    endpoint's model data URL, or from `endpoint_url` itself, which the local
    endpoint answers with its manifest). `transport="direct"` (the default)
    builds, signs (botocore's SigV4) and sends InvokeEndpoint itself over pooled
    urllib3 connections, with botocore's endpoint resolution and credentials;
    `transport="boto3"` calls the boto3 client's `invoke_endpoint`; both fail
    and retry alike. `timeout` bounds each attempt as a
    whole: connect, send and every read (seconds), and finding the manifest
    on first use (at most 16 MiB of it is read); `retries` is a
    `RetryPolicy` (or a number of attempts) for transient failures, its
    `total_timeout` bounds all attempts. `client` injects a ready
    sagemaker-runtime client (tests, custom transports); it keeps its own
    transport, where botocore's read timeout bounds each read only. With
    `endpoint_url` and no AWS credentials, requests go unsigned (the local
    endpoint).

    `max_payload_bytes` None is the hosting mode's limit (6 MB real-time,
    1 GB asynchronous). On an asynchronous endpoint (manifest `"hosting":
    "async"`), and for requests over 6 MB when the manifest pairs the
    endpoint with an async lane, requests travel through S3 as
    `async_options` (`AsyncInferenceOptions`) says; `async_endpoint_url`
    sends the lane's InvokeEndpointAsync elsewhere than `endpoint_url`
    (a second local endpoint). Only objects under the manifest's own
    asynchronous prefixes, in its bucket, are read, written or deleted.

    A manifest found from a path, a URL or the endpoint is used for
    `manifest_ttl` seconds (default 60), then read again, so a model's new
    version, canary or rollback reaches this client within that time (None:
    read once). While a model has a canary, each call goes to the live or the
    canary TargetModel as the manifest's split says: uniformly, or always the
    same for one `sticky_key` (a session or user id; `infer(sticky_key=)`
    overrides this client's default). `result.target_model` says which one
    answered; `target_model=` picks one yourself and bypasses the split.

    `metrics` writes one CloudWatch embedded-metric record per `infer` call
    (latency, errors by class, payload bytes under the logical model name and
    its TargetModel; `deploy.client.model_metrics`): True to standard output,
    or to a stream or `logging.Logger` given; None (the default) follows the
    `DEPLOY_MODEL_METRICS` environment variable (`stdout`, `stderr`, unset: off).
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        session: Any | None = None,
        client: Any | None = None,
        manifest: str | Path | Any | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 10.0,
        retries: RetryPolicy | int = DEFAULT_RETRIES,
        max_payload_bytes: int | None = None,
        transport: Literal["direct", "boto3"] = "direct",
        async_options: AsyncInferenceOptions | None = None,
        async_endpoint_url: str | None = None,
        manifest_ttl: float | None = DEFAULT_MANIFEST_TTL,
        sticky_key: str | None = None,
        metrics: MetricsOption = None,
    ) -> None:
        if transport not in ("direct", "boto3"):
            raise ValueError(f"transport must be 'direct' or 'boto3', not {transport!r}")
        self.name = name if name is not None else _name_at(endpoint_url, connect_timeout)
        # An injected client is the caller's transport: it keeps being used.
        self.transport = "boto3" if client is not None else transport
        self.region = region
        self.endpoint_url = endpoint_url
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retries = retries if isinstance(retries, RetryPolicy) else RetryPolicy(retries)
        self.max_payload_bytes = max_payload_bytes
        self.async_options = async_options or AsyncInferenceOptions()
        self.async_endpoint_url = async_endpoint_url
        self.sticky_key = sticky_key
        self._metrics: MetricsSink | None = sink_for(metrics, self.name)
        self._async_client: AsyncInferenceClient | None = None
        self._async_runtimes: dict[str | None, Any] = {}
        self._session = session
        self._runtime = client
        self._transport: DeadlineTransport | None = None
        self._control_transport: DeadlineTransport | None = None
        self._direct: DirectInvoker | None = None
        self._connections: Connections | None = None
        self._direct_ready = False
        # Threads sharing one Endpoint create its client and transport once (a second
        # pool, dropped, would leak its sockets).
        self._setup = threading.RLock()
        self._clients: dict[str, Any] = {}
        self._routes = Routes()
        location: ManifestLocation = manifest
        # A runtime URL of its own (the local endpoint) has no DescribeEndpoint behind it
        # unless a control-plane URL is configured too (the moto server, a proxy).
        discover = endpoint_url is None or any(os.environ.get(name) for name in _CONTROL_PLANE_ENV)
        self._manifest = ManifestSource(
            location,
            endpoint=self.name,
            client_factory=self._aws_client,
            discover=discover,
            endpoint_url=endpoint_url,
            connect_timeout=connect_timeout,
            ca_bundle=self._ca_bundle,
            ttl=manifest_ttl,
        )

    # -- public surface -------------------------------------------------------------

    def infer(
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
        """Run `model` on `inputs` (name → array); returns output arrays by name.

        `model` is a logical name from the manifest or a TargetModel
        (`*.tar.gz`); `target_model` overrides the manifest's choice.
        `class_count=k` asks Triton for the top-k classes of each output
        (read them with `result.classes(name)`). Outputs are read-only views
        into the response body, not copies (see `InferResult`). `sticky_key`
        keeps a caller on one version while the model has a canary (default:
        the client's `sticky_key`).
        """
        if self._metrics is None:
            return self._infer(
                model, inputs, outputs, target_model, class_count, parameters, sticky_key, None
            )
        call = Call()
        try:
            result = self._infer(
                model, inputs, outputs, target_model, class_count, parameters, sticky_key, call
            )
        except Exception as exc:
            if counted(exc):
                self._metrics.emit(call, exc)
            raise
        self._metrics.emit(call, None)
        return result

    def _infer(
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
        prepared = self._prepare(
            model, inputs, outputs, target_model, class_count, parameters, sticky_key, call
        )
        try:
            return self._send(prepared, call)
        except ModelNotFoundError:
            # The manifest may have moved on (a new archive name): re-read it once.
            if not prepared.route.from_manifest:
                raise
            self._manifest.refresh(self.discovery_timeout)
            again = self._prepare(
                model, inputs, outputs, target_model, class_count, parameters, sticky_key, call
            )
            if (again.route.target_model, again.route.inference_component) == (
                prepared.route.target_model,
                prepared.route.inference_component,
            ):
                raise
            return self._send(again, call)

    def submit(
        self,
        model: str,
        inputs: Mapping[str, Any],
        outputs: Sequence[str] | None = None,
        *,
        target_model: str | None = None,
        class_count: int | None = None,
        parameters: Mapping[str, Any] | None = None,
        sticky_key: str | None = None,
    ) -> PendingInference:
        """Send a request and return without waiting for an asynchronous answer.

        On an asynchronous endpoint (or the async lane) the returned handle's
        `wait()` polls S3 for the answer; a request answered in real time
        comes back already done."""
        prepared = self._prepare(
            model, inputs, outputs, target_model, class_count, parameters, sticky_key
        )
        if prepared.route.asynchronous is None:
            return PendingInference(result=self._send(prepared))
        client = self._asynchronous()
        return PendingInference(call=client.submit(prepared, self.name), client=client)

    def model_info(self, model: str) -> ModelInfo | None:
        """What the manifest declares for `model` (None when unknown or no manifest)."""
        manifest = self._manifest.get(self.discovery_timeout)
        return manifest.find(model) if manifest is not None else None

    def close(self) -> None:
        """Close the HTTP connections of clients this endpoint created."""
        for client in [self._runtime, *self._clients.values(), *self._async_runtimes.values()]:
            if client is not None and hasattr(client, "close"):
                client.close()
        for transport in (self._transport, self._control_transport):
            if transport is not None:
                transport.close()
        if self._connections is not None:
            self._connections.close()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------

    def _prepare(
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
        manifest = self._manifest.get(self.discovery_timeout)
        origin = self._manifest.origin
        chosen = self._routes.get(
            model,
            target_model,
            manifest,
            self._manifest.reason,
            origin,
            self.sticky_key if sticky_key is None else sticky_key,
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

    @property
    def discovery_timeout(self) -> float:
        """How long finding the manifest may take on first use: a call's `timeout`."""
        return min(self.timeout, self.retries.total_timeout)

    def _send(self, prepared: Prepared, call: Call | None = None) -> InferResult:
        if prepared.route.asynchronous is not None:
            client = self._asynchronous()
            return client.wait(client.submit(prepared, self.name))
        attempts = Attempts(self.retries, f"endpoint {self.name!r}")
        while True:
            attempts.start()
            try:
                body, content_type = self._invoke(prepared, attempts.remaining())
            except TransientError as failure:
                time.sleep(attempts.delay_after(failure))
                continue
            if call is not None:
                call.response_bytes = len(body)
            return finish(prepared, body, content_type)

    def _invoke(self, prepared: Prepared, left: float) -> tuple[bytes, str | None]:
        """One attempt, all of it (connect, send, every read) within `timeout` and
        within `left`, what the retry policy's total_timeout leaves."""
        model = prepared.route.model
        budget = min(self.timeout, left)
        direct = self._direct_invoker()
        try:
            with deadline(budget):
                if direct is None:
                    return self._invoke_boto3(prepared)
                if direct.credentials is None and self.endpoint_url is None:
                    from botocore.exceptions import NoCredentialsError

                    raise NoCredentialsError()  # what botocore's signer raises
                status, headers, data = direct.send(
                    prepared.parts,
                    prepared.size,
                    prepared.content_type,
                    budget,
                    target_model=prepared.route.target_model,
                    inference_component=prepared.route.inference_component,
                )
                if status < 300:
                    return data, headers.get("Content-Type")
                failure = answer_from_response(status, headers, data)
        except Exception as exc:
            where = f"endpoint {self.name!r}, model {model!r}"
            error = self._failure(exc, where, model, left)
            if error is None:
                raise
            raise error from exc
        raise to_exception(failure, endpoint=self.name, model=model)

    def _failure(
        self, exc: Exception, where: str, model: str, left: float
    ) -> ClientError | TransientError | None:
        """The SDK error for what an attempt raised (botocore's exceptions, from
        either transport); None for anything else, which propagates as it is."""
        from botocore.exceptions import (
            BotoCoreError,
            ConnectionClosedError,
            ConnectTimeoutError,
            HTTPClientError,
            NoCredentialsError,
            ReadTimeoutError,
        )
        from botocore.exceptions import (
            ClientError as BotoClientError,
        )
        from botocore.exceptions import (
            ConnectionError as BotoConnectionError,
        )

        if isinstance(exc, BotoClientError):
            answer = _answer_from_botocore(exc.response)
            return to_exception(answer, endpoint=self.name, model=model)
        if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
            return InferenceTimeoutError(
                f"no complete answer within timeout={self.timeout}s"
                + ("" if left >= self.timeout else f" (total_timeout left {left:.3g}s)"),
                where=where,
                fix="raise timeout= for slow models",
            )
        if isinstance(exc, BotoConnectionError | ConnectionClosedError | HTTPClientError):
            return TransientError(EndpointError(f"connection failed: {exc}", where=where))
        if isinstance(exc, ValueError):  # an answer framed wrongly (Content-Length)
            return TransientError(EndpointError(f"malformed response: {exc}", where=where))
        if isinstance(exc, NoCredentialsError):
            return EndpointError(
                "no AWS credentials found",
                where=where,
                fix="configure credentials (AWS_PROFILE, environment) or pass session=",
            )
        if isinstance(exc, BotoCoreError):
            return EndpointError(str(exc), where=where)
        if isinstance(exc, RecursionError | MemoryError):  # botocore parsing an error body
            return _unparsable(exc, where)
        return None

    def _invoke_boto3(self, prepared: Prepared) -> tuple[bytes, str | None]:
        request: dict[str, Any] = {
            "EndpointName": self.name,
            "Body": prepared.request.body,
            "ContentType": prepared.request.content_type,
        }
        if prepared.route.target_model is not None:
            request["TargetModel"] = prepared.route.target_model
        if prepared.route.inference_component is not None:
            request["InferenceComponentName"] = prepared.route.inference_component
        response = self.runtime.invoke_endpoint(**request)
        return response["Body"].read(), response.get("ContentType")

    def _direct_invoker(self) -> DirectInvoker | None:
        """The direct transport, set up on first use; None where boto3 sends (asked
        for, an injected client, or a proxy from the environment)."""
        if self._direct_ready:
            return self._direct
        with self._setup:
            if not self._direct_ready:
                self._set_up_direct()
        return self._direct

    def _set_up_direct(self) -> None:
        """Build the direct transport, or leave it None (called once, under the lock)."""
        runtime = self.runtime
        if self.transport == "direct" and self._transport is not None:
            url = runtime.meta.endpoint_url
            if not self._transport.uses_proxy(url):
                import botocore

                from deploy.client._connections import Connections
                from deploy.client._direct import DirectInvoker, invocations_url

                session = self._boto_session()
                settings = getattr(session, "_session", session)
                target = invocations_url(url, self.name)
                self._connections = Connections(
                    target,
                    connect_timeout=self.connect_timeout,
                    max_idle=_MAX_CONNECTIONS,
                    ca_bundle=settings.get_config_variable("ca_bundle"),
                )
                self._direct = DirectInvoker(
                    url=target,
                    region=runtime.meta.region_name,
                    credentials=session.get_credentials(),
                    connections=self._connections,
                    user_agent=f"deploy-client Botocore/{botocore.__version__}",
                )
        self._direct_ready = True

    def _asynchronous(self) -> AsyncInferenceClient:
        if self._async_client is None:
            self._async_client = AsyncInferenceClient(
                s3=self._data_s3,
                invoke=self._invoke_async,
                options=self.async_options,
            )
        return self._async_client

    def _data_s3(self) -> Any:
        """The S3 client that moves asynchronous requests and answers (created once)."""
        if "s3-data" not in self._clients:
            from botocore.config import Config

            config = Config(
                connect_timeout=self.connect_timeout,
                read_timeout=max(self.timeout, 60.0),
                retries={"total_max_attempts": 3, "mode": "standard"},
                max_pool_connections=max(10, self.async_options.max_concurrency * 2),
            )
            self._clients["s3-data"] = self._boto_session().client(
                "s3", region_name=self._region(), config=config
            )
        return self._clients["s3-data"]

    def _invoke_async(self, request: dict[str, Any], endpoint: str, model: str) -> dict[str, Any]:
        """InvokeEndpointAsync with the retry policy; botocore errors as SDK errors."""
        from botocore.exceptions import (
            BotoCoreError,
            ConnectionClosedError,
            HTTPClientError,
            NoCredentialsError,
        )
        from botocore.exceptions import ClientError as BotoClientError
        from botocore.exceptions import ConnectionError as BotoConnectionError

        where = f"endpoint {endpoint!r}, model {model!r}"
        lane = endpoint != self.name
        runtime = self._async_runtime(self.async_endpoint_url if lane else self.endpoint_url)
        attempts = Attempts(self.retries, f"endpoint {endpoint!r}")
        while True:
            attempts.start()
            try:
                try:
                    answer: dict[str, Any] = runtime.invoke_endpoint_async(**request)
                    return answer
                except BotoClientError as exc:
                    error = to_exception(
                        _answer_from_botocore(exc.response), endpoint=endpoint, model=model
                    )
                    raise error from exc
                except (BotoConnectionError, ConnectionClosedError, HTTPClientError) as exc:
                    raise TransientError(
                        EndpointError(f"connection failed: {exc}", where=where)
                    ) from exc
                except NoCredentialsError as exc:
                    raise EndpointError(
                        "no AWS credentials found",
                        where=where,
                        fix="configure credentials (AWS_PROFILE, environment) or pass session=",
                    ) from exc
                except BotoCoreError as exc:
                    raise EndpointError(str(exc), where=where) from exc
                except (RecursionError, MemoryError) as exc:  # botocore parsing the answer
                    raise _unparsable(exc, where) from exc
            except TransientError as failure:
                time.sleep(attempts.delay_after(failure))

    def _async_runtime(self, endpoint_url: str | None) -> Any:
        """A sagemaker-runtime client for InvokeEndpointAsync (a quick call: no deadline
        transport), one per URL."""
        if endpoint_url not in self._async_runtimes:
            from botocore import UNSIGNED
            from botocore.config import Config

            session = self._boto_session()
            options: dict[str, Any] = {
                "read_timeout": self.timeout,
                "connect_timeout": self.connect_timeout,
                "retries": {"total_max_attempts": 1, "mode": "standard"},
            }
            if endpoint_url is not None and session.get_credentials() is None:
                options["signature_version"] = UNSIGNED
            self._async_runtimes[endpoint_url] = session.client(
                "sagemaker-runtime",
                region_name=self._region(),
                endpoint_url=endpoint_url,
                config=Config(**options),
            )
        return self._async_runtimes[endpoint_url]

    @property
    def runtime(self) -> Any:
        """The sagemaker-runtime client (created once, botocore retries off; a
        client this endpoint creates sends through `DeadlineTransport`)."""
        if self._runtime is None:
            with self._setup:
                if self._runtime is None:
                    self._runtime = self._make_runtime()
        return self._runtime

    def _boto_session(self) -> Any:
        if self._session is None:
            import boto3

            self._session = boto3.Session()
        return self._session

    def _region(self) -> str:
        session = self._boto_session()
        region = self.region or session.region_name
        if region is None and self.endpoint_url is not None:
            region = DEFAULT_REGION  # the local endpoint does not care; signing needs one
        if region is None:
            raise EndpointError(
                "no AWS region configured",
                where=f"endpoint {self.name!r}",
                fix="pass region= or set AWS_REGION",
            )
        return str(region)

    def _make_runtime(self) -> Any:
        from botocore import UNSIGNED
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError

        session = self._boto_session()
        options: dict[str, Any] = {
            "read_timeout": self.timeout,
            "connect_timeout": self.connect_timeout,
            "retries": {"total_max_attempts": 1, "mode": "standard"},
            "max_pool_connections": _MAX_CONNECTIONS,
        }
        if self.endpoint_url is not None and session.get_credentials() is None:
            options["signature_version"] = UNSIGNED
        try:
            client = session.client(
                "sagemaker-runtime",
                region_name=self._region(),
                endpoint_url=self.endpoint_url,
                config=Config(**options),
            )
        except (ValueError, BotoCoreError) as exc:  # botocore: `Invalid endpoint: ...`
            raise EndpointError(
                f"cannot create the SageMaker runtime client: {exc}",
                where=f"endpoint {self.name!r}",
                fix="check endpoint_url= (a URL such as http://127.0.0.1:8080) and region=",
            ) from exc
        from deploy.client._transport import DeadlineTransport

        # boto3 sessions keep botocore's as `_session`; a botocore session is its own.
        settings = getattr(session, "_session", session)
        self._transport = DeadlineTransport(
            connect_timeout=self.connect_timeout,
            max_connections=options["max_pool_connections"],
            ca_bundle=settings.get_config_variable("ca_bundle"),
        )
        self._transport.register(client)
        return client

    def _aws_client(self, service: str) -> Any:
        """Control-plane clients (sagemaker, s3) for manifest discovery; their requests
        stop at the calling thread's deadline (see `deploy.client._discovery`)."""
        if service not in self._clients:
            from botocore.config import Config

            from deploy.client._transport import DeadlineTransport

            # Discovery is a convenience: fail fast rather than stall the first call.
            config = Config(connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 2})
            client = self._boto_session().client(service, region_name=self._region(), config=config)
            with self._setup:
                if self._control_transport is None:
                    self._control_transport = DeadlineTransport(
                        connect_timeout=5, max_connections=4, ca_bundle=self._ca_bundle()
                    )
            self._control_transport.register(client, operation=None)
            self._clients[service] = client
        return self._clients[service]

    def _ca_bundle(self) -> str | None:
        """What botocore verifies TLS with (AWS_CA_BUNDLE, the profile's ca_bundle)."""
        session = self._boto_session()
        # boto3 sessions keep botocore's as `_session`; a botocore session is its own.
        bundle = getattr(session, "_session", session).get_config_variable("ca_bundle")
        return str(bundle) if bundle else None


def _unparsable(exc: BaseException, where: str) -> ResponseFormatError:
    return ResponseFormatError(
        f"the endpoint's answer is JSON nested too deeply or too large to parse "
        f"({type(exc).__name__})",
        where=where,
    )


def _answer_from_botocore(response: Mapping[str, Any]) -> ErrorAnswer:
    error = response.get("Error", {})
    metadata = response.get("ResponseMetadata", {})
    original = response.get("OriginalStatusCode")
    if isinstance(original, str) and original.isdigit():
        original = int(original)
    return ErrorAnswer(
        status=metadata.get("HTTPStatusCode"),
        code=error.get("Code"),
        message=str(error.get("Message") or response.get("Message") or error.get("Code") or ""),
        original_status=original if isinstance(original, int) else None,
        original_message=response.get("OriginalMessage"),
    )


def _name_at(endpoint_url: str | None, timeout: float) -> str:
    """The name of the local endpoint at `endpoint_url` (`Endpoint(endpoint_url=...)`)."""
    if endpoint_url is None:
        raise TypeError("Endpoint needs a name, or an endpoint_url of a local endpoint")
    name = endpoint_name_at(endpoint_url, timeout=timeout)
    if name is None:
        raise EndpointError(
            "the endpoint does not say its name (only the local endpoint does)",
            where=endpoint_url,
            fix="pass the endpoint's name: Endpoint(name, endpoint_url=...)",
        )
    return name
