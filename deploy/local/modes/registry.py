"""The local endpoint of each hosting mode, by the key its `HostingMode.local` names.

`deploy.hosting` sits below the local endpoint and imports nothing of it, so a
mode names its local endpoint by key (as it names its CDK stack) and this table
maps each key to what serves it: `deploy serve --hosting NAME` and the
background endpoint of `deploy up --local` both come here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from deploy.errors import LocalEndpointError
from deploy.hosting import HostingMode
from deploy.local.modes.endpoint import EndpointOptions
from deploy.local.state import STATE_DIR


@dataclass(frozen=True)
class ServeRequest:
    """What `deploy serve` was asked for; each mode reads the part that applies to it."""

    store: str  # a model store, or a repository
    options: EndpointOptions
    state_dir: Path = STATE_DIR
    package_dir: Path | None = None  # where a repository given as `store` is packaged
    # Modes whose requests travel through S3 (`LocalServing.through_s3`).
    async_output: str | None = None
    async_inputs: tuple[str, ...] = ()
    async_max_concurrent: int = 4
    async_max_queued: int = 1000
    # Hosting components: a component of min_copies 0 idle this long unloads (None: never).
    scale_to_zero_after: float | None = None


def _per_model(request: ServeRequest) -> None:
    from deploy.local.modes.serve import serve_forever

    serve_forever(
        request.store,
        request.options,
        package_dir=request.package_dir,
        state_dir=request.state_dir,
    )


def _router(request: ServeRequest) -> None:
    from deploy.local.modes.single_model import serve_single_model_forever

    serve_single_model_forever(Path(request.store), request.options, state_dir=request.state_dir)


def _asynchronous(request: ServeRequest) -> None:
    from deploy.async_inference import AsyncLocations
    from deploy.local.modes.async_endpoint import serve_async_forever
    from deploy.local.modes.async_invocations import input_prefix

    if request.async_output is None:
        raise LocalEndpointError(
            "an asynchronous endpoint needs the S3 prefix for requests and answers",
            where="--async-output",
            fix="pass e.g. --async-output s3://my-bucket/async/",
        )
    serve_async_forever(
        request.store,
        request.options,
        AsyncLocations.under(request.async_output),
        max_concurrent=request.async_max_concurrent,
        input_prefixes=tuple(input_prefix(url) for url in request.async_inputs),
        max_queued=request.async_max_queued,
        state_dir=request.state_dir,
    )


def _components(request: ServeRequest) -> None:
    from deploy.config import load_settings
    from deploy.local.modes.components import serve_components_forever

    models = load_settings().models  # the stage's [stages.X.models.NAME] min_copies
    serve_components_forever(
        request.store,
        request.options,
        min_copies={name: model.min_copies for name, model in models.items()},
        scale_to_zero_after=request.scale_to_zero_after,
        package_dir=request.package_dir,
        state_dir=request.state_dir,
    )


SERVERS: Mapping[str, Callable[[ServeRequest], None]] = {
    "per-model": _per_model,
    "components": _components,
    "router": _router,
    "async": _asynchronous,
}


def serve_mode(mode: HostingMode, request: ServeRequest) -> None:
    """Serve `mode` on this machine until SIGINT/SIGTERM."""
    server = SERVERS.get(mode.local.endpoint) if mode.local else None
    if server is None:
        raise LocalEndpointError(
            f"hosting {mode.name} has no local endpoint in this version",
            where="hosting (--hosting)",
            fix="deploy it to AWS, or serve it locally with another --hosting",
        )
    server(request)
