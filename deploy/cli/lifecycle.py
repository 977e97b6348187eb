"""`deploy up`, `deploy status`, `deploy down`: an endpoint's lifecycle.

`--local` runs the endpoint on this machine (`deploy.local.provider`); the
stages are the same for every provider (`deploy.lifecycle.up`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deploy.errors import ConfigError

_LOCAL_ONLY = ConfigError(
    "this command needs --local here",
    where="deploy up/status/down",
    fix="pass --local to run the endpoint on this machine",
)


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("status")(status)
    app.command("down")(down)


def up(
    local: bool = typer.Option(False, "--local", help="Run the endpoint on this machine."),
    repository: Annotated[
        Path | None, typer.Option("--repository", help="Model repository.")
    ] = None,
    package_dir: Annotated[
        Path | None, typer.Option("--package-dir", help="Package output.")
    ] = None,
    endpoint_name: str = typer.Option("local", "--endpoint-name", help="Local endpoint name."),
    port: int | None = typer.Option(None, "--port", help="Local front-end port."),
    skip_smoke: bool = typer.Option(False, "--skip-smoke", help="Do not smoke-test models."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Package, start (or update) the endpoint, smoke-test the models."""
    if not local:
        raise _LOCAL_ONLY
    from deploy.cli.output import console, emit_json, interactive
    from deploy.config import load_settings
    from deploy.lifecycle.progress import reporter
    from deploy.lifecycle.up import UpOptions
    from deploy.lifecycle.up import up as run_up
    from deploy.local.provider import LocalProvider

    settings = load_settings(repository=repository, package_dir=package_dir)
    provider = LocalProvider(endpoint_name, port=port)
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
    for smoke in result.smoke:
        out.print(f"  smoke ok: {smoke.to_dict().get('model', smoke)}")
    out.print(
        "call it with boto3:\n"
        "  import boto3\n"
        f'  rt = boto3.client("sagemaker-runtime", endpoint_url="{url}", region_name="us-east-1",\n'
        '                    aws_access_key_id="x", aws_secret_access_key="x")\n'
        f'  rt.invoke_endpoint(EndpointName="{endpoint_name}", TargetModel="<target_model from '
        'manifest.json>",\n'
        '                     ContentType="application/vnd.sagemaker-triton.binary+json;'
        'json-header-size=N", Body=body)'
    )


def status(
    local: bool = typer.Option(False, "--local", help="The endpoint on this machine."),
    endpoint_name: str = typer.Option("local", "--endpoint-name", help="Local endpoint name."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show the endpoint and its loaded models."""
    if not local:
        raise _LOCAL_ONLY
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
        out.print(f"  url {document['url']}  pid {document['pid']}  log {document['log']}")
    loaded = {m["target_model"]: m for m in document.get("loaded", [])}
    table = Table("target model", "loaded", "MB", "load s")
    for target in sorted(set(document.get("available", [])) | set(loaded)):
        model = loaded.get(target)
        table.add_row(
            target,
            "yes" if model else "no",
            f"{model['bytes'] / 1e6:.1f}" if model else "",
            f"{model['load_seconds']:.2f}" if model else "",
        )
    if table.row_count:
        out.print(table)


def down(
    local: bool = typer.Option(False, "--local", help="The endpoint on this machine."),
    endpoint_name: str = typer.Option("local", "--endpoint-name", help="Local endpoint name."),
) -> None:
    """Stop the endpoint."""
    if not local:
        raise _LOCAL_ONLY
    from deploy.cli.output import console
    from deploy.local.provider import LocalProvider

    stopped = LocalProvider(endpoint_name).stop()
    console().print(
        f"local endpoint {endpoint_name} stopped" if stopped else f"{endpoint_name} was not running"
    )
