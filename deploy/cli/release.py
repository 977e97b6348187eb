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


def watch_canaries(
    stage: str | None,
    region: str | None,
    profile: str | None,
    endpoint_name: str | None,
    timeout_s: float,
    *,
    as_json: bool,
    interval_s: float = 15.0,
) -> None:
    """`deploy up --watch`: each canary's split and alarm states until it ends or the
    timeout; exit 1 if one was rolled back."""
    from deploy.cli.lifecycle import _aws_provider
    from deploy.cli.output import console, emit_json
    from deploy.lifecycle.canary_alarms import CanaryAlarms
    from deploy.lifecycle.canary_watch import CanaryView, watch

    provider = _aws_provider(stage, region, profile, endpoint_name)
    out = console()
    shown: dict[str, str] = {}  # model → its last line: a line when something changed

    def show(views: list[CanaryView]) -> None:
        if as_json:
            return
        for view in views:
            states = ", ".join(f"{kind} {state}" for kind, state in view.alarms.items())
            split = f"{view.percent:g}% to {view.canary}, the rest to {view.live}"
            line = f"{view.model}: {split}; alarms {states}"
            if shown.get(view.model) != line:
                out.print(line, markup=False)
                shown[view.model] = line

    outcome = watch(
        provider.published_manifest,
        CanaryAlarms(provider.session, provider.settings.endpoint_name),
        timeout_s=timeout_s,
        interval_s=interval_s,
        show=show,
    )
    if as_json:
        emit_json(outcome.to_dict())
    else:
        for model, how in sorted(outcome.ended.items()):
            out.print(f"{model}: canary {how}", markup=False)
        for view in outcome.running:
            out.print(
                f"{view.model}: canary still at {view.percent:g}% after {timeout_s:g} s "
                f"(`deploy promote {view.model}` or `deploy rollback {view.model}` ends it)",
                markup=False,
            )
        if not outcome.ended and not outcome.running:
            out.print("no model canary to watch", markup=False)
    if outcome.rolled_back:
        if not as_json:
            out.print(
                f"rolled back: {', '.join(outcome.rolled_back)} (a canary alarm fired, or "
                "`deploy rollback` ran); the live versions serve every call",
                markup=False,
            )
        raise typer.Exit(1)
