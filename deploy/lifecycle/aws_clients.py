"""The AWS boundary the AWS provider works through, built in one place.

`aws_clients(region)` makes every service client of `deploy.aws` for one
session; the provider, its operations and the rollout take them in their
constructors, so tests hand in fakes (or clients of the moto server) instead
of patching attributes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deploy.aws.autoscaling import AutoScaling
from deploy.aws.cloudformation import Stacks
from deploy.aws.cloudwatch import CloudWatch
from deploy.aws.inference_components import InferenceComponents
from deploy.aws.quotas import ServiceQuotas
from deploy.aws.s3 import ModelStore
from deploy.aws.sagemaker import SageMaker
from deploy.aws.session import AwsSession


@dataclass(frozen=True)
class AwsClients:
    session: AwsSession  # credentials, account id, where the region came from
    stacks: Stacks
    sagemaker: SageMaker
    autoscaling: AutoScaling
    cloudwatch: CloudWatch
    quotas: ServiceQuotas
    store: Callable[[str], ModelStore]  # a bucket's client
    parameter: Callable[[str], str | None]  # an SSM parameter's value (None: missing)
    lookup_context: Callable[[str], dict[str, Any]]  # what the CDK CLI would look up
    # Hosting components: SageMaker's inference components and their copy autoscaling
    # (None: on this session's clients).
    components: InferenceComponents | None = None


def aws_clients(
    region: str,
    *,
    session: AwsSession | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> AwsClients:
    """Every client `deploy up/status/down/prune` needs, on one session."""
    from deploy.aws import ssm
    from deploy.aws.ec2 import cdk_lookup_context

    chosen = session or AwsSession(region)
    return AwsClients(
        session=chosen,
        stacks=Stacks(chosen, sleep=sleep),
        sagemaker=SageMaker(chosen),
        autoscaling=AutoScaling(chosen),
        cloudwatch=CloudWatch(chosen),
        quotas=ServiceQuotas(chosen),
        store=lambda bucket: ModelStore(chosen, bucket),
        parameter=lambda name: ssm.parameter(chosen, name),
        lookup_context=lambda account: cdk_lookup_context(chosen, account),
    )
