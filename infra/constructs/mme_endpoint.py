"""A SageMaker multi-model endpoint serving the Triton image from a model-store prefix."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from cdk_nag import RegexAppliesTo
from constructs import Construct

from infra.nag import suppress

VARIANT_NAME = "AllTraffic"


@dataclass(frozen=True)
class TrafficShifting:
    """Blue/green update: shift `step_percent` of capacity per step, wait between steps."""

    step_percent: int = 50
    wait_s: int = 300
    termination_wait_s: int = 300
    timeout_s: int = 3600


class MultiModelEndpoint(Construct):
    """Execution role, Model (Mode MultiModel), EndpointConfig and Endpoint.

    Attributes: `role`, `model`, `endpoint_config`, `endpoint`, `endpoint_name`,
    `variant_name`. A single-model variant would sit beside this construct and
    share the role's shape, not this class.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        image_uri: str,
        instance_type: str,
        initial_instance_count: int,
        bucket: s3.IBucket,
        prefix: str,
        key: kms.IKey,
        encrypt_volume: bool,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        rollback_alarm_names: Sequence[str],
        data_capture_percent: int | None = None,
        traffic_shifting: TrafficShifting | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        shifting = traffic_shifting or TrafficShifting()
        capture_prefix = f"data-capture/{endpoint_name}/"

        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role for endpoint {endpoint_name}",
            inline_policies={
                "endpoint": _execution_policy(
                    endpoint_name=endpoint_name,
                    image_uri=image_uri,
                    bucket=bucket,
                    prefix=prefix,
                    key=key,
                    capture_prefix=capture_prefix if data_capture_percent else None,
                )
            },
        )

        suppress(
            self.role,
            "IAM5",
            "execution-role-prefix",
            applies_to=[RegexAppliesTo(regex=rf"/^Resource::<.+\.Arn>\/{re.escape(prefix)}\*$/")],
        )
        suppress(self.role, "IAM5", "execution-role-star", applies_to=["Resource::*"])
        if data_capture_percent:
            suppress(
                self.role,
                "IAM5",
                "data-capture-prefix",
                applies_to=[
                    RegexAppliesTo(regex=rf"/^Resource::<.+\.Arn>\/{re.escape(capture_prefix)}\*$/")
                ],
            )
        suppress(
            self.role,
            "IAM5",
            "execution-role-logs",
            applies_to=[
                "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:"
                f"log-group:/aws/sagemaker/Endpoints/{endpoint_name}*"
            ],
        )

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_uri,
                mode="MultiModel",
                model_data_url=f"s3://{bucket.bucket_name}/{prefix}",
            ),
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                security_group_ids=[security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in subnets],
            ),
            enable_network_isolation=True,
        )

        capture = None
        if data_capture_percent:
            capture = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                enable_capture=True,
                initial_sampling_percentage=data_capture_percent,
                destination_s3_uri=f"s3://{bucket.bucket_name}/{capture_prefix}",
                kms_key_id=key.key_arn,
                capture_options=[
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input"),
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output"),
                ],
            )
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=instance_type,
                    initial_instance_count=initial_instance_count,
                    initial_variant_weight=1.0,
                )
            ],
            kms_key_id=key.key_arn if encrypt_volume else None,
            data_capture_config=capture,
        )

        rollback = (
            sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[
                    sagemaker.CfnEndpoint.AlarmProperty(alarm_name=n) for n in rollback_alarm_names
                ]
            )
            if rollback_alarm_names
            else None
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            deployment_config=sagemaker.CfnEndpoint.DeploymentConfigProperty(
                blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                    traffic_routing_configuration=sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
                        type="LINEAR",
                        linear_step_size=sagemaker.CfnEndpoint.CapacitySizeProperty(
                            type="CAPACITY_PERCENT", value=shifting.step_percent
                        ),
                        wait_interval_in_seconds=shifting.wait_s,
                    ),
                    termination_wait_in_seconds=shifting.termination_wait_s,
                    maximum_execution_timeout_in_seconds=shifting.timeout_s,
                ),
                auto_rollback_configuration=rollback,
            ),
        )

    @property
    def endpoint_arn(self) -> str:
        return Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=self.endpoint_name.lower()
        )


def _execution_policy(
    *,
    endpoint_name: str,
    image_uri: str,
    bucket: s3.IBucket,
    prefix: str,
    key: kms.IKey,
    capture_prefix: str | None,
) -> iam.PolicyDocument:
    registry_account, _, rest = image_uri.partition(".dkr.ecr.")
    image_region = rest.split(".", 1)[0]
    repository = image_uri.split("/", 1)[1].split(":", 1)[0]
    statements = [
        iam.PolicyStatement(
            sid="ReadModelStorePrefix",
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{prefix}*")],
        ),
        iam.PolicyStatement(
            sid="ListModelStorePrefix",
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        ),
        iam.PolicyStatement(sid="DecryptModels", actions=["kms:Decrypt"], resources=[key.key_arn]),
        iam.PolicyStatement(
            sid="PullTritonImage",
            actions=[
                "ecr:BatchCheckLayerAvailability",
                "ecr:BatchGetImage",
                "ecr:GetDownloadUrlForLayer",
            ],
            resources=[
                f"arn:{Aws.PARTITION}:ecr:{image_region}:{registry_account}:repository/{repository}"
            ],
        ),
        iam.PolicyStatement(sid="EcrToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
        iam.PolicyStatement(
            sid="EndpointLogs",
            actions=[
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:DescribeLogStreams",
                "logs:PutLogEvents",
            ],
            resources=[
                f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
                f"log-group:/aws/sagemaker/Endpoints/{endpoint_name}*"
            ],
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
    if capture_prefix is not None:
        statements.append(
            iam.PolicyStatement(
                sid="WriteDataCapture",
                actions=["s3:PutObject"],
                resources=[bucket.arn_for_objects(f"{capture_prefix}*")],
            )
        )
        statements.append(
            iam.PolicyStatement(
                sid="EncryptDataCapture",
                actions=["kms:Encrypt", "kms:GenerateDataKey"],
                resources=[key.key_arn],
            )
        )
    return iam.PolicyDocument(statements=statements)
