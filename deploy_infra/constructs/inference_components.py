"""A SageMaker endpoint of inference components: one per model, each scaled on its own.

The endpoint config holds the instances (`ManagedInstanceScaling`, minimum 0
allowed) and no model: the execution role, VPC and network isolation sit on the
config. Each `AWS::SageMaker::InferenceComponent` runs the SageMaker Triton image
in single-model mode on its model's archive, with `ComputeResourceRequirements`
and a copy count that Application Auto Scaling tracks on invocations per copy.
A component whose minimum is 0 copies also gets the scale-from-zero pair AWS
documents: an alarm on `NoCapacityInvocationFailures` and a step policy adding a copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deploy.hosting.component_sizing import ComponentSpec, component_name
from deploy_infra.constructs.autoscaling import SAGEMAKER_AUTOSCALING_ROLE
from deploy_infra.constructs.model_metrics import TRITON_METRICS_ENV, metrics_config
from deploy_infra.constructs.sagemaker_endpoint import (
    VARIANT_NAME,
    endpoint_arn,
    registry_repository_arn,
    runtime_statements,
    suppress_endpoint_logs,
)
from deploy_infra.nag import suppress

COPY_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"


class ComponentsEndpoint(Construct):
    """Execution role, EndpointConfig (no model), Endpoint, and one component per spec.

    `components` maps a model's name to its `CfnInferenceComponent`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        image_uri: str,
        instance_type: str,
        min_instance_count: int,
        initial_instance_count: int,
        max_instance_count: int,
        bucket: s3.IBucket,
        archive_keys: dict[str, str],
        key: kms.IKey,
        encrypt_volume: bool,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        specs: Sequence[ComponentSpec],
        inference_ami_version: str | None = None,
        detailed_observability: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role for inference components of {endpoint_name}",
            inline_policies={
                "endpoint": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="ReadModelArchives",
                            actions=["s3:GetObject"],
                            resources=[bucket.arn_for_objects(k) for k in archive_keys.values()],
                        ),
                        iam.PolicyStatement(
                            sid="DecryptModels", actions=["kms:Decrypt"], resources=[key.key_arn]
                        ),
                        iam.PolicyStatement(
                            sid="PullTritonImage",
                            actions=[
                                "ecr:BatchCheckLayerAvailability",
                                "ecr:BatchGetImage",
                                "ecr:GetDownloadUrlForLayer",
                            ],
                            resources=[registry_repository_arn(image_uri)],
                        ),
                        *runtime_statements(endpoint_name=endpoint_name),
                    ]
                )
            },
        )
        suppress(self.role, "IAM5", "execution-role-star", applies_to=["Resource::*"])
        suppress_endpoint_logs(self.role, endpoint_name=endpoint_name)

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            execution_role_arn=self.role.role_arn,
            enable_network_isolation=True,
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(
                security_group_ids=[security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in subnets],
            ),
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    instance_type=instance_type,
                    initial_instance_count=initial_instance_count,
                    inference_ami_version=inference_ami_version,
                    managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                        status="ENABLED",
                        min_instance_count=min_instance_count,
                        max_instance_count=max_instance_count,
                    ),
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy="LEAST_OUTSTANDING_REQUESTS"
                    ),
                )
            ],
            kms_key_id=key.key_arn if encrypt_volume else None,
            metrics_config=metrics_config(detailed_observability),
        )
        # SageMaker checks the role when it creates the config.
        self.endpoint_config.node.add_dependency(self.role)
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
        )
        self.components: dict[str, sagemaker.CfnInferenceComponent] = {}
        for spec in specs:
            needs = spec.requirements
            component = sagemaker.CfnInferenceComponent(
                self,
                f"Component{len(self.components)}",
                inference_component_name=component_name(endpoint_name, spec.model),
                endpoint_name=self.endpoint.attr_endpoint_name,
                variant_name=VARIANT_NAME,
                specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                    container=sagemaker.CfnInferenceComponent.InferenceComponentContainerSpecificationProperty(
                        image=image_uri,
                        artifact_url=f"s3://{bucket.bucket_name}/{archive_keys[spec.model]}",
                        environment={
                            "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": spec.model,
                            **TRITON_METRICS_ENV,
                        },
                    ),
                    compute_resource_requirements=sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                        min_memory_required_in_mb=needs.memory_mb,
                        number_of_cpu_cores_required=needs.cpus,
                        number_of_accelerator_devices_required=needs.accelerators or None,
                    ),
                ),
                # One copy at creation, even for a minimum of 0: CloudFormation then
                # proves the model starts; autoscaling scales it in to 0 afterwards.
                runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                    copy_count=max(spec.min_copies, 1)
                ),
            )
            self.components[spec.model] = component

    @property
    def endpoint_arn(self) -> str:
        return endpoint_arn(self, endpoint_name=self.endpoint_name)


class ComponentAutoscaling(Construct):
    """Copy autoscaling of one component: target tracking on invocations per copy, and
    for a minimum of 0 the alarm and step policy that bring back the first copy."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        component: sagemaker.CfnInferenceComponent,
        spec: ComponentSpec,
        invocations_per_copy: float,
        scale_in_cooldown: Duration,
        scale_out_cooldown: Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        name = str(component.inference_component_name)  # set by ComponentsEndpoint
        role = iam.Role.from_role_arn(
            self,
            "ServiceLinkedRole",
            Stack.of(self).format_arn(
                service="iam", region="", resource="role", resource_name=SAGEMAKER_AUTOSCALING_ROLE
            ),
        )
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            role=role,
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"inference-component/{name}",
            scalable_dimension=COPY_DIMENSION,
            min_capacity=spec.min_copies,
            max_capacity=spec.max_copies,
        )
        self.target.node.add_dependency(component)
        self.target.scale_to_track_metric(
            "InvocationsPerCopy",
            target_value=invocations_per_copy,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_INVOCATIONS_PER_COPY,
            scale_in_cooldown=scale_in_cooldown,
            scale_out_cooldown=scale_out_cooldown,
        )
        self.scale_from_zero: cloudwatch.Alarm | None = None
        if not spec.scales_to_zero:
            return
        step = appscaling.StepScalingAction(
            self,
            "ScaleFromZero",
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            cooldown=Duration.minutes(1),
        )
        step.add_adjustment(adjustment=1, lower_bound=0)
        self.scale_from_zero = cloudwatch.Alarm(
            self,
            "NoCapacity",
            alarm_description=f"A request found no copy of {spec.model}: add one",
            metric=cloudwatch.Metric(
                namespace="AWS/SageMaker",
                metric_name=NO_CAPACITY_METRIC,
                dimensions_map={"InferenceComponentName": name},
                statistic="Sum",
                period=Duration.minutes(1),
            ),
            # AWS's example alarms above 1 failure a minute; at or above 1, a single
            # call wakes the model.
            threshold=1,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.MISSING,
        )
        self.scale_from_zero.add_alarm_action(cw_actions.ApplicationScalingAction(step))
