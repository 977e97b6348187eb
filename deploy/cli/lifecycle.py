"""`deploy up`, `deploy status`, `deploy down`, `deploy prune`: an endpoint's lifecycle.

`--local` runs the endpoint on this machine (`deploy.lifecycle.local_provider`);
without it the stage goes to AWS (`deploy.lifecycle.aws_provider`). The
stages are the same for every provider (`deploy.lifecycle.up`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from deploy.cli.flags import (
    AWS_FLAGS,
    HostingOption,
    JsonOption,
    NoRepoCodeOption,
    ProfileOption,
    RegionOption,
    StageOption,
    aws_target,
    reject,
    repository_code,
)

if TYPE_CHECKING:
    from deploy.lifecycle.aws_provider import AwsProvider

# How long `deploy up` waits for the endpoint unless --timeout says otherwise.
AWS_ROLLOUT_TIMEOUT_S = 3600.0
LOCAL_START_TIMEOUT_S = 60.0


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("status")(status)
    app.command("down")(down)
    app.command("prune")(prune)


def up(
    ctx: typer.Context,
    local: bool = typer.Option(False, "--local", help="Run the endpoint on this machine."),
    repository: Annotated[
        Path | None, typer.Option("--repository", help="Model repository.")
    ] = None,
    package_dir: Annotated[
        Path | None, typer.Option("--package-dir", help="Package output.")
    ] = None,
    endpoint_name: str | None = typer.Option(
        None, "--endpoint-name", help="Endpoint name (local: 'local'; AWS: from settings)."
    ),
    port: int | None = typer.Option(
        None,
        "--port",
        help="Local front-end port, --local only (default: the local_port setting, 8080; "
        "0: any free port).",
    ),
    skip_smoke: bool = typer.Option(False, "--skip-smoke", help="Do not smoke-test models."),
    as_json: JsonOption = False,
    stage: StageOption = None,
    instance: str | None = typer.Option(
        None, "--instance", help="SageMaker instance type (ml.inf1.*: a single-model endpoint)."
    ),
    hosting: HostingOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and stop."),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        min=0.1,
        help="Seconds to wait for the endpoint: AWS, the rollout (default 3600); "
        "--local, its start (default 60).",
    ),
    smoke_endpoint_url: str | None = typer.Option(
        None,
        "--smoke-endpoint-url",
        envvar="DEPLOY_SMOKE_ENDPOINT_URL",
        help="Send smoke tests to this SageMaker-runtime URL (e.g. a local endpoint).",
    ),
    smoke_endpoint_name: str | None = typer.Option(
        None,
        "--smoke-endpoint-name",
        envvar="DEPLOY_SMOKE_ENDPOINT_NAME",
        help="Endpoint name to use with --smoke-endpoint-url.",
    ),
    no_repo_code: NoRepoCodeOption = False,
    canary: str | None = typer.Option(
        None,
        "--canary",
        help="Multi-model: publish each changed model as a canary taking this percent of "
        "its calls (e.g. 10%); the live version keeps the rest.",
    ),
    watch: bool = typer.Option(
        False, "--watch", help="After publishing, follow each model canary until it ends."
    ),
    watch_timeout: float = typer.Option(
        1800.0, "--watch-timeout", min=1, help="Seconds --watch follows canaries at most."
    ),
    scale_to_zero_after: float | None = typer.Option(
        None,
        "--scale-to-zero-after",
        min=0.1,
        help="--local, hosting components: the endpoint it starts unloads a component of "
        "min_copies 0 idle this many seconds (as `deploy serve --scale-to-zero-after`).",
    ),
) -> None:
    """Package, plan, upload, provision, wait, smoke-test, publish the manifest."""
    repository_code(no_repo_code, stage=stage)
    percent = None
    if canary is not None:
        from deploy.lifecycle.canary import parse_percent

        percent = parse_percent(canary)
    if local:
        reject(
            ctx,
            {
                "instance": "--instance",
                "region": "--region",
                "profile": "--profile",
                "smoke_endpoint_url": "--smoke-endpoint-url",
                "smoke_endpoint_name": "--smoke-endpoint-name",
                "watch": "--watch",
            },
            because="to --local: the local endpoint runs on this machine "
            "(`deploy validate --instance` checks a repository against an instance type)",
        )
        _up_local(
            stage=stage,
            hosting=hosting,
            endpoint_name=endpoint_name or "local",
            repository=repository,
            package_dir=package_dir,
            port=port,
            dry_run=dry_run,
            skip_smoke=skip_smoke,
            timeout=timeout or LOCAL_START_TIMEOUT_S,
            as_json=as_json,
            canary=percent,
            scale_to_zero_after=scale_to_zero_after,
        )
        return
    reject(ctx, {"port": "--port"}, because="to AWS: it is the local endpoint's port (--local)")
    reject(
        ctx,
        {"scale_to_zero_after": "--scale-to-zero-after"},
        because="to AWS: a component of min_copies 0 scales in by its autoscaling policy "
        "(--local only)",
    )
    if smoke_endpoint_name is not None and smoke_endpoint_url is None:
        ctx.fail("--smoke-endpoint-name needs --smoke-endpoint-url")
    _up_aws(
        stage=stage,
        instance=instance,
        hosting=hosting,
        region=region,
        profile=profile,
        endpoint_name=endpoint_name,
        repository=repository,
        package_dir=package_dir,
        dry_run=dry_run,
        skip_smoke=skip_smoke,
        timeout=timeout or AWS_ROLLOUT_TIMEOUT_S,
        smoke_endpoint_url=smoke_endpoint_url,
        smoke_endpoint_name=smoke_endpoint_name,
        as_json=as_json,
        canary=percent,
    )
    if watch and not dry_run:
        from deploy.cli.release import watch_canaries

        watch_canaries(stage, region, profile, endpoint_name, watch_timeout, as_json=as_json)


def _up_local(
    *,
    stage: str | None,
    hosting: str | None,
    endpoint_name: str,
    repository: Path | None,
    package_dir: Path | None,
    port: int | None,
    dry_run: bool,
    skip_smoke: bool,
    timeout: float,
    as_json: bool,
    canary: float | None = None,
    scale_to_zero_after: float | None = None,
) -> None:
    if not dry_run:
        from deploy.extras import require

        require("local")  # before packaging: the endpoint it starts needs it
        from deploy.local.triton.install import prepare_runtime

        prepare_runtime()  # the C compiler, then tritonserver (fetched here, on first use)
    from deploy.cli.output import console, emit_json, interactive
    from deploy.config import load_settings
    from deploy.hosting import default_mode, mode_named
    from deploy.lifecycle.local_provider import LocalProvider
    from deploy.lifecycle.progress import reporter
    from deploy.lifecycle.render import render_plan
    from deploy.lifecycle.up import UpOptions
    from deploy.lifecycle.up import up as run_up

    # The stage picks the repository and package folder of deploy.toml.
    settings = load_settings(
        stage=stage, repository=repository, package_dir=package_dir, endpoint_name=endpoint_name
    )
    # The instance type applies to AWS only, so it implies no mode here: --hosting, else
    # the stage's `hosting` setting, else the default mode.
    mode = mode_named(hosting or settings.hosting or default_mode().name)
    if scale_to_zero_after is not None and not (mode.local and mode.local.idle_unload):
        from deploy.hosting import local_modes

        unloading = local_modes(lambda serving: serving.idle_unload)
        raise typer.BadParameter(
            f"it applies to hosting {unloading}; this run's hosting is {mode.name}",
            param_hint="--scale-to-zero-after",
        )
    provider = LocalProvider(
        endpoint_name,
        mode=mode,
        port=port if port is not None else settings.local_port,
        start_timeout_s=timeout,
        stage=settings.stage,
        scale_to_zero_after=scale_to_zero_after,
    )
    provider.check_idle_setting()  # before anything is packaged
    out = console()
    result = run_up(
        settings,
        provider,
        repository=settings.repository,
        package_dir=settings.package_dir,
        options=UpOptions(dry_run=dry_run, skip_smoke=skip_smoke, timeout_s=timeout, canary=canary),
        reporter=reporter(interactive=interactive() and not as_json, lines=not as_json),
        on_plan=None if as_json else (lambda plan: render_plan(plan, out)),
        mode=mode,
    )
    url = provider.data_plane().endpoint_url
    if as_json:
        emit_json({**result.to_dict(), "url": url})
        return
    if dry_run:
        out.print("[bold]dry run[/]: nothing was changed")
        return
    out.print(f"local endpoint [bold]{endpoint_name}[/] at {url}")
    out.print(f"  tritonserver log {provider.triton_log_path.resolve()}", soft_wrap=True)
    for smoke in result.smoke:
        out.print(f"  smoke ok  {smoke.name:<16} {smoke.target_model}  {smoke.seconds:.2f} s")
    snippet = url and _boto3_snippet(url, endpoint_name, provider.published_manifest() or {})
    if snippet:
        out.print("call it with boto3:", soft_wrap=True)
        out.print(snippet, markup=False, highlight=False, soft_wrap=True)


def _boto3_snippet(url: str, endpoint_name: str, manifest: dict[str, Any]) -> str | None:
    """A copy-paste boto3 call (v2 JSON body) for the first model of the manifest
    (none for a manifest without models or one that breaks the contract)."""
    import json

    from deploy.client import manifest as contract

    try:
        models = contract.parse(manifest, "published manifest").models
    except contract.ManifestFormatError:
        return None
    if not models:
        return None
    name = sorted(models)[0]
    entry = models[name]
    from deploy.lifecycle.smoke import generated_inputs

    # The smoke test's shapes (batch of one, -1 as 1); readable constant values.
    inputs = [
        {
            "name": input_name,
            "datatype": spec.datatype,
            "shape": list(array.shape),
            "data": ["a" if spec.datatype == "BYTES" else 0] * array.size,
        }
        for spec, (input_name, array) in zip(
            entry.inputs, generated_inputs(entry).items(), strict=True
        )
    ]
    body = json.dumps({"inputs": inputs})
    component = entry.inference_component  # hosting components: no TargetModel
    address = (
        f"InferenceComponentName={component!r}"
        if component
        else f"TargetModel={entry.target_model!r}"
    )
    return (
        "import boto3\n"
        f'rt = boto3.client("sagemaker-runtime", endpoint_url="{url}", region_name="us-east-1",\n'
        '                  aws_access_key_id="x", aws_secret_access_key="x")\n'
        f"answer = rt.invoke_endpoint(EndpointName={endpoint_name!r}, "
        f"{address},  # {name}\n"
        f'                            ContentType="application/json", Body={body!r})\n'
        'print(answer["Body"].read())'
    )


def status(
    ctx: typer.Context,
    local: bool = typer.Option(False, "--local", help="The endpoint on this machine."),
    endpoint_name: str | None = typer.Option(None, "--endpoint-name", help="Endpoint name."),
    as_json: JsonOption = False,
    stage: StageOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    window: str | None = typer.Option(
        None,
        "--window",
        help="AWS: each model's calls over this last window, such as 30m, 1h (default) or "
        "2d, from its per-model metrics in CloudWatch.",
    ),
) -> None:
    """Show the endpoint, its scaling, the manifest's models and each model's calls."""
    if not local:
        from deploy.aws.cloudwatch import parse_window

        try:
            window_s = parse_window(window or "1h")
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--window") from None
        document = _aws_provider(stage, region, profile, endpoint_name).status(window_s=window_s)
        _render(document, as_json, "status")
        return
    reject(
        ctx,
        {**AWS_FLAGS, "window": "--window"},
        because="to --local: the local endpoint counts calls since it started",
    )
    endpoint_name = endpoint_name or "local"
    from deploy.cli.output import console, emit_json
    from deploy.lifecycle.local_provider import LocalProvider

    document = LocalProvider(endpoint_name).status()
    if as_json:
        emit_json(document)
        return
    from rich.table import Table

    out = console()
    out.print(f"local endpoint [bold]{endpoint_name}[/]: {document['status']}")
    if "url" in document:
        out.print(f"  url {document['url']}  pid {document['pid']}  store {document['store']}")
        out.print(f"  tritonserver log {document.get('triton_log') or document['log']}")
    # Three columns, so a full TargetModel fits 80 columns (it is what clients send).
    table = Table("model", "target model (current)", "loaded")
    for model in document.get("models", []):
        seconds = model["load_seconds"]
        table.add_row(
            model["name"] or "(superseded)",
            model["target_model"],
            (f"in {seconds:.2f} s" if seconds is not None else "yes") if model["loaded"] else "no",
        )
    if table.row_count:
        out.print(table)
    _print_calls(document.get("calls", []), out)


def _print_calls(rows: list[dict[str, Any]], out: Any) -> None:
    """Calls per logical model since the endpoint started (its /metrics)."""
    from deploy.lifecycle.render import render_calls

    if rows:
        render_calls(rows, out, title="calls since start")


def down(
    ctx: typer.Context,
    local: bool = typer.Option(False, "--local", help="The endpoint on this machine."),
    endpoint_name: str | None = typer.Option(None, "--endpoint-name", help="Endpoint name."),
    stage: StageOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    purge: bool = typer.Option(False, "--purge", help="Also delete the model store and network."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: JsonOption = False,
) -> None:
    """Remove the endpoint (AWS: its stacks, after asking); the model store stays unless --purge."""
    if not local:
        _down_aws(ctx, stage, region, profile, endpoint_name, purge=purge, yes=yes, as_json=as_json)
        return
    reject(
        ctx,
        {**AWS_FLAGS, "purge": "--purge"},
        because="to --local: it stops the process; the store under .deploy/local stays",
    )
    endpoint_name = endpoint_name or "local"
    from deploy.cli.output import console, emit_json
    from deploy.lifecycle.local_provider import LocalProvider

    local_provider = LocalProvider(endpoint_name)
    stopped = local_provider.stop()
    log = (
        Path(stopped.triton_log)
        if stopped and stopped.triton_log
        else local_provider.triton_log_path
    )
    if as_json:
        kept = str(log.resolve()) if log.is_file() else None
        emit_json({"endpoint_name": endpoint_name, "stopped": bool(stopped), "triton_log": kept})
        return
    out = console()
    if stopped is None:
        out.print(f"{endpoint_name} was not running")
    else:
        out.print(f"local endpoint {endpoint_name} stopped")
    if log.is_file():
        out.print(f"  tritonserver log kept: {log}", soft_wrap=True)


def _down_aws(
    ctx: typer.Context,
    stage: str | None,
    region: str | None,
    profile: str | None,
    endpoint_name: str | None,
    *,
    purge: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Ask before deleting (a terminal), or require --yes (none); declining keeps all."""
    import sys

    from deploy.cli.output import console

    provider = _aws_provider(stage, region, profile, endpoint_name)
    what = provider.down_plan(purge=purge)
    if what["remove"] and not yes:
        doomed = ", ".join(what["remove"])
        store = what["model_store"]
        if not sys.stdin.isatty():
            ctx.fail(
                f"this deletes the stacks {doomed}"
                + (f" and every archive in {store}" if purge and store else "")
                + "; stdin is not a terminal, so pass --yes to confirm"
            )
        err = console(stderr=True)
        err.print(
            f"[bold]deploy down[/] stage {provider.settings.stage} "
            f"({provider.settings.region}) will delete:"
        )
        for name in what["remove"]:
            err.print(f"  stack {name}", markup=False)
        if purge and store:
            err.print(f"  {store} and every archive in it", markup=False)
        for kept in what["keep"]:
            err.print(f"  kept: {kept}", markup=False)
        if not typer.confirm("Delete them?", default=False, err=True):
            err.print(
                "nothing was deleted; kept: " + "; ".join(what["remove"] + what["keep"]),
                markup=False,
            )
            raise typer.Exit(1)
    _render(provider.down(purge=purge), as_json, "down")


def prune(
    keep: int = typer.Option(1, "--keep", min=0, help="Superseded archives to keep per model."),
    stage: StageOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted."),
    as_json: JsonOption = False,
) -> None:
    """Delete superseded archives the published manifest no longer references."""
    provider = _aws_provider(stage, region, profile, None)
    _render(provider.prune(keep=keep, dry_run=dry_run), as_json, "prune")


# -- AWS -------------------------------------------------------------------------------


def _aws_provider(
    stage: str | None,
    region: str | None,
    profile: str | None,
    endpoint_name: str | None,
    *,
    instance: str | None = None,
    hosting: str | None = None,
    smoke_endpoint_url: str | None = None,
    smoke_endpoint_name: str | None = None,
    repository: Path | None = None,
    package_dir: Path | None = None,
) -> AwsProvider:
    from deploy.lifecycle.aws_provider import AwsProvider

    settings, session = aws_target(
        stage=stage,
        region=region,
        profile=profile,
        endpoint_name=endpoint_name,
        instance_type=instance,
        hosting=hosting,
        repository=repository,
        package_dir=package_dir,
    )
    return AwsProvider(
        settings,
        session=session,
        smoke_endpoint_url=smoke_endpoint_url,
        smoke_endpoint_name=smoke_endpoint_name,
    )


def _up_aws(
    *,
    stage: str | None,
    instance: str | None,
    hosting: str | None,
    region: str | None,
    profile: str | None,
    endpoint_name: str | None,
    repository: Path | None,
    package_dir: Path | None,
    dry_run: bool,
    skip_smoke: bool,
    timeout: float,
    smoke_endpoint_url: str | None,
    smoke_endpoint_name: str | None,
    as_json: bool,
    canary: float | None = None,
) -> None:
    from deploy.extras import require

    require("infra")  # the plan synthesizes the CDK app
    from deploy.cli.output import console, emit_json, interactive
    from deploy.lifecycle.progress import reporter
    from deploy.lifecycle.render import render_plan
    from deploy.lifecycle.up import UpOptions
    from deploy.lifecycle.up import up as run_up

    provider = _aws_provider(
        stage,
        region,
        profile,
        endpoint_name,
        instance=instance,
        hosting=hosting,
        smoke_endpoint_url=smoke_endpoint_url,
        smoke_endpoint_name=smoke_endpoint_name,
        repository=repository,
        package_dir=package_dir,
    )
    settings = provider.settings
    out = console()
    result = run_up(
        settings,
        provider,
        repository=settings.repository,
        package_dir=settings.package_dir,
        options=UpOptions(dry_run=dry_run, skip_smoke=skip_smoke, timeout_s=timeout, canary=canary),
        reporter=reporter(interactive=interactive() and not as_json, lines=not as_json),
        on_plan=None if as_json else (lambda plan: render_plan(plan, out)),
    )
    if as_json:
        emit_json(result.to_dict())
        return
    if dry_run:
        out.print("[bold]dry run[/]: nothing was changed")
        return
    sent = sum(item.bytes_sent for item in result.uploads)
    out.print(f"uploaded {len(result.uploads)} archive(s), {sent} bytes")
    if result.endpoint is not None:
        view = result.endpoint
        out.print(
            f"endpoint {view.name} {view.status}: {view.instance_count} x {view.instance_type} "
            f"(config {view.config_name})"
        )
    for smoke in result.smoke:
        out.print(f"smoke ok: {smoke.name} ({smoke.target_model}) in {smoke.seconds:.2f} s")
    out.print(
        "manifest published" if result.published else "manifest unchanged (nothing to publish)"
    )


def _render(document: dict[str, Any], as_json: bool, kind: str) -> None:
    from deploy.cli.output import console, emit_json

    if as_json:
        emit_json(document)
        return
    out = console()
    if kind == "status":
        from deploy.lifecycle.render import render_status

        render_status(document, out)
    elif kind == "down":
        out.print(f"removed stacks: {', '.join(document['removed_stacks']) or 'none'}")
        if document.get("model_store_kept"):
            out.print(f"model store kept: {document['model_store_kept']} (--purge deletes it)")
    else:
        _render_prune(document, out)


def _render_prune(document: dict[str, Any], out: Any) -> None:
    from deploy.lifecycle.render import size

    store = document.get("store")
    if store is None:
        out.print("no model store for this stage: nothing to prune")
        return
    deleted = document["deleted"]
    verb = "would delete" if document.get("dry_run") else "deleted"
    out.print(
        f"{verb} {len(deleted)} archive(s), {size(document['bytes_freed'])}, from {store} "
        f"({len(document['kept_referenced'])} referenced by the manifest stay)"
    )
    for name in deleted:
        out.print(f"  {store}{name}  {size(document['sizes'].get(name, 0))}", markup=False)
    if document.get("dry_run"):
        out.print("[bold]dry run[/]: nothing was deleted")
