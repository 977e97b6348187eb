"""The pinned CDK CLI, for stacks with container image assets (e.g. the inf1 Neuron image).

CloudFormation alone cannot deploy such a stack: its image must be built from
`deploy_infra/neuron/Dockerfile` and pushed to the bootstrap ECR repository first,
which `cdk deploy` does with a Docker engine. So an inf1 stage is deployed with

    cdk deploy --app <cloud assembly> --require-approval never <stacks>

with the pinned CLI (`deploy.lifecycle.cdk_toolkit`, installed on first use). Both tools are
checked before anything changes: `require_tools` raises a `DeployError`
naming what is missing and how to go on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from deploy.errors import DeployError
from deploy.lifecycle.cdk_toolkit import cannot_run, cdk_cli
from deploy.lifecycle.provider import Reporter
from deploy.lifecycle.rollout import Rollout

# The CDK CLI runs this executable for container assets (CDK_DOCKER, as the CLI reads it).
DOCKER_ENV = "CDK_DOCKER"
# The container image asset the stacks of this project build (the inf1 Neuron image).
IMAGE = "deploy_infra/neuron/Dockerfile"


class ContainerEngineError(DeployError):
    """No Docker engine to build a container image asset with; nothing was changed."""


class CdkDeployError(DeployError):
    """`cdk deploy` failed; CloudFormation rolled the failed stack back by itself."""


def container_engine() -> str:
    return os.environ.get(DOCKER_ENV) or "docker"


def engine_problem(engine: str, *, timeout_s: float = 30.0) -> str | None:
    """Why `engine` cannot build images here (None: `<engine> info` answered)."""
    path = shutil.which(engine)
    if path is None:
        return f"`{engine}` is not on PATH"
    try:
        answer = subprocess.run(
            [path, "info"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{engine} info` failed: {exc}"
    if answer.returncode != 0:
        lines = [line.strip() for line in answer.stderr.splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit code {answer.returncode}"
        return f"`{engine} info` failed: {detail}"
    return None


def cdk_executable(root: Path) -> Path:
    """The pinned CDK CLI (deploy.lifecycle.cdk_toolkit: the project's, PATH's or the
    cache's, installed there on first use)."""
    return cdk_cli(root)


def deploy_command(cli: Path, assembly: Path, stacks: Sequence[str]) -> list[str]:
    return [str(cli), "deploy", "--app", str(assembly), "--require-approval", "never", *stacks]


def require_tools(
    *, root: Path, stage: str, stacks: Sequence[str], image: str, engine: str | None = None
) -> Path:
    """The CDK CLI's path, once it and a Docker engine are known to be there.

    Raises before anything changes: `ContainerEngineError` without a Docker engine,
    `ConfigError` without Node.js (or when the CLI cannot be installed).
    """
    chosen = engine or container_engine()
    problem = engine_problem(chosen)
    if problem is not None:
        raise ContainerEngineError(
            f"Docker is needed to build the Neuron image ({image}) of stage {stage!r}, and no "
            f"Docker engine is available: {problem}. Nothing was uploaded or deployed",
            where=f"stack {', '.join(stacks)}",
            fix=f"run `deploy up --stage {stage}` again on a machine with a running Docker "
            "engine (it builds and pushes the image with the CDK CLI), or deploy the stage's "
            f"infrastructure from such a machine with `deploy cdk deploy --all -c stage={stage}` "
            "(the Model reads <prefix>inf1/model.tar.gz unless `-c model_archive=KEY` names "
            "another key under the model prefix)",
        )
    return cdk_executable(root)


def cdk_deploy(
    cli: Path,
    assembly: Path,
    stacks: Sequence[str],
    *,
    cwd: Path,
    environment: Mapping[str, str],
    tail_lines: int = 30,
) -> None:
    """Run `cdk deploy` for `stacks`; its output goes to stderr as it comes."""
    command = deploy_command(cli, assembly, stacks)
    tail: deque[str] = deque(maxlen=tail_lines)
    env = {**os.environ, **environment}
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise cannot_run(cli, exc) from exc
    with process:
        for line in process.stdout or ():
            tail.append(line.rstrip())
            sys.stderr.write(line)
        code = process.wait()
    if code != 0:
        detail = " | ".join(line for line in tail if line)[-1500:]
        raise CdkDeployError(
            f"`cdk deploy` exited with {code}: {detail}",
            where=f"stack {', '.join(stacks)}",
            fix="read the CDK CLI's output above; CloudFormation rolls a failed update back "
            "by itself and the manifest was not switched; re-run `deploy up` once fixed",
        )


def provision_with_cdk_cli(
    rollout: Rollout,
    assembly: Path,
    stacks: Sequence[str],
    reporter: Reporter,
    *,
    root: Path,
    engine: str | None = None,
) -> None:
    """Deploy `stacks` of the cloud assembly with the CDK CLI (it builds their images).

    A failure says what still serves, as a CloudFormation rollout does.
    """
    if not stacks:
        return
    settings = rollout.stage.settings
    cli = require_tools(root=root, stage=settings.stage, stacks=stacks, image=IMAGE, engine=engine)
    environment = {"AWS_REGION": settings.region, "AWS_DEFAULT_REGION": settings.region}
    if engine:
        environment[DOCKER_ENV] = engine
    before = rollout.stage.endpoint_state()
    with rollout.rolling_out(reporter):
        try:
            cdk_deploy(cli, assembly, stacks, cwd=root, environment=environment)
        except DeployError as exc:
            raise rollout.failed(", ".join(stacks), exc.message, before) from exc
