"""InvokeEndpointAsync on the local endpoint: S3 → tritonserver → S3.

    POST /endpoints/{EndpointName}/async-invocations
        X-Amzn-SageMaker-InputLocation: s3://bucket/key      (required)
        X-Amzn-SageMaker-Content-Type, -Accept, -Custom-Attributes,
        -Inference-Id, -RequestTTLSeconds, -InvocationTimeoutSeconds,
        -S3OutputPathExtension, -Filename                     (optional)
    → 202 {"InferenceId": ...}
        X-Amzn-SageMaker-OutputLocation, X-Amzn-SageMaker-FailureLocation

As on SageMaker, the call only queues the request; at most `max_concurrent`
run at once (MaxConcurrentInvocationsPerInstance). A request runs by
streaming the input object from S3 into Triton's `/invocations` (the
single-model router) in chunks, never holding the whole body, and streaming
Triton's answer back to S3 as a multipart upload. The answer lands at the
output location; an error (the model's, a timeout, a missing input) lands at
the failure location as text. A request still queued after its
RequestTTLSeconds fails without running.

The endpoint is as strict as the real-time one:
- InputLocation must lie under the endpoint's input prefix or another prefix
  it was given (`deploy serve --async-input`), as the stack's execution role
  allows reads only there; anything else is a 400 naming the allowed prefixes.
- The input's JSON passes the real-time limits (`deploy.local.http.json_limits`)
  while it streams: each chunk is judged before Triton gets it, and a body
  too deep, or a json-header-size outside it, fails the request.
- At most `max_queued` requests are queued or running; beyond them the call
  answers ServiceUnavailable (503), an error InvokeEndpointAsync defines.
- Numeric headers are plain ASCII decimals, else a 400.

Every accepted request ends in an output or a failure object. A request
waits (up to `server_wait` seconds) while tritonserver restarts, and one that
was running when it died runs again (up to `MAX_ATTEMPTS` times). When the
endpoint stops (SIGINT/SIGTERM), each request not yet answered gets a failure
object saying so; its input stays in S3 to be submitted again. The queue
lives in memory only: no later `deploy serve` resumes it.

S3 calls are blocking boto3 calls on a small thread pool; the rest runs on
the front end's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httptools

from deploy.async_inference.layout import (
    DEFAULT_INVOCATION_TIMEOUT_S,
    DEFAULT_REQUEST_TTL_S,
    MAX_INVOCATION_TIMEOUT_S,
    MAX_REQUEST_TTL_S,
    MIN_REQUEST_TTL_S,
    AsyncLocations,
    failure_key,
    output_key,
)
from deploy.errors import ConfigError
from deploy.hosting.limits import ASYNC_MAX_REQUEST
from deploy.local.http import wire
from deploy.local.http.json_limits import MAX_JSON_DEPTH, JsonScanner
from deploy.local.triton.listener import VerifiedServer

log = logging.getLogger(__name__)

INPUT_LOCATION = b"x-amzn-sagemaker-inputlocation"
CONTENT_TYPE = b"x-amzn-sagemaker-content-type"
ACCEPT = b"x-amzn-sagemaker-accept"
INFERENCE_ID = b"x-amzn-sagemaker-inference-id"
REQUEST_TTL = b"x-amzn-sagemaker-requestttlseconds"
INVOCATION_TIMEOUT = b"x-amzn-sagemaker-invocationtimeoutseconds"
OUTPUT_EXTENSION = b"x-amzn-sagemaker-s3outputpathextension"
FILENAME = b"x-amzn-sagemaker-filename"
OUTPUT_LOCATION = "X-Amzn-SageMaker-OutputLocation"
FAILURE_LOCATION = "X-Amzn-SageMaker-FailureLocation"
# The headers the front end must keep for this module (it drops all others).
HEADERS = frozenset(
    {
        INPUT_LOCATION,
        CONTENT_TYPE,
        ACCEPT,
        INFERENCE_ID,
        REQUEST_TTL,
        INVOCATION_TIMEOUT,
        OUTPUT_EXTENSION,
        FILENAME,
    }
)

# S3 multipart parts: at least 5 MiB except the last; 8 MiB is boto3's default.
PART_SIZE = 8 * 1024 * 1024
READ_SIZE = 1024 * 1024
_INPUT_LOCATION = re.compile(r"^(https|s3)://([^/]+)/?(.*)$")
_INFERENCE_ID = re.compile(r"[!-~][ -~]*")  # \A\S[\p{Print}]*\z
_EXTENSION = re.compile(r"^(?!s3:|https:)[a-zA-Z0-9!_.*'()/-]+$")
_FILENAME = re.compile(r"^(?!.*\..*\.)[a-zA-Z0-9][a-zA-Z0-9-_\.]*$")
_DECIMAL = re.compile(rb"[0-9]{1,12}")  # ASCII digits only: str.isdigit() takes '²'
DEFAULT_MAX_QUEUED = 1000
DEFAULT_SERVER_WAIT_S = 120.0
MAX_ATTEMPTS = 3  # runs of one request when tritonserver dies under it
_SETTLE_S = 0.2  # lets the supervisor see a crash before the next attempt waits for it
STOP_BUDGET_S = 30.0  # how long stopping waits for failure objects to be written

Reply = tuple[int, list[tuple[str, str]], bytes]


class InvocationFailedError(Exception):
    """A queued request failed; the message is what the failure object holds."""


class ServerGoneError(InvocationFailedError):
    """tritonserver could not be reached or closed the connection before answering."""


@dataclass
class _Job:
    inference_id: str
    bucket: str
    key: str
    content_type: str | None
    accept: str | None
    custom_attributes: str | None
    timeout: float
    ttl: float
    output: tuple[str, str]  # bucket, key
    failure: tuple[str, str]
    queued_at: float
    started: bool = False  # holds a slot
    finishing: bool = False  # its output is being completed: not cancelled at stop
    answered: bool = False  # its output or failure object was written


def _url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


class _Answer:
    """httptools callbacks for tritonserver's answer; the body goes to `sink`."""

    def __init__(self, sink: Callable[[bytes], None]) -> None:
        self.sink = sink
        self.content_type = "application/octet-stream"
        self.complete = False
        self.error_body: list[bytes] = []
        self.status = 0
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-type":
            self.content_type = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if self.status == 200:
            self.sink(body)
        else:
            self.error_body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class _S3Writer:
    """Writes one object from chunks: one PutObject when small, else multipart
    parts of PART_SIZE as they fill (never more than a part held here)."""

    def __init__(self, runner: AsyncInvocations, bucket: str, key: str) -> None:
        self.runner = runner
        self.bucket = bucket
        self.key = key
        self.buffer = bytearray()
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []
        self.content_type = "application/octet-stream"

    def add(self, chunk: bytes) -> None:
        self.buffer += chunk

    async def flush_full_parts(self) -> None:
        while len(self.buffer) >= PART_SIZE:
            part = bytes(self.buffer[:PART_SIZE])
            del self.buffer[:PART_SIZE]
            await self._upload_part(part)

    async def _upload_part(self, data: bytes) -> None:
        s3 = await self.runner.s3()
        if self.upload_id is None:
            created = await self.runner.blocking(
                s3.create_multipart_upload,
                Bucket=self.bucket,
                Key=self.key,
                ContentType=self.content_type,
            )
            self.upload_id = created["UploadId"]
        number = len(self.parts) + 1
        answer = await self.runner.blocking(
            s3.upload_part,
            Bucket=self.bucket,
            Key=self.key,
            UploadId=self.upload_id,
            PartNumber=number,
            Body=data,
        )
        self.parts.append({"ETag": answer["ETag"], "PartNumber": number})

    async def close(self) -> None:
        s3 = await self.runner.s3()
        if self.upload_id is None:
            await self.runner.blocking(
                s3.put_object,
                Bucket=self.bucket,
                Key=self.key,
                Body=bytes(self.buffer),
                ContentType=self.content_type,
            )
            return
        if self.buffer:
            await self._upload_part(bytes(self.buffer))
            self.buffer.clear()
        await self.runner.blocking(
            s3.complete_multipart_upload,
            Bucket=self.bucket,
            Key=self.key,
            UploadId=self.upload_id,
            MultipartUpload={"Parts": self.parts},
        )

    async def abort(self) -> None:
        if self.upload_id is None:
            return
        s3 = await self.runner.s3()
        with contextlib.suppress(Exception):  # best effort: the failure object says why
            await self.runner.blocking(
                s3.abort_multipart_upload,
                Bucket=self.bucket,
                Key=self.key,
                UploadId=self.upload_id,
            )


class AsyncInvocations:
    """Accepts InvokeEndpointAsync calls and runs them (see the module docstring).

    `triton` is the supervised tritonserver (its verified port); `s3_client` makes the
    boto3 S3 client (called once, in a worker thread; boto3 honours
    AWS_ENDPOINT_URL). Inputs are read from `locations.input_prefix` and the
    s3:// prefixes in `input_prefixes`; `server_ready` tells whether
    tritonserver answers (False while it restarts).
    """

    def __init__(
        self,
        *,
        endpoint_name: str,
        locations: AsyncLocations,
        triton: VerifiedServer,
        s3_client: Callable[[], Any],
        max_concurrent: int = 4,
        default_timeout: float = DEFAULT_INVOCATION_TIMEOUT_S,
        model_name: str = "router",
        log_stream: str = "tritonserver.log",
        input_prefixes: tuple[str, ...] = (),
        max_queued: int = DEFAULT_MAX_QUEUED,
        server_ready: Callable[[], bool] = lambda: True,
        server_wait: float = DEFAULT_SERVER_WAIT_S,
        max_json_depth: int = MAX_JSON_DEPTH,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.locations = locations
        self.triton = triton
        self._make_s3 = s3_client
        self._s3: Any | None = None
        self.max_concurrent = max_concurrent
        self.default_timeout = default_timeout
        self.model_name = model_name
        self.log_stream = log_stream
        self.input_prefixes = tuple(dict.fromkeys((locations.input_prefix, *input_prefixes)))
        self._allowed = [locations.bucket_and_prefix(url) for url in self.input_prefixes]
        self.max_queued = max_queued
        self.server_ready = server_ready
        self.server_wait = server_wait
        self.max_json_depth = max_json_depth
        self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="async-s3")
        self._slots: asyncio.Semaphore | None = None
        self._tasks: dict[asyncio.Task[None], _Job] = {}
        self._closing = False
        self.completed = 0
        self.failed = 0
        self.run_seconds = 0.0  # time spent running requests that completed

    # -- helpers ----------------------------------------------------------------------
    async def blocking(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: function(*args, **kwargs))

    async def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = await self.blocking(self._make_s3)
        return self._s3

    def listing(self) -> dict[str, Any]:
        return {
            "input_prefix": self.locations.input_prefix,
            "input_prefixes": list(self.input_prefixes),
            "output_prefix": self.locations.output_prefix,
            "failure_prefix": self.locations.failure_prefix,
            "max_concurrent_invocations": self.max_concurrent,
            "max_queued": self.max_queued,
            "queued_or_running": len(self._tasks),
            "completed": self.completed,
            "failed": self.failed,
            "run_seconds": round(self.run_seconds, 3),
        }

    async def close(self) -> None:
        """Stop: every request not yet answered gets a failure object saying so
        (one whose output is being completed finishes instead)."""
        self._closing = True
        for task, job in list(self._tasks.items()):
            if not job.finishing:
                task.cancel()
        if self._tasks:
            _, late = await asyncio.wait(list(self._tasks), timeout=STOP_BUDGET_S)
            for task in late:
                job = self._tasks[task]
                log.error(
                    "async request %s: no output or failure object written before the "
                    "endpoint stopped (%s)",
                    job.inference_id,
                    _url(*job.failure),
                )
                task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- the call ---------------------------------------------------------------------
    def accept(self, headers: dict[bytes, bytes]) -> Reply:
        """Validate one InvokeEndpointAsync call, queue it, answer 202."""
        job = self._job(headers)
        if isinstance(job, wire.AwsErrorReply):
            return job.encode()
        if self._closing:
            return wire.service_unavailable(
                f"endpoint {self.endpoint_name} is stopping and accepts no requests"
            ).encode()
        if len(self._tasks) >= self.max_queued:
            return wire.service_unavailable(
                f"endpoint {self.endpoint_name} has {len(self._tasks)} requests queued or "
                f"running, its limit; retry later (deploy serve --async-max-queued raises it)"
            ).encode()
        task = asyncio.get_running_loop().create_task(self._run(job))
        self._tasks[task] = job
        task.add_done_callback(self._forget)
        log.info("async request %s queued: %s", job.inference_id, _url(job.bucket, job.key))
        return (
            202,
            [
                ("Content-Type", "application/json"),
                (OUTPUT_LOCATION, _url(*job.output)),
                (FAILURE_LOCATION, _url(*job.failure)),
                ("x-amzn-RequestId", str(uuid.uuid4())),
            ],
            json.dumps({"InferenceId": job.inference_id}).encode(),
        )

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)

    def _input_problem(self, bucket: str, key: str) -> wire.AwsErrorReply | None:
        """Why the endpoint must not read s3://bucket/key, or None."""
        allowed = any(bucket == b and key.startswith(p) for b, p in self._allowed)
        if allowed and not {".", ".."} & set(key.split("/")):
            return None
        prefixes = ", ".join(self.input_prefixes)
        return wire.validation_error(
            f"InputLocation {_url(bucket, key)} is outside the input prefixes of endpoint "
            f"{self.endpoint_name} ({prefixes}): upload the request under one of them (the "
            "endpoint reads nothing else; deploy serve --async-input adds a prefix)"
        )

    def _job(self, headers: dict[bytes, bytes]) -> _Job | wire.AwsErrorReply:
        raw_location = _text(headers.get(INPUT_LOCATION))
        if not raw_location:
            return wire.validation_error(
                "InvokeEndpointAsync needs an InputLocation "
                "(X-Amzn-SageMaker-InputLocation: s3://bucket/key)"
            )
        match = _INPUT_LOCATION.match(raw_location)
        if match is None or len(raw_location) > 1024:
            return wire.validation_error(
                f"1 validation error detected: Value {raw_location!r} at 'inputLocation' failed "
                r"to satisfy constraint: Member must satisfy regular expression pattern: "
                r"^(https|s3)://([^/]+)/?(.*)$"
            )
        scheme, bucket, key = match.groups()
        if scheme != "s3" or not key:
            return wire.validation_error(
                f"InputLocation {raw_location!r}: the local endpoint reads s3://bucket/key "
                "objects only"
            )
        refused = self._input_problem(bucket, key)
        if refused is not None:
            return refused
        inference_id = _text(headers.get(INFERENCE_ID))
        if inference_id is not None and (
            len(inference_id) > 64 or not _INFERENCE_ID.fullmatch(inference_id)
        ):
            return wire.validation_error(
                f"1 validation error detected: Value {inference_id!r} at 'inferenceId' failed "
                "to satisfy constraint: 1 to 64 printable characters, not starting with a space"
            )
        timeout = _bounded(
            headers.get(INVOCATION_TIMEOUT),
            "invocationTimeoutSeconds",
            1,
            MAX_INVOCATION_TIMEOUT_S,
            self.default_timeout,
        )
        if isinstance(timeout, wire.AwsErrorReply):
            return timeout
        ttl = _bounded(
            headers.get(REQUEST_TTL),
            "requestTTLSeconds",
            MIN_REQUEST_TTL_S,
            MAX_REQUEST_TTL_S,
            DEFAULT_REQUEST_TTL_S,
        )
        if isinstance(ttl, wire.AwsErrorReply):
            return ttl
        attributes = headers.get(wire.CUSTOM_ATTRIBUTES.encode())
        if attributes is not None:
            problem = wire.custom_attributes_problem(attributes)
            if problem is not None:
                return problem
        for header, member in ((CONTENT_TYPE, "contentType"), (ACCEPT, "accept")):
            value = headers.get(header)
            if value is not None and (len(value) > 1024 or not value.isascii()):
                return wire.validation_error(
                    f"1 validation error detected: Value {_text(value)!r} at '{member}' failed "
                    r"to satisfy constraint: Member must satisfy regular expression pattern: "
                    r"\p{ASCII}*"
                )
        extension = _text(headers.get(OUTPUT_EXTENSION))
        if extension is not None and (len(extension) > 512 or not _EXTENSION.match(extension)):
            return wire.validation_error(
                f"S3OutputPathExtension {extension!r} is not a relative S3 path"
            )
        filename = _text(headers.get(FILENAME))
        if filename is not None and (len(filename) > 32 or not _FILENAME.match(filename)):
            return wire.validation_error(f"Filename {filename!r} is not a valid file name")
        name = str(uuid.uuid4())
        out_bucket, out_prefix = self.locations.bucket_and_prefix(self.locations.output_prefix)
        fail_bucket, fail_prefix = self.locations.bucket_and_prefix(self.locations.failure_prefix)
        if extension is not None:
            out_prefix += extension.strip("/") + "/"
        out_key = out_prefix + filename if filename else output_key(out_prefix, name)
        return _Job(
            inference_id=inference_id or name,
            bucket=bucket,
            key=key,
            content_type=_text(headers.get(CONTENT_TYPE)),
            accept=_text(headers.get(ACCEPT)),
            custom_attributes=_text(attributes),
            timeout=timeout,
            ttl=ttl,
            output=(out_bucket, out_key),
            failure=(fail_bucket, failure_key(fail_prefix, name)),
            queued_at=time.monotonic(),
        )

    async def _run(self, job: _Job) -> None:
        try:
            await self._queued(job)
        except asyncio.CancelledError:
            if not job.answered:
                self.failed += 1
                state = "while it ran" if job.started else "before it ran"
                await self._write_failure(
                    job,
                    f"the endpoint {self.endpoint_name} stopped {state}; the request was not "
                    f"answered. Its input is still at {_url(job.bucket, job.key)}: submit it "
                    "again once the endpoint serves.",
                )
            raise

    async def _queued(self, job: _Job) -> None:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrent)
        async with self._slots:
            job.started = True
            waited = time.monotonic() - job.queued_at
            started = time.monotonic()
            try:
                if waited > job.ttl:
                    raise InvocationFailedError(
                        f"the request waited {waited:.0f}s in the queue, past its "
                        f"RequestTTLSeconds of {job.ttl:g}; it was not run"
                    )
                await self._attempts(job)
            except InvocationFailedError as exc:
                self.failed += 1
                log.info("async request %s failed: %s", job.inference_id, exc)
                await self._write_failure(job, str(exc))
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug or an S3 failure: still answer the client
                self.failed += 1
                log.exception("async request %s failed", job.inference_id)
                await self._write_failure(job, f"the local endpoint failed: {exc}")
                return
            self.completed += 1
            self.run_seconds += time.monotonic() - started
            log.info(
                "async request %s done in %.2fs: %s",
                job.inference_id,
                time.monotonic() - started,
                _url(*job.output),
            )

    async def _attempts(self, job: _Job) -> None:
        """Run the request, again when tritonserver died under it (see MAX_ATTEMPTS)."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            await self._server_up()
            try:
                async with asyncio.timeout(job.timeout):
                    await self._invoke(job)
                return
            except TimeoutError:
                raise InvocationFailedError(
                    f"the model did not answer within InvocationTimeoutSeconds "
                    f"{job.timeout:g}s; raise it (up to {MAX_INVOCATION_TIMEOUT_S}) "
                    "for slow models"
                ) from None
            except ServerGoneError as exc:
                if attempt == MAX_ATTEMPTS:
                    raise InvocationFailedError(
                        f"{exc}; the request ran {MAX_ATTEMPTS} times and tritonserver "
                        f"stopped each time (see {self.log_stream})"
                    ) from exc
                log.warning(
                    "async request %s: %s; it runs again once tritonserver is back",
                    job.inference_id,
                    exc,
                )
                await asyncio.sleep(_SETTLE_S)

    async def _server_up(self) -> None:
        """Wait (bounded) while tritonserver restarts."""
        deadline = time.monotonic() + self.server_wait
        while not self.server_ready():
            if time.monotonic() > deadline:
                raise InvocationFailedError(
                    f"the model server was not ready within {self.server_wait:g}s (it is "
                    f"restarting or gave up; see {self.log_stream})"
                )
            await asyncio.sleep(0.1)

    async def _write_failure(self, job: _Job, message: str) -> None:
        job.finishing = True  # stopping the endpoint must not overwrite it with its own
        try:
            s3 = await self.s3()
            await self.blocking(
                s3.put_object,
                Bucket=job.failure[0],
                Key=job.failure[1],
                Body=message.encode("utf-8"),
                ContentType="text/plain; charset=utf-8",
            )
        except Exception:
            log.exception("cannot write the failure object %s", _url(*job.failure))
            return
        job.answered = True

    async def _open_input(self, job: _Job) -> tuple[Any, int]:
        from botocore.exceptions import BotoCoreError, ClientError

        s3 = await self.s3()
        where = _url(job.bucket, job.key)
        try:
            answer = await self.blocking(s3.get_object, Bucket=job.bucket, Key=job.key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            raise InvocationFailedError(f"cannot read the input {where}: {code} {exc}") from exc
        except BotoCoreError as exc:
            raise InvocationFailedError(f"cannot read the input {where}: {exc}") from exc
        size = int(answer["ContentLength"])
        if size > ASYNC_MAX_REQUEST:
            answer["Body"].close()
            raise InvocationFailedError(
                f"the input {where} is {size} bytes, over asynchronous inference's limit of "
                f"{ASYNC_MAX_REQUEST} bytes"
            )
        return answer["Body"], size

    async def _invoke(self, job: _Job) -> None:
        body, size = await self._open_input(job)
        content_type = None if job.content_type is None else job.content_type.encode("latin-1")
        scanner = JsonScanner.for_body(content_type, size, self.max_json_depth)
        if scanner.problem is not None:
            body.close()
            raise InvocationFailedError(f"the input {_url(job.bucket, job.key)}: {scanner.problem}")
        try:
            port, token = self.triton.verified()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            body.close()
            raise ServerGoneError(f"the model server did not answer: {exc}") from exc
        if not self.triton.still_verified(token):  # it stopped: the port may be another's
            writer.close()
            body.close()
            raise ServerGoneError("the model server stopped while the connection opened")
        sink = _S3Writer(self, *job.output)
        answer = _Answer(sink.add)
        try:
            writer.write(self._head(job, size))
            await self._send_body(job, body, size, writer, scanner)
            while not answer.complete:
                try:
                    data = await reader.read(READ_SIZE)
                except ConnectionError as exc:
                    raise ServerGoneError(
                        f"the model server dropped the connection: {exc}"
                    ) from exc
                if not data:
                    raise ServerGoneError(
                        "the model server closed the connection before answering "
                        f"(see {self.log_stream})"
                    )
                try:
                    answer.parser.feed_data(data)
                except httptools.HttpParserError as exc:
                    raise InvocationFailedError(
                        f"malformed answer from the model server: {exc}"
                    ) from exc
                if answer.status == 200:
                    sink.content_type = answer.content_type
                    await sink.flush_full_parts()
            if answer.status != 200:
                message = wire.triton_error_message(b"".join(answer.error_body))
                raise InvocationFailedError(
                    f"Received client error ({answer.status}) from model {self.model_name} "
                    f'with message "{message or wire.reason(answer.status)}". '
                    f"See {self.log_stream} for more information."
                )
            sink.content_type = answer.content_type
            job.finishing = True
            await sink.close()
            job.answered = True
        except BaseException:
            await sink.abort()
            raise
        finally:
            body.close()
            writer.close()

    def _head(self, job: _Job, size: int) -> bytes:
        lines = [
            "POST /invocations HTTP/1.1",
            "Host: 127.0.0.1",
            f"Content-Length: {size}",
            f"Content-Type: {job.content_type or 'application/octet-stream'}",
        ]
        if job.accept:
            lines.append(f"Accept: {job.accept}")
        if job.custom_attributes:
            lines.append(f"X-Amzn-SageMaker-Custom-Attributes: {job.custom_attributes}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send_body(
        self,
        job: _Job,
        body: Any,
        size: int,
        writer: asyncio.StreamWriter,
        scanner: JsonScanner,
    ) -> None:
        """Copy the S3 object to tritonserver, reading the next chunk while one is sent;
        each chunk is judged (`scanner`) before tritonserver gets it."""
        sent = 0
        pending = asyncio.ensure_future(self.blocking(body.read, READ_SIZE))
        try:
            while sent < size:
                chunk = await pending
                if not chunk:
                    raise InvocationFailedError(
                        f"the input {_url(job.bucket, job.key)} ended after {sent} of {size} bytes"
                    )
                sent += len(chunk)
                problem = scanner.feed(chunk)
                if problem is not None:
                    # Triton parses nothing before the whole body arrives: closing the
                    # connection now drops what it has.
                    raise InvocationFailedError(f"the input {_url(job.bucket, job.key)}: {problem}")
                if sent < size:
                    pending = asyncio.ensure_future(self.blocking(body.read, READ_SIZE))
                writer.write(chunk)
                try:
                    await writer.drain()
                except ConnectionError:
                    # Triton may answer (an error) and close before reading everything:
                    # read what it said.
                    return
        finally:
            if not pending.done():
                pending.cancel()


def input_prefix(url: str, *, where: str = "--async-input") -> str:
    """`url` as an allowed input prefix: s3://BUCKET/ (the whole bucket) or
    s3://BUCKET/PREFIX/ (a trailing `/` added, so `data` does not admit `data-old/`)."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or {".", ".."} & set(prefix.split("/")):
        raise ConfigError(
            f"{url!r} is not an s3://BUCKET/PREFIX/ URL",
            where=where,
            fix="name a bucket and prefix the endpoint may read requests from, e.g. "
            "s3://my-bucket/requests/",
        )
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return f"s3://{bucket}/{prefix}"


def _bounded(
    raw: bytes | None, member: str, low: int, high: int, default: float
) -> float | wire.AwsErrorReply:
    if raw is None:
        return default
    text = raw.decode("latin-1")
    if not _DECIMAL.fullmatch(raw) or not low <= int(raw) <= high:
        return wire.validation_error(
            f"1 validation error detected: Value {text!r} at '{member}' failed to satisfy "
            f"constraint: Member must have value between {low} and {high}"
        )
    return float(text)
