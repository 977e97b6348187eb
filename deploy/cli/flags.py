"""Flags shared by several commands, and the rule that each one is honoured or refused.

A flag that does not apply to what a command is doing (`--region` with
`--local`) is a usage error (exit 2) naming the flag and why, never silently
ignored. Only flags typed on the command line count: a `DEPLOY_*` variable
set for another kind of run does not make a command fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from deploy.aws.session import AwsSession
    from deploy.config import DeploySettings

ProfileOption = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="AWS profile (default: AWS_PROFILE, else boto3's default credentials).",
    ),
]
RegionOption = Annotated[
    str | None,
    typer.Option(
        "--region",
        help="AWS region (default: AWS_REGION/AWS_DEFAULT_REGION, the profile's, deploy.toml).",
    ),
]
StageOption = Annotated[str | None, typer.Option("--stage", help="Stage (deploy.toml section).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
HostingOption = Annotated[
    str | None,
    typer.Option(
        "--hosting",
        help="How the endpoint hosts the models: multi-model, single-model, async or "
        "serverless (default: the stage's `hosting` setting; ml.inf1.*: single-model, "
        "else multi-model).",
    ),
]

# The flags that only mean something on AWS, by parameter name.
AWS_FLAGS = {"stage": "--stage", "region": "--region", "profile": "--profile"}


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the parameter `name` was typed on the command line."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def reject(ctx: typer.Context, flags: Mapping[str, str], *, because: str) -> None:
    """A usage error (exit 2) if any of `flags` (parameter name -> flag) was given."""
    used = [flag for name, flag in flags.items() if given(ctx, name)]
    if used:
        verb = "does" if len(used) == 1 else "do"
        ctx.fail(f"{', '.join(used)} {verb} not apply {because}")


def aws_target(
    *,
    stage: str | None,
    region: str | None,
    profile: str | None,
    **overrides: Any,
) -> tuple[DeploySettings, AwsSession]:
    """Settings and an AWS session resolved the one way (`deploy.aws.region`)."""
    from deploy.aws.region import resolve_profile, resolve_region
    from deploy.aws.session import AwsSession
    from deploy.config import load_settings

    chosen = resolve_region(region, profile=resolve_profile(profile), stage=stage)
    settings = load_settings(stage=stage, region=chosen.name, **overrides)
    # Only --profile is handed to boto3: AWS_PROFILE it reads itself, the usual way.
    return settings, AwsSession(chosen.name, profile, region_source=chosen.source)


NoRepoCodeOption = Annotated[
    bool,
    typer.Option(
        "--no-repo-code",
        help="Run no code from the repository or script (auto_complete_config, a bind "
        "script, a TorchScript sample run, python models); a model that needs it is an "
        "error. deploy.toml: repository_code = false.",
    ),
]


def repository_code(no_repo_code: bool, *, stage: str | None = None) -> None:
    """Record whether this command may run repository code (the flag, else deploy.toml)."""
    from deploy.box.policy import SETTING, decide
    from deploy.config import configured_value

    configured = configured_value(SETTING, stage=stage)
    decide(
        flag=no_repo_code,
        configured=configured[0] if configured else None,
        where=configured[1] if configured else "deploy.toml",
    )
