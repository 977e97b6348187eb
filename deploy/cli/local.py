"""`deploy serve`: a local SageMaker multi-model endpoint in the foreground."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deploy.cli.flags import NoRepoCodeOption, repository_code
from deploy.local.http.connections import ConnectionLimits
from deploy.local.state import STATE_DIR

if TYPE_CHECKING:
    from deploy.local.triton.guard import Clients


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("fetch-triton")(fetch_triton)


def _note_image_differences(triton_version: str) -> None:
    """Say what the stage's SageMaker image does that the local tritonserver does not."""
    import logging

    from deploy.catalogue.images import differences_from_local, local_triton
    from deploy.errors import ConfigError

    try:
        differences = differences_from_local(triton_version)
    except ConfigError:
        return  # `deploy up` and `validate --triton-version` report an unknown image
    if differences:
        local = ".".join(map(str, local_triton()))
        logging.getLogger("deploy").warning(
            "the stage's image %s runs a newer Triton than this local server (%s); what "
            "differs:\n  %s",
            triton_version,
            local,
            "\n  ".join(differences),
        )


def serve(
    ctx: typer.Context,
    store: str = typer.Argument(
        ..., help="Model store (`deploy package` output or s3://bucket/prefix) or a repository."
    ),
    port: int | None = typer.Option(
        None,
        "--port",
        help="Front-end port (default: the local_port setting, 8080; 0: any free port).",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Front-end address."),
    endpoint_name: str = typer.Option("local", "--endpoint-name", help="EndpointName to answer."),
    max_loaded_models: int | None = typer.Option(
        None, "--max-loaded-models", min=1, help="Evict least-recently-used models beyond N."
    ),
    max_loaded_mb: int | None = typer.Option(
        None, "--max-loaded-mb", min=1, help="Evict LRU models beyond this many MB on disk."
    ),
    max_payload_mb: float | None = typer.Option(
        None,
        "--max-payload-mb",
        help="Request size limit (default: SageMaker's real-time limit, 6 MB).",
    ),
    max_connections: int = typer.Option(
        ConnectionLimits.max_connections,
        "--max-connections",
        min=1,
        help="Client connections served at once; beyond them the one waiting longest "
        "for a request is closed, or 503 when all are busy (lowered to fit the file limit).",
    ),
    header_timeout: float = typer.Option(
        ConnectionLimits.header_timeout,
        "--header-timeout",
        min=0.01,
        help="Seconds a client has to send a request's headers (then 408).",
    ),
    body_timeout: float = typer.Option(
        ConnectionLimits.body_timeout,
        "--body-timeout",
        min=0.01,
        help="Seconds a client has to send a request's body after its headers (then 408).",
    ),
    idle_timeout: float = typer.Option(
        ConnectionLimits.idle_timeout,
        "--idle-timeout",
        min=0.01,
        help="Seconds a keep-alive connection may wait for its next request.",
    ),
    max_archive_mb: int = typer.Option(
        20 * 1024,
        "--max-archive-mb",
        min=1,
        help="Refuse a model archive that extracts to more than this many MB.",
    ),
    verbose: bool = typer.Option(False, "--verbose", help="Verbose tritonserver log."),
    triton_clients: Annotated[
        str,
        typer.Option(
            "--triton-clients",
            help="Who may call tritonserver's loopback port: endpoint (the front end only) "
            "or user (any process of this user, for benchmarks).",
        ),
    ] = "endpoint",
    auto_complete_config: bool = typer.Option(
        False,
        "--auto-complete-config",
        help="Let Triton auto-complete model configs (as SageMaker does; slower loads).",
    ),
    package_dir: Annotated[
        Path | None,
        typer.Option("--package-dir", help="Where to package a repository given as STORE."),
    ] = None,
    state_dir: Annotated[
        Path,
        typer.Option("--state-dir", hidden=True, help="Where the running endpoint is recorded."),
    ] = STATE_DIR,
    mode: Annotated[
        str,
        typer.Option(
            "--hosting",
            "--mode",
            help="multi-model (SageMaker MME); single-model: the inf1 layout, every model "
            "of the repository STORE loaded behind a generated router; async: the same "
            "layout behind InvokeEndpointAsync, requests and answers in S3 (--async-output); "
            "components: one inference component per model, by InferenceComponentName.",
        ),
    ] = "multi-model",
    async_output: Annotated[
        str | None,
        typer.Option(
            "--async-output",
            help="--hosting async: the S3 prefix s3://BUCKET/PREFIX/ holding requests "
            "(input/), answers (output/) and errors (failure/); AWS_ENDPOINT_URL reaches "
            "an S3 emulator.",
        ),
    ] = None,
    async_input: Annotated[
        list[str] | None,
        typer.Option(
            "--async-input",
            help="--hosting async: a further s3://BUCKET/PREFIX/ the endpoint may read "
            "requests from (repeatable); it always reads the input/ prefix of "
            "--async-output, and nothing else.",
        ),
    ] = None,
    async_max_queued: Annotated[
        int,
        typer.Option(
            "--async-max-queued",
            min=1,
            help="--hosting async: requests queued or running at most; beyond them "
            "InvokeEndpointAsync answers ServiceUnavailable (503).",
        ),
    ] = 1000,
    async_max_concurrent: Annotated[
        int,
        typer.Option(
            "--async-max-concurrent",
            min=1,
            max=1000,
            help="--hosting async: requests run at once (MaxConcurrentInvocationsPerInstance).",
        ),
    ] = 4,
    scale_to_zero_after: Annotated[
        float | None,
        typer.Option(
            "--scale-to-zero-after",
            min=0.1,
            help="--hosting components: unload a component of min_copies 0 idle this many "
            "seconds; its next call gets SageMaker's no-capacity error and starts a copy.",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="AWS profile for an s3:// STORE (default: AWS_PROFILE)."),
    ] = None,
    no_repo_code: NoRepoCodeOption = False,
) -> None:
    """Serve a model store like a SageMaker multi-model endpoint, until Ctrl-C.

    While it runs, `deploy status/invoke/down --local` find it; tritonserver's
    log stays in .deploy/local/<endpoint>/ after it stops. A repository given as
    STORE is packaged into a temporary folder, removed on exit."""
    repository_code(no_repo_code)
    import logging

    from rich.logging import RichHandler

    from deploy.cli.flags import reject
    from deploy.config import load_settings
    from deploy.extras import require

    require("local")
    from deploy.local.modes.endpoint import EndpointOptions
    from deploy.local.modes.serve import is_store

    if profile is not None:
        if not store.startswith("s3://"):
            reject(ctx, {"profile": "--profile"}, because="to a store on this machine")
        # What boto3 reads for the store's S3 client, as `AWS_PROFILE=... deploy serve`.
        os.environ["AWS_PROFILE"] = profile
    from deploy.hosting import MODES, local_modes
    from deploy.hosting.limits import MIB, REALTIME_MAX_REQUEST

    hosting = MODES.get(mode)
    if hosting is None or hosting.local is None:
        raise typer.BadParameter(
            f"{mode!r}: this version serves {local_modes(lambda serving: True)} locally",
            param_hint="--hosting/--mode",
        )
    local = hosting.local
    if not local.through_s3:
        through_s3 = local_modes(lambda serving: serving.through_s3)
        reject(
            ctx,
            {
                "async_output": "--async-output",
                "async_max_concurrent": "--async-max-concurrent",
                "async_input": "--async-input",
                "async_max_queued": "--async-max-queued",
            },
            because=f"to --hosting {mode}; they apply to --hosting {through_s3}",
        )
    elif async_output is None:
        raise typer.BadParameter(
            f"--hosting {mode} needs the S3 prefix for requests and answers, e.g. "
            "--async-output s3://my-bucket/async/",
            param_hint="--async-output",
        )
    if not local.idle_unload:
        unloading = local_modes(lambda serving: serving.idle_unload)
        reject(
            ctx,
            {"scale_to_zero_after": "--scale-to-zero-after"},
            because=f"to --hosting {mode}; it applies to --hosting {unloading}",
        )
    if local.router:
        reject(
            ctx,
            {
                "max_loaded_models": "--max-loaded-models",
                "max_loaded_mb": "--max-loaded-mb",
                "auto_complete_config": "--auto-complete-config",
                "package_dir": "--package-dir",
            },
            because=f"to --hosting {mode}: one router serves every model, none evicted",
        )
    elif package_dir is not None and is_store(store):
        reject(
            ctx,
            {"package_dir": "--package-dir"},
            because=f"to a model store ({store} is already packaged); it applies when STORE "
            "is a repository",
        )

    from deploy.local.triton.install import prepare_runtime

    prepare_runtime()  # the C compiler, then tritonserver (fetched on first use)
    logging.basicConfig(
        level=logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(show_path=False, rich_tracebacks=False)],
    )
    _note_image_differences(load_settings().infra.triton_version)
    options = EndpointOptions(
        endpoint_name=endpoint_name,
        host=host,
        port=port if port is not None else load_settings().local_port,
        max_models=max_loaded_models,
        max_bytes=max_loaded_mb * 1024 * 1024 if max_loaded_mb else None,
        max_payload=int(max_payload_mb * MIB) if max_payload_mb else REALTIME_MAX_REQUEST,
        max_archive_bytes=max_archive_mb * 1024 * 1024,
        verbose=verbose,
        auto_complete_config=auto_complete_config,
        connection_limits=ConnectionLimits(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            idle_timeout=idle_timeout,
            max_connections=max_connections,
        ),
        triton_clients=_clients(triton_clients),
    )
    from deploy.local.modes.registry import ServeRequest, serve_mode

    serve_mode(
        hosting,
        ServeRequest(
            store,
            options,
            state_dir=state_dir,
            package_dir=package_dir,
            async_output=async_output,
            async_inputs=tuple(async_input or ()),
            async_max_concurrent=async_max_concurrent,
            async_max_queued=async_max_queued,
            scale_to_zero_after=scale_to_zero_after,
        ),
    )


def _clients(value: str) -> Clients:
    if value == "endpoint":
        return "endpoint"
    if value == "user":
        return "user"
    raise typer.BadParameter("use endpoint or user", param_hint="--triton-clients")


def fetch_triton(
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A folder holding the wheel files, for a machine with no package index.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Prepare `deploy serve` once: tritonserver (fetched into ~/.cache/deploy), the port guard."""
    from deploy.cli.output import console, emit_json
    from deploy.local.triton.guard import guard_library
    from deploy.local.triton.install import prepare_runtime

    install = prepare_runtime(source=source)
    found = {
        "tritonserver": str(install.binary),
        "stub_site": str(install.stub_site),
        "port_guard": str(guard_library()),
    }
    if as_json:
        emit_json(found)
        return
    for name, path in found.items():
        console().print(f"{name}: {path}", markup=False)
