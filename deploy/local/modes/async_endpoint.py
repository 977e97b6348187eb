"""The local endpoint in asynchronous mode: SageMaker's InvokeEndpointAsync here.

The layout is the single-model one (every model of the repository behind the
generated router, `deploy.local.modes.single_model`), started the way the stock
SageMaker Triton image starts a single-model endpoint: explicit control mode
with only the router loaded (`--load-model=router`); the router loads the
models it routes to. Requests arrive through S3 (`deploy.local.modes.async_invocations`);
InvokeEndpoint is refused, as SageMaker refuses it on an asynchronous endpoint.
The manifest it serves says `"hosting": "async"` and names the S3 prefixes.

Stopping drains the queue first (`AsyncInvocations.close`): every request
accepted and not yet answered gets its failure object while S3 and the event
loop still run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote

from deploy.async_inference.layout import (
    DEFAULT_INVOCATION_TIMEOUT_S,
    AsyncLocations,
    manifest_section,
)
from deploy.client import manifest as contract
from deploy.errors import LocalEndpointError
from deploy.hosting import asynchronous
from deploy.hosting.router_model import DEFAULT_ROUTER_INSTANCES, ROUTER_NAME
from deploy.local.http import wire
from deploy.local.http.frontend import FrontEnd, Reply, Request
from deploy.local.models.platform import ModelPlatform
from deploy.local.modes.async_invocations import (
    DEFAULT_MAX_QUEUED,
    HEADERS,
    STOP_BUDGET_S,
    AsyncInvocations,
)
from deploy.local.modes.endpoint import EndpointOptions
from deploy.local.modes.serve import prepare_record, record, serve_until_signal
from deploy.local.modes.single_model import SingleModelEndpoint
from deploy.local.state import STATE_DIR

log = logging.getLogger(__name__)

ASYNC_HOSTING = asynchronous.MODE.name
_ASYNC_SUFFIX = b"/async-invocations"


def router_repository(location: str, scratch: Path) -> Path:
    """The repository to serve: `location` itself, or the models of a router-layout
    store (its manifest's one archive, downloaded if on S3, extracted under `scratch`)."""
    from deploy.local.models.archive import extract_archive
    from deploy.local.models.store import open_store
    from deploy.local.modes.serve import is_store

    if not is_store(location):
        return Path(location)
    store = open_store(location)
    manifest = store.manifest()
    archive = manifest.archive if manifest is not None else None
    if archive is None:
        raise LocalEndpointError(
            "a store of per-model archives (multi-model) cannot be served with --hosting async",
            where=location,
            fix="pass the model repository, or a store with one archive and a router "
            "(`deploy neuron package` output)",
        )
    downloaded = store.fetch(archive.key, scratch / "download")
    repository = scratch / "repository"
    extract_archive(downloaded, repository, expected_sha256=archive.sha256, name=archive.key)
    return repository


def _s3_client() -> Any:
    import boto3

    return boto3.client("s3")


def check_buckets(locations: AsyncLocations, s3_client: Callable[[], Any] = _s3_client) -> None:
    """Raise unless each bucket of `locations` exists and answers, before anything starts
    (else the first request fails with NoSuchBucket)."""
    from botocore.exceptions import BotoCoreError, ClientError

    urls = (locations.input_prefix, locations.output_prefix, locations.failure_prefix)
    client = s3_client()
    for bucket in sorted({locations.bucket_and_prefix(url)[0] for url in urls}):
        where = f"--async-output s3://{bucket}/"
        try:
            client.head_bucket(Bucket=bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in {"404", "NoSuchBucket", "NotFound"}:
                raise LocalEndpointError(
                    f"bucket {bucket} does not exist: requests and answers are kept there",
                    where=where,
                    fix=f"create it (aws s3 mb s3://{bucket}) or name a bucket that exists",
                ) from None
            raise LocalEndpointError(
                f"bucket {bucket} cannot be used ({code or exc})",
                where=where,
                fix="check that these AWS credentials may read and write it",
            ) from None
        except BotoCoreError as exc:
            raise LocalEndpointError(
                f"S3 cannot be reached for bucket {bucket}: {exc}",
                where=where,
                fix="check the AWS credentials and region (or AWS_ENDPOINT_URL)",
            ) from None


class AsyncInvoker:
    """InvokeEndpointAsync → `AsyncInvocations`; InvokeEndpoint is refused.

    The front end's `Invoker` for this mode."""

    headers = HEADERS

    def __init__(self, invocations: AsyncInvocations) -> None:
        self.invocations = invocations

    async def route(self, frontend: FrontEnd, request: Request, path: bytes) -> Reply | None:
        if path.startswith(b"/endpoints/") and path.endswith(_ASYNC_SUFFIX):
            if request.method != b"POST":
                return wire.validation_error("InvokeEndpointAsync is a POST").encode()
            name = unquote(path[11 : -len(_ASYNC_SUFFIX)].decode("utf-8", "replace"))
            if name != frontend.endpoint_name:
                return wire.validation_error(
                    f"Endpoint {name} of account {wire.LOCAL_ACCOUNT} not found."
                ).encode()
            return self.invocations.accept(request.headers)
        if path == b"/models" and request.method == b"GET":
            listing = frontend.platform.listing()
            listing["hosting"] = ASYNC_HOSTING
            listing["endpoint_name"] = frontend.endpoint_name
            listing["async_inference"] = self.invocations.listing()
            return 200, [("Content-Type", "application/json")], json.dumps(listing).encode()
        return None

    async def invoke(self, frontend: FrontEnd, request: Request, endpoint: str) -> Reply:
        return wire.validation_error(
            f"Endpoint {endpoint} is an asynchronous endpoint: call InvokeEndpointAsync "
            "(POST /endpoints/{name}/async-invocations) with the request's S3 location"
        ).encode()

    async def close(self) -> None:
        await self.invocations.close()


class AsyncLocalEndpoint(SingleModelEndpoint):
    """An asynchronous SageMaker endpoint on this machine (start/stop/url as
    `LocalEndpoint`); `locations` are the S3 prefixes it reads and writes, and
    `input_prefixes` further s3:// prefixes it may read requests from."""

    def __init__(
        self,
        location: str | Path,
        *,
        locations: AsyncLocations,
        work_dir: Path | None = None,
        options: EndpointOptions | None = None,
        max_concurrent: int = 4,
        invocation_timeout: float = DEFAULT_INVOCATION_TIMEOUT_S,
        router: str = ROUTER_NAME,
        router_instances: int = DEFAULT_ROUTER_INSTANCES,
        s3_client: Callable[[], Any] = _s3_client,
        input_prefixes: tuple[str, ...] = (),
        max_queued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        own_work_dir = work_dir is None
        work_dir = work_dir or Path(tempfile.mkdtemp(prefix="deploy-local-"))
        try:
            repository = router_repository(str(location), work_dir / "store")
            super().__init__(
                repository,
                work_dir=work_dir,
                options=options,
                router=router,
                router_instances=router_instances,
            )
        except BaseException:
            if own_work_dir:
                shutil.rmtree(work_dir, ignore_errors=True)
            raise
        self._own_work_dir = own_work_dir
        self.locations = locations
        # As the stock image's serve script: only the default model at start.
        self.supervisor.load_models = (router,)
        served = contract.with_async_inference(
            self.manifest,
            contract.AsyncLocations(**manifest_section(locations)),
        )
        self.manifest = served
        self.manifest_path.write_bytes(contract.dump(served))
        self.invocations = AsyncInvocations(
            endpoint_name=self.options.endpoint_name,
            locations=locations,
            triton=self.supervisor,
            s3_client=s3_client,
            max_concurrent=max_concurrent,
            default_timeout=invocation_timeout,
            model_name=router,
            log_stream=f"file://{self.supervisor.log_path}",
            input_prefixes=input_prefixes,
            max_queued=max_queued,
            server_ready=lambda: self.supervisor.ready,
        )
        self.frontend = FrontEnd(
            cast(ModelPlatform, self.models),
            lambda: self.supervisor.ready,
            endpoint_name=self.options.endpoint_name,
            max_payload=self.options.max_payload,
            invoke_timeout=self.options.invoke_timeout,
            log_path=str(self.supervisor.log_path),
            manifest=lambda: self.manifest,
            limits=self.options.connection_limits,
            invoker=AsyncInvoker(self.invocations),
        )

    def stop(self) -> None:
        loop = self._loop
        if not self._stopped and loop is not None and loop.is_running():
            # Failure objects for the queue, while tritonserver and the loop still run.
            drained = asyncio.run_coroutine_threadsafe(self.invocations.close(), loop)
            with contextlib.suppress(Exception):
                drained.result(STOP_BUDGET_S + 5)
        super().stop()

    def listing(self) -> dict[str, Any]:
        document = super().listing()
        document["hosting"] = ASYNC_HOSTING
        document["async_inference"] = self.invocations.listing()
        return document


def serve_async_forever(
    location: str,
    options: EndpointOptions,
    locations: AsyncLocations,
    ready: threading.Event | None = None,
    *,
    max_concurrent: int = 4,
    input_prefixes: tuple[str, ...] = (),
    max_queued: int = DEFAULT_MAX_QUEUED,
    state_dir: Path | None = STATE_DIR,
) -> None:
    """`deploy serve --hosting async`: run until SIGINT/SIGTERM, then stop.

    `location` is a model repository or a router-layout store (`router_repository`)."""
    check_buckets(locations)
    prepare_record(options, state_dir)

    def started(endpoint: AsyncLocalEndpoint) -> None:
        log.info(
            "asynchronous endpoint %r serving %s through %r at %s; requests from %s, "
            "results to %s, failures to %s (log: %s)",
            endpoint.endpoint_name,
            ", ".join(sorted(endpoint.manifest.models)),
            endpoint.router,
            endpoint.url,
            ", ".join(endpoint.invocations.input_prefixes),
            locations.output_prefix,
            locations.failure_prefix,
            endpoint.supervisor.log_path,
        )
        if state_dir is not None:
            record(endpoint, location, state_dir)

    serve_until_signal(
        lambda: AsyncLocalEndpoint(
            location,
            locations=locations,
            options=options,
            max_concurrent=max_concurrent,
            input_prefixes=input_prefixes,
            max_queued=max_queued,
        ),
        started,
        ready,
        state_dir=state_dir,
    )
