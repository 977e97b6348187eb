"""What the SageMaker endpoint constructs share, whatever the hosting mode.

`MultiModelEndpoint` and `SingleModelEndpoint` differ in their image, model
and model-data grants; the variant, the blue/green endpoint with alarm
rollback (deployment_config.py), the network placement and the execution role's runtime grants
(ECR token, endpoint logs and metrics, VPC network interfaces) are built here.
The helpers add resources directly to the construct they are given, so the
construct ids (and logical ids) stay those of the calling construct.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from aws_cdk import Aws, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deploy.guardrails import TrafficPolicy
from deploy_infra.constructs.deployment_config import deployment_config
from deploy_infra.nag import suppress

VARIANT_NAME = "AllTraffic"


class VariantEndpoint(Protocol):
    """What autoscaling needs of an endpoint construct (both constructs here have it)."""

    endpoint_name: str
    variant_name: str
    endpoint: sagemaker.CfnEndpoint


def endpoint_arn(scope: Construct, *, endpoint_name: str) -> str:
    """The ARN of the endpoint named `endpoint_name` in `scope`'s stack."""
    return Stack.of(scope).format_arn(
        service="sagemaker", resource="endpoint", resource_name=endpoint_name.lower()
    )


def registry_repository_arn(image_uri: str) -> str:
    """The ECR repository ARN of `<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`."""
    registry_account, _, rest = image_uri.partition(".dkr.ecr.")
    image_region = rest.split(".", 1)[0]
    repository = image_uri.split("/", 1)[1].split(":", 1)[0]
    return f"arn:{Aws.PARTITION}:ecr:{image_region}:{registry_account}:repository/{repository}"


def vpc_config(
    *, subnets: Sequence[ec2.ISubnet], security_group: ec2.ISecurityGroup
) -> sagemaker.CfnModel.VpcConfigProperty:
    return sagemaker.CfnModel.VpcConfigProperty(
        security_group_ids=[security_group.security_group_id],
        subnets=[subnet.subnet_id for subnet in subnets],
    )


def endpoint_config(
    scope: Construct,
    construct_id: str,
    *,
    model: sagemaker.CfnModel,
    instance_type: str,
    initial_instance_count: int,
    kms_key_id: str | None,
    data_capture_config: sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None = None,
    inference_ami_version: str | None = None,
    metrics_config: sagemaker.CfnEndpointConfig.MetricsConfigProperty | None = None,
) -> sagemaker.CfnEndpointConfig:
    """One production variant (`VARIANT_NAME`, all traffic) serving `model`, on the
    inference AMI the image's driver needs (None: SageMaker's default); `metrics_config`
    is what the endpoint publishes (deploy_infra.constructs.model_metrics)."""
    return sagemaker.CfnEndpointConfig(
        scope,
        construct_id,
        production_variants=[
            sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT_NAME,
                model_name=model.attr_model_name,
                instance_type=instance_type,
                initial_instance_count=initial_instance_count,
                initial_variant_weight=1.0,
                inference_ami_version=inference_ami_version,
            )
        ],
        kms_key_id=kms_key_id,
        data_capture_config=data_capture_config,
        metrics_config=metrics_config,
    )


def blue_green_endpoint(
    scope: Construct,
    construct_id: str,
    *,
    endpoint_name: str,
    config: sagemaker.CfnEndpointConfig,
    rollback_alarm_names: Sequence[str],
    rollout: TrafficPolicy,
) -> sagemaker.CfnEndpoint:
    """The endpoint: blue/green updates as `rollout` says, rolled back when the stage's
    `rollback_alarm_names` (or the alarms `rollout` adds) fire."""
    return sagemaker.CfnEndpoint(
        scope,
        construct_id,
        endpoint_name=endpoint_name,
        endpoint_config_name=config.attr_endpoint_config_name,
        deployment_config=deployment_config(rollout, stage_alarm_names=rollback_alarm_names),
    )


def endpoint_log_group_arns(endpoint_name: str) -> list[str]:
    """SageMaker's log group for `endpoint_name` and its streams (log-group names hold no ':')."""
    group = (
        f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
        f"log-group:/aws/sagemaker/Endpoints/{endpoint_name}"
    )
    return [group, f"{group}:*"]


def image_repository_arn(image_uri: str) -> str:
    """The ECR repository of `<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`."""
    registry_account, _, rest = image_uri.partition(".dkr.ecr.")
    image_region = rest.split(".", 1)[0]
    repository = image_uri.split("/", 1)[1].split(":", 1)[0]
    return f"arn:{Aws.PARTITION}:ecr:{image_region}:{registry_account}:repository/{repository}"


def runtime_statements(*, endpoint_name: str, vpc: bool = True) -> list[iam.PolicyStatement]:
    """The execution role's grants for running the container, whatever it serves.

    `vpc`: the Model has a VpcConfig, so SageMaker creates network interfaces
    with this role (a serverless endpoint has none).
    """
    statements = [
        iam.PolicyStatement(sid="EcrToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
        iam.PolicyStatement(
            sid="EndpointLogs",
            actions=[
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:DescribeLogStreams",
                "logs:PutLogEvents",
            ],
            # The endpoint's own log group and its streams: `<name>*` would also
            # match another stage's `<name>-staging`.
            resources=endpoint_log_group_arns(endpoint_name),
        ),
        iam.PolicyStatement(
            sid="EndpointMetrics",
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={
                "StringEquals": {
                    "cloudwatch:namespace": ["AWS/SageMaker", "/aws/sagemaker/Endpoints"]
                }
            },
        ),
    ]
    if not vpc:
        return statements
    return [
        *statements,
        iam.PolicyStatement(
            sid="EndpointNetworkInterfaces",
            actions=[
                "ec2:CreateNetworkInterface",
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeVpcs",
            ],
            resources=["*"],
        ),
    ]


def suppress_endpoint_logs(role: iam.Role, *, endpoint_name: str) -> None:
    """Accept the log-group wildcard of `runtime_statements` (cdk-nag IAM5)."""
    suppress(
        role,
        "IAM5",
        "execution-role-logs",
        applies_to=[
            "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:"
            f"log-group:/aws/sagemaker/Endpoints/{endpoint_name}:*"
        ],
    )
