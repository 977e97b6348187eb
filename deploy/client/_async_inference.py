"""Asynchronous inference (InvokeEndpointAsync): the request travels through S3.

    submit   the encoded request is uploaded under the input prefix, keyed by its
             SHA-256 (multipart above `multipart_threshold`; an object already
             there with the same size is reused), then InvokeEndpointAsync
             names it → a pending inference with its output and failure
             locations.
    wait     HEAD on both locations, backing off from `poll_interval` to
             `max_poll_interval`, until one appears or `wait_timeout` passes;
             the output is read and decoded, a failure object's text becomes
             the `ModelError`'s message. No SNS subscription is needed.
    cleanup  the input (once no other call of this client still uses it) and
             the answer object are deleted unless `keep_objects`.

Every object touched lies under the manifest's own prefixes, with the
bucket owner's account when it is known (`deploy.client._ownership`): an
answer naming an output or failure location elsewhere is refused before
anything is read or deleted.

The blocking steps are plain boto3 calls; `AsyncEndpoint` runs them in a
thread and waits with `asyncio.sleep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deploy.client._core import Prepared, finish
from deploy.client._errors import (
    EndpointError,
    InferenceTimeoutError,
    ModelError,
    ResponseFormatError,
)
from deploy.client._ownership import S3Scope
from deploy.client._result import InferResult

_MIB = 1024 * 1024
# A failure object holds an error message: more than this is not read.
_MAX_FAILURE_TEXT = 64 * 1024
_BINARY_CONTENT_TYPE = "application/vnd.sagemaker-triton.binary+json"


@dataclass(frozen=True, slots=True)
class AsyncInferenceOptions:
    """How requests to an asynchronous endpoint are sent and waited for.

    `wait_timeout` bounds the wait for the answer (seconds, from the call);
    `invocation_timeout` and `request_ttl` are sent as InvokeEndpointAsync's
    InvocationTimeoutSeconds (1-3600; SageMaker's default 900) and
    RequestTTLSeconds (60-21600) when set. `keep_objects` keeps the uploaded
    request and the answer in S3.
    """

    wait_timeout: float = 1800.0
    invocation_timeout: int | None = None
    request_ttl: int | None = None
    poll_interval: float = 0.05
    max_poll_interval: float = 2.0
    keep_objects: bool = False
    multipart_threshold: int = 8 * _MIB
    part_size: int = 8 * _MIB
    max_concurrency: int = 4

    def __post_init__(self) -> None:
        if self.wait_timeout <= 0 or self.poll_interval <= 0 or self.max_poll_interval <= 0:
            raise ValueError("wait_timeout and the poll intervals must be positive")
        if self.invocation_timeout is not None and not 1 <= self.invocation_timeout <= 3600:
            raise ValueError("invocation_timeout must be 1..3600 seconds")
        if self.request_ttl is not None and not 60 <= self.request_ttl <= 21600:
            raise ValueError("request_ttl must be 60..21600 seconds")
        if self.part_size < 5 * _MIB:
            raise ValueError("part_size must be at least 5 MiB (S3's smallest part)")


@dataclass
class _Call:
    """One submitted request: where it is and where its answer will be."""

    prepared: Prepared
    endpoint: str
    inference_id: str
    input_location: str
    output_location: str
    failure_location: str
    failure_prefix: str
    started: float
    scope: S3Scope
    input_key: str
    output_key: str
    failure_key: str | None


class AsyncInferenceClient:
    """The S3 and InvokeEndpointAsync side of asynchronous inference.

    `runtime` and `s3` return boto3 clients (created on first use);
    `invoke` sends one InvokeEndpointAsync with the caller's retry policy and
    error mapping and returns its answer.
    """

    def __init__(
        self,
        *,
        s3: Callable[[], Any],
        invoke: Callable[[dict[str, Any], str, str], dict[str, Any]],
        options: AsyncInferenceOptions,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._s3 = s3
        self._invoke = invoke
        self.options = options
        self._clock = clock
        self._lock = threading.Lock()
        self._in_use: dict[str, int] = {}

    # -- submit ---------------------------------------------------------------------
    def submit(self, prepared: Prepared, default_endpoint: str) -> _Call:
        target = prepared.route.asynchronous
        assert target is not None, "only routes through S3 come here"
        endpoint = target.endpoint or default_endpoint
        started = self._clock()
        where = f"endpoint {endpoint!r}, model {prepared.route.model!r}"
        scope = target.scope
        key = scope.input_prefix + hashlib.sha256(prepared.request.body).hexdigest()
        location = self._upload(prepared, scope, key, where)
        request: dict[str, Any] = {
            "EndpointName": endpoint,
            "InputLocation": location,
            "ContentType": prepared.request.content_type,
        }
        if self.options.invocation_timeout is not None:
            request["InvocationTimeoutSeconds"] = self.options.invocation_timeout
        if self.options.request_ttl is not None:
            request["RequestTTLSeconds"] = self.options.request_ttl
        try:
            answer = self._invoke(request, endpoint, prepared.route.model)
            # The endpoint names where its answer will be: only the manifest's own
            # prefixes are taken (nothing else is ever read or deleted).
            output = answer.get("OutputLocation")
            output_key = scope.output_key(output, where)
            failure = answer.get("FailureLocation") or None
            failure_key = None if failure is None else scope.failure_key(failure, where)
        except BaseException:
            self._release(location)
            raise
        return _Call(
            prepared=prepared,
            endpoint=endpoint,
            inference_id=str(answer.get("InferenceId", "")),
            input_location=location,
            output_location=str(output),
            failure_location=str(failure or ""),
            failure_prefix=scope.url(scope.failure_prefix),
            started=started,
            scope=scope,
            input_key=key,
            output_key=output_key,
            failure_key=failure_key,
        )

    def _upload(self, prepared: Prepared, scope: S3Scope, key: str, where: str) -> str:
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError, ClientError

        body = prepared.request.body
        bucket = scope.bucket
        location = scope.url(key)
        with self._lock:
            self._in_use[location] = self._in_use.get(location, 0) + 1
        s3 = self._s3()
        try:
            if self._stored_size(s3, scope, key) != len(body):
                s3.upload_fileobj(
                    io.BytesIO(body),  # shares the bytes' buffer: no copy of the body
                    bucket,
                    key,
                    ExtraArgs={"ContentType": prepared.request.content_type, **scope.owner_args()},
                    Config=TransferConfig(
                        multipart_threshold=self.options.multipart_threshold,
                        multipart_chunksize=self.options.part_size,
                        max_concurrency=self.options.max_concurrency,
                    ),
                )
        except (BotoCoreError, ClientError) as exc:
            self._release(location)
            raise EndpointError(
                f"cannot upload the request to {location}: {exc}",
                where=where,
                fix="check that these credentials may write under the input prefix "
                f"{scope.url(scope.input_prefix)}",
            ) from exc
        return location

    @staticmethod
    def _stored_size(s3: Any, scope: S3Scope, key: str) -> int | None:
        from botocore.exceptions import ClientError

        try:
            answer = s3.head_object(Bucket=scope.bucket, Key=key, **scope.owner_args())
            return int(answer["ContentLength"])
        except ClientError:
            return None

    # -- wait -----------------------------------------------------------------------
    def poll(self, call: _Call) -> str | None:
        """ "output", "failure" or None (neither exists yet)."""
        s3 = self._s3()
        for state, key in (("output", call.output_key), ("failure", call.failure_key)):
            if key and self._exists(s3, key, call):
                return state
        return None

    def _exists(self, s3: Any, key: str, call: _Call) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        url = call.scope.url(key)
        try:
            s3.head_object(Bucket=call.scope.bucket, Key=key, **call.scope.owner_args())
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404 or exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey"):
                return False
            raise EndpointError(
                f"cannot look for the answer at {url}: {exc}",
                where=self._where(call),
                fix="check that these credentials may read the output and failure prefixes",
            ) from exc
        except BotoCoreError as exc:
            raise EndpointError(
                f"cannot look for the answer at {url}: {exc}", where=self._where(call)
            ) from exc
        return True

    def delays(self, call: _Call, timeout: float | None) -> Any:
        """Sleeps between polls (a generator); raises InferenceTimeoutError past the wait."""
        limit = self.options.wait_timeout if timeout is None else timeout
        deadline = call.started + limit
        delay = self.options.poll_interval
        while True:
            left = deadline - self._clock()
            if left <= 0:
                raise InferenceTimeoutError(
                    f"no answer to inference {call.inference_id} after {limit:g}s: neither "
                    f"{call.output_location} nor a failure under {call.failure_prefix} "
                    "appeared",
                    where=self._where(call),
                    fix="the request may still be queued or running: look for "
                    f"{call.failure_location or call.failure_prefix} later, or wait longer "
                    "(AsyncInferenceOptions.wait_timeout)",
                )
            yield min(delay, left)
            delay = min(delay * 1.5, self.options.max_poll_interval)

    def collect(self, call: _Call, state: str) -> InferResult:
        """Read the answer that appeared, clean up, and decode it (or raise its error)."""
        try:
            if state == "failure":
                assert call.failure_key is not None  # polled only when there is one
                raw = self._read(call.failure_key, call, _MAX_FAILURE_TEXT)[0]
                text = raw.decode("utf-8", "replace")
                raise ModelError(
                    text.strip() or "the endpoint wrote an empty failure object",
                    where=f"{self._where(call)}, inference {call.inference_id}",
                    fix=f"the failure object is {call.failure_location}",
                )
            body, content_type = self._read(call.output_key, call, None)
        finally:
            self._cleanup(call, state)
        return finish(call.prepared, body, _content_type(body, content_type))

    def wait(self, call: _Call, timeout: float | None = None) -> InferResult:
        for delay in self.delays(call, timeout):
            state = self.poll(call)
            if state is not None:
                return self.collect(call, state)
            time.sleep(delay)
        raise AssertionError("unreachable: delays() raises when the wait is over")

    async def wait_async(self, call: _Call, timeout: float | None = None) -> InferResult:
        for delay in self.delays(call, timeout):
            state = await asyncio.to_thread(self.poll, call)
            if state is not None:
                return await asyncio.to_thread(self.collect, call, state)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: delays() raises when the wait is over")

    def _read(self, key: str, call: _Call, at_most: int | None) -> tuple[bytes, str | None]:
        """An answer object (its first `at_most` bytes when given)."""
        from botocore.exceptions import BotoCoreError, ClientError

        url = call.scope.url(key)
        try:
            answer = self._s3().get_object(
                Bucket=call.scope.bucket, Key=key, **call.scope.owner_args()
            )
            body = answer["Body"]
            try:
                return body.read(at_most), answer.get("ContentType")
            finally:
                body.close()
        except (BotoCoreError, ClientError) as exc:
            raise EndpointError(
                f"cannot read the answer {url}: {exc}", where=self._where(call)
            ) from exc
        except MemoryError as exc:
            raise ResponseFormatError(
                f"the answer {url} is too large to hold in memory", where=self._where(call)
            ) from exc

    def _cleanup(self, call: _Call, state: str) -> None:
        answer = call.output_key if state == "output" else call.failure_key
        last_user = self._release(call.input_location)
        if self.options.keep_objects:
            return
        from botocore.exceptions import BotoCoreError, ClientError

        s3 = self._s3()
        for key in ([call.input_key] if last_user else []) + ([answer] if answer else []):
            # Leftovers are harmless; an S3 lifecycle rule may expire them.
            with contextlib.suppress(BotoCoreError, ClientError):
                s3.delete_object(Bucket=call.scope.bucket, Key=key, **call.scope.owner_args())

    def _release(self, location: str) -> bool:
        """One call less uses `location`; True when it was the last."""
        with self._lock:
            left = self._in_use.get(location, 1) - 1
            if left <= 0:
                self._in_use.pop(location, None)
                return True
            self._in_use[location] = left
            return False

    @staticmethod
    def _where(call: _Call) -> str:
        return f"endpoint {call.endpoint!r}, model {call.prepared.route.model!r}"


def _content_type(body: bytes, content_type: str | None) -> str | None:
    """The content type to decode with. The answer object should carry Triton's
    (with json-header-size); when it does not, find the JSON header's end."""
    if content_type and "json-header-size" in content_type:
        return content_type
    if body[:1] != b"{":
        return content_type
    try:
        _, end = json.JSONDecoder().raw_decode(body[: min(len(body), 1 << 20)].decode("latin-1"))
    except RecursionError as exc:  # nesting deeper than the parser's stack
        raise ResponseFormatError("the answer's JSON header is nested too deeply") from exc
    except ValueError as exc:
        if len(body) <= 1 << 20:
            raise ResponseFormatError(f"the answer's JSON header is malformed: {exc}") from exc
        return content_type
    if end == len(body):
        return "application/json"
    return f"{_BINARY_CONTENT_TYPE};json-header-size={end}"


class PendingInference:
    """A request submitted with `Endpoint.submit`; `wait()` gives its result.

    For an asynchronous endpoint (or the async lane) `inference_id`,
    `input_location`, `output_location` and `failure_location` say where it
    is; a request sent to a real-time endpoint is already answered.
    """

    def __init__(
        self,
        *,
        call: _Call | None = None,
        client: AsyncInferenceClient | None = None,
        result: InferResult | None = None,
    ) -> None:
        self._call = call
        self._client = client
        self._result = result
        self._state: str | None = None
        self.inference_id = call.inference_id if call else None
        self.input_location = call.input_location if call else None
        self.output_location = call.output_location if call else None
        self.failure_location = call.failure_location if call else None

    def done(self) -> bool:
        """True once the answer (or the failure) is there; does not block."""
        if self._result is not None or self._state is not None:
            return True
        assert self._call is not None and self._client is not None
        self._state = self._client.poll(self._call)
        return self._state is not None

    def wait(self, timeout: float | None = None) -> InferResult:
        """The result; `timeout` (seconds since submit) overrides the options' wait_timeout."""
        if self._result is not None:
            return self._result
        assert self._call is not None and self._client is not None
        if self._state is not None:
            self._result = self._client.collect(self._call, self._state)
        else:
            self._result = self._client.wait(self._call, timeout)
        return self._result


class AsyncPendingInference:
    """`PendingInference` for `AsyncEndpoint.submit`: `await done()`, `await wait()`."""

    def __init__(
        self,
        *,
        call: _Call | None = None,
        client: AsyncInferenceClient | None = None,
        result: InferResult | None = None,
    ) -> None:
        self._call = call
        self._client = client
        self._result = result
        self._state: str | None = None
        self.inference_id = call.inference_id if call else None
        self.input_location = call.input_location if call else None
        self.output_location = call.output_location if call else None
        self.failure_location = call.failure_location if call else None

    async def done(self) -> bool:
        if self._result is not None or self._state is not None:
            return True
        assert self._call is not None and self._client is not None
        self._state = await asyncio.to_thread(self._client.poll, self._call)
        return self._state is not None

    async def wait(self, timeout: float | None = None) -> InferResult:
        if self._result is not None:
            return self._result
        assert self._call is not None and self._client is not None
        if self._state is not None:
            self._result = await asyncio.to_thread(self._client.collect, self._call, self._state)
        else:
            self._result = await self._client.wait_async(self._call, timeout)
        return self._result
