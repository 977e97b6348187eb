"""Build the CDK app for one stage and synthesize it without the CDK CLI.

Stacks (named by `DeploySettings.stack_name`), in deployment order:

- `model-store`: KMS key, model bucket (+ access-log bucket);
- `network`: VPC, isolated subnets, VPC endpoints (their policies name the model-store
  bucket), flow logs, endpoint security group (not for serverless endpoints: they take
  no VPC);
- `endpoint`: execution role, Model/EndpointConfig/Endpoint, autoscaling, alarms, dashboard;
- `async-lane`: with `async_lane = true`, the asynchronous endpoint paired with the
  multi-model one (`deploy.hosting.async_lane`: the async stack, the router archive);
- `api`: HTTP API + Lambda front door (when `infra.api` is on).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from deploy.config import DeploySettings
from deploy.hosting import HostingMode, async_lane, mode_for
from deploy.hosting.router import RouterLayout
from deploy.hosting.rules import keeps_an_instance
from deploy_infra.errors import InfraConfigError
from deploy_infra.instances import instance_spec
from deploy_infra.stacks.api import ApiStack
from deploy_infra.stacks.async_endpoint import AsyncEndpointStack
from deploy_infra.stacks.components_endpoint import ComponentsEndpointStack
from deploy_infra.stacks.endpoint import EndpointStack
from deploy_infra.stacks.model_store import ModelStoreStack
from deploy_infra.stacks.network import NetworkStack
from deploy_infra.stacks.serverless_endpoint import ServerlessEndpointStack, cpu_instance_spec
from deploy_infra.stacks.single_model_endpoint import SingleModelEndpointStack

# Used when neither the settings nor the CDK CLI name an account: synth stays
# offline and reproducible (context.json pins this account's availability zones).
OFFLINE_ACCOUNT = "000000000000"
COMPONENTS = ("model-store", "network", "endpoint", "async-lane", "api")


@dataclass
class StageApp:
    app: cdk.App
    stacks: dict[str, cdk.Stack]  # component → stack


def build_app(
    settings: DeploySettings,
    *,
    outdir: Path | None = None,
    app: cdk.App | None = None,
    nag: bool = True,
) -> StageApp:
    """Compose the stage's stacks in `app` (a new one writing to `outdir` if not given)."""
    mode = mode_for(settings)
    if not mode.scales_to_zero:
        keeps_an_instance(settings)  # only asynchronous endpoints scale to zero
    endpoint_stack = endpoint_stack_for(mode, settings.instance_type)
    if app is None:
        app = cdk.App(outdir=str(outdir) if outdir is not None else None, context=_pinned_context())
    env = cdk.Environment(
        account=settings.infra.account or os.environ.get("CDK_DEFAULT_ACCOUNT") or OFFLINE_ACCOUNT,
        region=settings.region,
    )
    tags = {"deploy:stage": settings.stage, "deploy:endpoint": settings.endpoint_name}
    store = ModelStoreStack(
        app,
        settings.stack_name("model-store"),
        prefix=settings.infra.model_prefix,
        endpoint_name=settings.endpoint_name,
        # The lane's alarms publish to the stage's topic, encrypted with the store's key.
        also_endpoints=[async_lane.endpoint_name(settings)] if settings.async_lane else [],
        bucket_name=settings.infra.model_bucket_name,
        kms_key_arn=settings.infra.kms_key_arn,
        env=env,
        tags=tags,
        description=f"deploy {settings.stage}: model store for {settings.endpoint_name}",
    )
    stacks: dict[str, cdk.Stack] = {"model-store": store}
    placement: dict[str, Any] = {}
    if mode.network:
        # The network's S3 endpoint policy names the model-store bucket: store first.
        network = NetworkStack(
            app,
            settings.stack_name("network"),
            vpc_id=settings.infra.vpc_id,
            model_bucket=store.store.bucket,
            env=env,
            tags=tags,
            description=f"deploy {settings.stage}: private network for {settings.endpoint_name}",
        )
        stacks["network"] = network
        placement["network"] = network.network
    endpoint = endpoint_stack(
        app,
        settings.stack_name("endpoint"),
        settings=settings,
        store=store.store,
        env=env,
        tags=tags,
        description=f"deploy {settings.stage}: SageMaker Triton {mode.name} endpoint "
        f"{settings.endpoint_name}",
        **placement,
    )
    stacks["endpoint"] = endpoint
    if settings.async_lane:
        lane = async_lane.lane_settings(settings)
        stacks[async_lane.COMPONENT] = ENDPOINT_STACKS[async_lane.MODE.endpoint_stack](
            app,
            settings.stack_name(async_lane.COMPONENT),
            settings=lane,
            store=store.store,
            env=env,
            tags=tags,
            description=f"deploy {settings.stage}: asynchronous lane {lane.endpoint_name} "
            f"of {settings.endpoint_name}",
            **placement,
        )
    # The front door sends TargetModel: only modes that address models that way have it.
    if settings.infra.api and mode.front_door:
        api = ApiStack(
            app,
            settings.stack_name("api"),
            endpoint_name=settings.endpoint_name,
            store=store.store,
            env=env,
            tags=tags,
            description=f"deploy {settings.stage}: KServe v2 HTTP API for {settings.endpoint_name}",
        )
        api.add_stack_dependency(endpoint)
        stacks["api"] = api
    if nag:
        cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return StageApp(app, stacks)


# The endpoint stack class of each key a hosting mode names (`HostingMode.endpoint_stack`);
# a mode without a network stack (`HostingMode.network`) gets no `network=` argument.
ENDPOINT_STACKS: dict[str, Callable[..., cdk.Stack]] = {
    "endpoint": EndpointStack,
    "single-model-endpoint": SingleModelEndpointStack,
    "serverless-endpoint": ServerlessEndpointStack,
    "async-endpoint": AsyncEndpointStack,
    "components-endpoint": ComponentsEndpointStack,
}


def endpoint_stack_for(mode: HostingMode, instance_type: str) -> Callable[..., cdk.Stack]:
    """The endpoint stack class of a hosting mode, after the instance checks that fail
    before any construct exists."""
    from deploy.hosting import MODES
    from deploy.neuron.instances import is_inferentia, neuron_cores

    stack = ENDPOINT_STACKS.get(mode.endpoint_stack)
    if stack is None:
        served = [name for name, each in MODES.items() if each.endpoint_stack in ENDPOINT_STACKS]
        raise InfraConfigError(
            f"hosting {mode.name!r} has no endpoint stack in this version",
            where="hosting",
            fix=f"use hosting {' or '.join(served)}",
        )
    if not mode.on_instances:
        cpu_instance_spec(instance_type)  # it picks the (CPU) image
    elif isinstance(mode.layout, RouterLayout) and is_inferentia(instance_type):
        neuron_cores(instance_type)  # an unknown inf1 size fails here (the router serves inf1)
    else:
        instance_spec(instance_type)
    return stack


def synthesize(settings: DeploySettings, outdir: Path, *, nag: bool = True) -> dict[str, Path]:
    """Synthesize the stage into `outdir`; return stack name → template path, in deploy order."""
    staged = build_app(settings, outdir=outdir, nag=nag)
    assembly = staged.app.synth()
    return {
        stack.stack_name: Path(assembly.get_stack_by_name(stack.stack_name).template_full_path)
        for stack in staged.stacks.values()
    }


def _pinned_context() -> dict[str, object]:
    """The pinned context (the offline account's availability zones and S3 prefix list,
    feature flags), package data beside this module: the app needs no cdk.json."""
    pinned = Path(__file__).resolve().parent / "context.json"
    context = json.loads(pinned.read_text(encoding="utf-8"))
    return dict(context) if isinstance(context, dict) else {}
