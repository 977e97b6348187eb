"""Which AWS profile and region a command uses: one order for every command.

Region, first found wins:

1. the `--region` flag;
2. `DEPLOY_REGION` (the project's own setting, like any `DEPLOY_<FIELD>`);
3. `AWS_REGION`, then `AWS_DEFAULT_REGION` (what boto3 and the AWS CLI read);
4. the profile's `region` in the AWS config file (`--profile`, else `AWS_PROFILE`,
   else the default profile);
5. `region` in deploy.toml for the stage;
6. us-east-1.

The AWS environment comes before deploy.toml so that a shell or CI job set up
for one region (`aws configure`, `AWS_REGION`) deploys there, as the AWS CLI
would. The result says where the region came from; plans print it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from deploy.config import ENV_PREFIX, configured_value
from deploy.errors import AwsError

DEFAULT_REGION = "us-east-1"
PROFILE_ENV = "AWS_PROFILE"
REGION_ENVS = (f"{ENV_PREFIX}REGION", "AWS_REGION", "AWS_DEFAULT_REGION")


@dataclass(frozen=True)
class Region:
    name: str
    source: str  # "--region", "AWS_REGION", "profile foo", "deploy.toml", ...

    def describe(self) -> str:
        return f"{self.name} (from {self.source})"


def resolve_profile(flag: str | None) -> str | None:
    """`--profile`, else `AWS_PROFILE`, else None (boto3's default chain)."""
    return flag or os.environ.get(PROFILE_ENV) or None


def describe_profile(profile: str | None) -> str:
    """How messages name the credentials in use (never `profile None`)."""
    return f"profile {profile}" if profile else "default credential chain"


def profile_region(profile: str | None) -> str | None:
    """The `region` of the profile in the AWS config file (no AWS call)."""
    from botocore.exceptions import BotoCoreError, ProfileNotFound
    from botocore.session import Session

    try:
        session = Session(profile=profile)
        region = session.get_scoped_config().get("region")
    except ProfileNotFound as exc:
        known = ", ".join(sorted(Session().available_profiles)) or "none"
        raise AwsError(
            f"the AWS profile {profile!r} is not in the AWS config files (known: {known})",
            where=describe_profile(profile),
            fix=f"run `aws configure --profile {profile}`, or name a known profile with "
            f"--profile or {PROFILE_ENV}",
        ) from exc
    except BotoCoreError as exc:
        raise AwsError(
            f"cannot read the AWS config files: {exc}",
            where=os.environ.get("AWS_CONFIG_FILE", str(Path("~/.aws/config"))),
            fix="correct the file named here",
        ) from exc
    return str(region) if region else None


def resolve_region(
    flag: str | None,
    *,
    profile: str | None,
    stage: str | None = None,
    config_file: Path | None = None,
) -> Region:
    """The region a command talks to, and where it came from (the order above)."""
    if flag:
        return Region(flag, "--region")
    for variable in REGION_ENVS:
        value = os.environ.get(variable)
        if value:
            return Region(value, variable)
    from_profile = profile_region(profile)
    if from_profile:
        return Region(from_profile, f"profile {profile or 'default'}")
    configured = configured_value("region", stage=stage, config_file=config_file)
    if configured is not None and configured[0]:
        return Region(str(configured[0]), configured[1])
    return Region(DEFAULT_REGION, "the built-in default")
