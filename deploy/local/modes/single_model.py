"""The local endpoint in single-model mode: the inf1 layout on this machine.

SageMaker's single-model mode (docker/sagemaker/serve in the Triton server
repository) starts Triton over one repository and serves
`SAGEMAKER_TRITON_DEFAULT_MODEL_NAME` at `/invocations`. Here that model is
the generated router, every model of the repository is loaded at start
(`--load-model=*`, as the inf1 image's serve script does), and InvokeEndpoint
without a TargetModel is forwarded to `/invocations`; the router picks the
model from the request parameter `target_model`.

The user's repository is not modified: Triton gets a staging repository of
links to the model folders plus the router, generated fresh at start. A python
model with an execution environment (EXECUTION_ENV_PATH, which `deploy package`
builds from requirements.txt) is copied instead, so that the stub of its
environment's Python can be put beside it (`deploy.local.triton.envs`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, cast

from deploy.client import manifest as contract
from deploy.errors import LocalEndpointError
from deploy.hosting.router_model import (
    DEFAULT_ROUTER_INSTANCES,
    ROUTER_NAME,
    router_manifest,
    stage_layout,
)
from deploy.hosting.single_model import MODE
from deploy.local.http import wire
from deploy.local.http.frontend import FrontEnd, Reply, Request, UpstreamError, joined
from deploy.local.models.platform import ModelPlatform
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
from deploy.local.modes.serve import prepare_record, record, serve_until_signal
from deploy.local.state import STATE_DIR
from deploy.local.triton.supervisor import TritonSupervisor

MANIFEST_NAME = contract.MANIFEST_NAME

log = logging.getLogger(__name__)


class SingleModelSupervisor(TritonSupervisor):
    """tritonserver over one repository, all models loaded, a default model."""

    # As the inf1 image's serve script does.
    load_models = ("*",)

    def __init__(self, workdir: Path, repository: Path, default_model: str, **kwargs: Any) -> None:
        environment = {
            "SAGEMAKER_MULTI_MODEL": "false",
            "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": default_model,
        }
        super().__init__(workdir, environment=environment, **kwargs)
        self.repository = repository
        self.default_model = default_model

    def _repository(self) -> Path:
        return self.repository


class _Models:
    """Stands in for the MME platform: the port, and a listing for GET /models."""

    def __init__(self, server: TritonSupervisor, manifest: contract.Manifest) -> None:
        self.server = server
        self.manifest = manifest

    def listing(self) -> dict[str, Any]:
        return {
            "hosting": MODE.name,
            "router": self.manifest.router,
            "loaded": sorted(self.manifest.models),
        }


class SingleModelInvoker:
    """InvokeEndpoint → Triton's `/invocations`; a TargetModel is refused, as on SageMaker.

    The front end's `Invoker` for this mode: there is no multi-model platform, so
    every call is read whole and forwarded to the router."""

    headers: frozenset[bytes] = frozenset()

    async def route(self, frontend: FrontEnd, request: Request, path: bytes) -> Reply | None:
        return None  # no operation of its own

    async def invoke(self, frontend: FrontEnd, request: Request, endpoint: str) -> Reply:
        if endpoint != frontend.endpoint_name:
            return wire.validation_error(
                f"Endpoint {endpoint} of account {wire.LOCAL_ACCOUNT} not found."
            ).encode()
        if request.headers.get(wire.TARGET_MODEL.encode()):
            return wire.validation_error(
                f"Endpoint {endpoint} is a single-model endpoint: send no TargetModel; "
                "name the model in the request parameter target_model"
            ).encode()
        if request.too_large:
            return wire.payload_too_large(frontend.max_payload)
        try:
            status, content_type, body = await frontend.upstream.request(
                "/invocations", "", request.headers, request.body, request.size
            )
        except UpstreamError as exc:
            return wire.service_unavailable(f"the model server did not answer: {exc}").encode()
        if status == 200:
            return (
                200,
                [
                    ("Content-Type", content_type.decode("latin-1")),
                    (wire.INVOKED_VARIANT, wire.DEFAULT_VARIANT),
                    ("x-amzn-RequestId", str(uuid.uuid4())),
                ],
                body,
            )
        message = wire.triton_error_message(joined(body)) or wire.reason(status)
        return wire.model_error(ROUTER_NAME, status, message, frontend.log_stream).encode()

    async def close(self) -> None:
        return None  # nothing of its own to finish


def stage_repository(
    repository: Path, staging: Path, *, router: str, router_instances: int
) -> contract.Manifest:
    """Links to `repository`'s model folders plus a fresh router; returns the manifest."""
    models = stage_layout(repository, staging, router=router, router_instances=router_instances)
    for model in models:
        _prepare_environment(staging / model.name)
    return router_manifest(models, router=router)


def _prepare_environment(link: Path) -> None:
    """A python model with an execution environment: copied, with its Python's stub."""
    from deploy.local.models.adapters import read_config
    from deploy.local.triton.envs import ENV_PARAMETER, prepare_environment_model
    from deploy.local.triton.install import find_triton

    config = read_config(link / "config.pbtxt")
    if config.backend != "python" or ENV_PARAMETER not in config.parameters:
        return
    source = link.resolve()
    link.unlink()
    shutil.copytree(source, link, symlinks=True)
    prepare_environment_model(link, config.parameters[ENV_PARAMETER].string_value, find_triton())


class SingleModelEndpoint(LocalEndpoint):
    """The inf1 layout as a local SageMaker endpoint (start/stop/url as `LocalEndpoint`)."""

    def __init__(
        self,
        repository: str | Path,
        *,
        work_dir: Path | None = None,
        options: EndpointOptions | None = None,
        router: str = ROUTER_NAME,
        router_instances: int = DEFAULT_ROUTER_INSTANCES,
    ) -> None:
        # LocalEndpoint.__init__ builds the MME store and platform; this mode has
        # neither, so the attributes start()/stop() use are set here instead.
        self.options = options or EndpointOptions()
        self.router = router
        self._own_work_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="deploy-local-"))
        source = Path(repository)
        try:
            self.manifest = stage_repository(
                source,
                self.work_dir / "repository",
                router=router,
                router_instances=router_instances,
            )
        except OSError as exc:
            raise LocalEndpointError(
                f"cannot stage the repository: {exc}", where=str(source)
            ) from exc
        self.manifest_path = self.work_dir / MANIFEST_NAME
        self.manifest_path.write_bytes(contract.dump(self.manifest))
        self.supervisor = SingleModelSupervisor(
            self.work_dir / "triton",
            self.work_dir / "repository",
            router,
            port=self.options.triton_port,
            verbose=self.options.verbose,
            log_path=self.options.triton_log,
            clients=self.options.triton_clients,
        )
        self.models = _Models(self.supervisor, self.manifest)
        self.frontend = FrontEnd(
            cast(ModelPlatform, self.models),
            lambda: self.supervisor.ready,
            endpoint_name=self.options.endpoint_name,
            max_payload=self.options.max_payload,
            invoke_timeout=self.options.invoke_timeout,
            log_path=str(self.supervisor.log_path),
            manifest=lambda: self.manifest,
            limits=self.options.connection_limits,
            invoker=SingleModelInvoker(),
        )
        self.port = 0
        self._loop = None
        self._thread = None
        self._stopped = False

    def listing(self) -> dict[str, Any]:
        document = self.models.listing()
        document["endpoint_name"] = self.endpoint_name
        document["url"] = self.url
        return document


def serve_single_model_forever(
    repository: Path,
    options: EndpointOptions,
    ready: threading.Event | None = None,
    *,
    state_dir: Path | None = STATE_DIR,
) -> None:
    """`deploy serve --mode single-model`: run until SIGINT/SIGTERM, then stop."""
    prepare_record(options, state_dir)

    def started(endpoint: SingleModelEndpoint) -> None:
        log.info(
            "single-model endpoint %r serving %s through %r at %s (manifest: %s, log: %s)",
            endpoint.endpoint_name,
            ", ".join(sorted(endpoint.manifest.models)),
            endpoint.router,
            endpoint.url,
            endpoint.manifest_path,
            endpoint.supervisor.log_path,
        )
        if state_dir is not None:
            record(endpoint, str(repository), state_dir)

    serve_until_signal(
        lambda: SingleModelEndpoint(repository, options=options),
        started,
        ready,
        state_dir=state_dir,
    )
