"""`deploy promote MODEL` and `deploy rollback MODEL`: end a model's canary.

Both publish the outcome (deploy.lifecycle.release), conditionally on the
manifest they read; on AWS the canary's rollback alarms go with it. `--local`
does the same to the local endpoint's manifest (`deploy up --local`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from deploy.cli.flags import (
    AWS_FLAGS,
    JsonOption,
    ProfileOption,
    RegionOption,
    StageOption,
    reject,
)

if TYPE_CHECKING:
    from deploy.lifecycle.release import Action


def register(app: typer.Typer) -> None:
    app.command("promote")(promote)
    app.command("rollback")(rollback)


ModelArgument = typer.Argument(..., help="The model's logical name (as in the manifest).")
LocalOption = typer.Option(False, "--local", help="The endpoint on this machine.")
EndpointOption = typer.Option(None, "--endpoint-name", help="Endpoint name (local: 'local').")


def promote(
    ctx: typer.Context,
    model: str = ModelArgument,
    local: bool = LocalOption,
    endpoint_name: str | None = EndpointOption,
    stage: StageOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make MODEL's canary its live version (every call goes to it) and publish that."""
    _end(ctx, "promote", model, local, endpoint_name, stage, region, profile, as_json)


def rollback(
    ctx: typer.Context,
    model: str = ModelArgument,
    local: bool = LocalOption,
    endpoint_name: str | None = EndpointOption,
    stage: StageOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove MODEL's canary (the live version stays) and publish that."""
    _end(ctx, "rollback", model, local, endpoint_name, stage, region, profile, as_json)


def _end(
    ctx: typer.Context,
    action: Action,
    model: str,
    local: bool,
    endpoint_name: str | None,
    stage: str | None,
    region: str | None,
    profile: str | None,
    as_json: bool,
) -> None:
    from deploy.cli.output import console, emit_json
    from deploy.lifecycle.release import end_canary

    if local:
        reject(ctx, AWS_FLAGS, because="to --local: the local endpoint runs on this machine")
        from deploy.lifecycle.local_provider import LocalProvider

        name = endpoint_name or "local"
        provider = LocalProvider(name)
        where = f"local endpoint {name}: {provider.store_dir / provider.mode.manifest_key}"
        outcome = end_canary(provider, model, action, where=where)
    else:
        from deploy.cli.lifecycle import _aws_provider

        aws = _aws_provider(stage, region, profile, endpoint_name)
        where = f"stage {aws.settings.stage}: the published manifest"
        outcome = end_canary(aws, model, action, where=where)
    if as_json:
        emit_json(outcome.to_dict())
        return
    done = "promoted" if action == "promote" else "rolled back"
    console().print(
        f"{model}: canary {done}; every call goes to {outcome.live} "
        f"(was {outcome.percent:g}% to the canary); manifest published",
        markup=False,
    )
