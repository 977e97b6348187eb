"""`deploy up`, `deploy status`, `deploy down`, `deploy prune`: an endpoint's lifecycle.

`--local` runs the endpoint on this machine (`deploy.local.provider`);
without it the stage goes to AWS (`deploy.lifecycle.aws_provider`). The
stages are the same for every provider (`deploy.lifecycle.up`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from deploy.lifecycle.aws_provider import AwsProvider


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("status")(status)
    app.command("down")(down)
    app.command("prune")(prune)


def up(
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
        help="Local front-end port (default: the local_port setting, 8080; 0: any free port).",
    ),
    skip_smoke: bool = typer.Option(False, "--skip-smoke", help="Do not smoke-test models."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    stage: str | None = typer.Option(None, "--stage", help="Stage (deploy.toml section)."),
    instance: str | None = typer.Option(
        None, "--instance", help="SageMaker instance type (ml.inf1.*: a single-model endpoint)."
    ),
    region: str | None = typer.Option(None, "--region", help="AWS region."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and stop."),
    timeout: float = typer.Option(3600.0, "--timeout", help="Rollout timeout (seconds)."),
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
) -> None:
    """Package, plan, upload, provision, wait, smoke-test, publish the manifest."""
    if not local:
        _up_aws(
            stage=stage,
            instance=instance,
            region=region,
            endpoint_name=endpoint_name,
            repository=repository,
            package_dir=package_dir,
            dry_run=dry_run,
            skip_smoke=skip_smoke,
            timeout=timeout,
            smoke_endpoint_url=smoke_endpoint_url,
            smoke_endpoint_name=smoke_endpoint_name,
            as_json=as_json,
        )
        return
    endpoint_name = endpoint_name or "local"
    from deploy.extras import require

    require("local")  # before packaging: the endpoint it starts needs it
    from deploy.cli.output import console, emit_json, interactive
    from deploy.config import load_settings
    from deploy.lifecycle.progress import reporter
    from deploy.lifecycle.up import UpOptions
    from deploy.lifecycle.up import up as run_up
    from deploy.local.provider import LocalProvider

    settings = load_settings(repository=repository, package_dir=package_dir)
    provider = LocalProvider(endpoint_name, port=port if port is not None else settings.local_port)
    result = run_up(
        settings,
        provider,
        repository=settings.repository,
        package_dir=settings.package_dir,
        options=UpOptions(skip_smoke=skip_smoke),
        reporter=reporter(interactive=interactive() and not as_json),
    )
    url = provider.data_plane().endpoint_url
    if as_json:
        emit_json({**result.to_dict(), "url": url})
        return
    out = console()
    out.print(f"local endpoint [bold]{endpoint_name}[/] at {url}")
    out.print(f"  tritonserver log {provider.triton_log_path.resolve()}", soft_wrap=True)
    for smoke in result.smoke:
        out.print(f"  smoke ok  {smoke.name:<16} {smoke.target_model}  {smoke.seconds:.2f} s")
    snippet = url and _boto3_snippet(url, endpoint_name, provider.published_manifest() or {})
    if snippet:
        out.print("call it with boto3:", soft_wrap=True)
        out.print(snippet, markup=False, highlight=False, soft_wrap=True)


def _boto3_snippet(url: str, endpoint_name: str, manifest: dict[str, Any]) -> str | None:
    """A copy-paste boto3 call (v2 JSON body) for the first model of the manifest."""
    import json

    models = manifest.get("models") or {}
    if not models:
        return None
    name = sorted(models)[0]
    entry = models[name]
    from deploy.lifecycle.smoke import generated_inputs

    # The smoke test's shapes (batch of one, -1 as 1); readable constant values.
    inputs = [
        {
            "name": input_name,
            "datatype": spec["datatype"],
            "shape": list(array.shape),
            "data": ["a" if spec["datatype"] == "BYTES" else 0] * array.size,
        }
        for spec, (input_name, array) in zip(
            entry.get("inputs", []), generated_inputs(entry).items(), strict=True
        )
    ]
    body = json.dumps({"inputs": inputs})
    return (
        "import boto3\n"
        f'rt = boto3.client("sagemaker-runtime", endpoint_url="{url}", region_name="us-east-1",\n'
        '                  aws_access_key_id="x", aws_secret_access_key="x")\n'
        f"answer = rt.invoke_endpoint(EndpointName={endpoint_name!r}, "
        f"TargetModel={entry['target_model']!r},  # {name}\n"
        f'                            ContentType="application/json", Body={body!r})\n'
        'print(answer["Body"].read())'
    )


def status(
    local: bool = typer.Option(False, "--local", help="The endpoint on this machine."),
    endpoint_name: str | None = typer.Option(None, "--endpoint-name", help="Endpoint name."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    stage: str | None = typer.Option(None, "--stage", help="Stage (deploy.toml section)."),
    region: str | None = typer.Option(None, "--region", help="AWS region."),
) -> None:
    """Show the endpoint, its scaling, the manifest's models and recent errors/latency."""
    if not local:
        document = _aws_provider(stage, region, endpoint_name).status()
        _render(document, as_json, "status")
        return
    endpoint_name = endpoint_name or "local"
    from deploy.cli.output import console, emit_json
    from deploy.local.provider import LocalProvider

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


def down(
    local: bool = typer.Option(False, "--local", help="The endpoint on this machine."),
    endpoint_name: str | None = typer.Option(None, "--endpoint-name", help="Endpoint name."),
    stage: str | None = typer.Option(None, "--stage", help="Stage (deploy.toml section)."),
    region: str | None = typer.Option(None, "--region", help="AWS region."),
    purge: bool = typer.Option(False, "--purge", help="Also delete the model store."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Remove the endpoint (AWS: its stacks); the model store stays unless --purge."""
    if not local:
        provider = _aws_provider(stage, region, endpoint_name)
        if purge and not yes:
            location = provider.store_location()
            where = f"s3://{location.bucket}/{location.prefix}" if location else "the model store"
            if not typer.confirm(f"delete {where} and every archive in it?", err=True):
                raise typer.Exit(1)
        _render(provider.down(purge=purge), as_json, "down")
        return
    endpoint_name = endpoint_name or "local"
    from deploy.cli.output import console
    from deploy.local.provider import LocalProvider

    local_provider = LocalProvider(endpoint_name)
    stopped = local_provider.stop()
    out = console()
    if stopped is None:
        out.print(f"{endpoint_name} was not running")
    else:
        out.print(f"local endpoint {endpoint_name} stopped")
    log = (
        Path(stopped.triton_log)
        if stopped and stopped.triton_log
        else local_provider.triton_log_path
    )
    if log.is_file():
        out.print(f"  tritonserver log kept: {log}", soft_wrap=True)


def prune(
    keep: int = typer.Option(1, "--keep", min=0, help="Superseded archives to keep per model."),
    stage: str | None = typer.Option(None, "--stage", help="Stage (deploy.toml section)."),
    region: str | None = typer.Option(None, "--region", help="AWS region."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Delete superseded archives the published manifest no longer references."""
    _render(_aws_provider(stage, region, None).prune(keep=keep, dry_run=dry_run), as_json, "prune")


# -- AWS -------------------------------------------------------------------------------


def _aws_provider(
    stage: str | None,
    region: str | None,
    endpoint_name: str | None,
    *,
    instance: str | None = None,
    smoke_endpoint_url: str | None = None,
    smoke_endpoint_name: str | None = None,
    repository: Path | None = None,
    package_dir: Path | None = None,
) -> AwsProvider:
    from deploy.config import load_settings
    from deploy.lifecycle.aws_provider import AwsProvider

    settings = load_settings(
        stage=stage,
        region=region,
        endpoint_name=endpoint_name,
        instance_type=instance,
        repository=repository,
        package_dir=package_dir,
    )
    return AwsProvider(
        settings,
        smoke_endpoint_url=smoke_endpoint_url,
        smoke_endpoint_name=smoke_endpoint_name,
    )


def _up_aws(
    *,
    stage: str | None,
    instance: str | None,
    region: str | None,
    endpoint_name: str | None,
    repository: Path | None,
    package_dir: Path | None,
    dry_run: bool,
    skip_smoke: bool,
    timeout: float,
    smoke_endpoint_url: str | None,
    smoke_endpoint_name: str | None,
    as_json: bool,
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
        endpoint_name,
        instance=instance,
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
        options=UpOptions(dry_run=dry_run, skip_smoke=skip_smoke, timeout_s=timeout),
        reporter=reporter(interactive=interactive() and not as_json),
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
        verb = "would delete" if document.get("dry_run") else "deleted"
        out.print(
            f"{verb} {len(document['deleted'])} archive(s), {document['bytes_freed']} bytes; "
            f"{len(document['kept_referenced'])} referenced by the manifest"
        )
        for name in document["deleted"]:
            out.print(f"  {name}")
