"""A private network for SageMaker endpoints: isolated subnets, VPC endpoints, flow logs.

Least privilege at the network edge: the S3 gateway endpoint reaches only the
model-store bucket, the CDK assets bucket and ECR's image-layer bucket; the
interface endpoints serve only this account's principals; the endpoint
instances may send HTTPS only to S3's prefix list and the interface
endpoints; flow logs are encrypted with a key of their own.
"""

from __future__ import annotations

from aws_cdk import Aws, DefaultStackSynthesizer, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from deploy_infra.constructs.log_key import LogKey

# Services an endpoint (and the platform acting for it) reaches without a NAT.
INTERFACE_ENDPOINTS: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "SageMakerRuntime": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME,
    "SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
}


class PrivateNetwork(Construct):
    """A VPC with private isolated subnets in two AZs and no route to the internet.

    Attributes: `vpc`, `subnets` (for SageMaker's VpcConfig), `endpoint_security_group`
    (for the SageMaker endpoint's instances).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model_bucket: s3.IBucket,
        vpc_id: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._model_bucket = model_bucket
        if vpc_id is not None:
            # An existing VPC is looked up once and cached in cdk.context.json; it is
            # expected to carry its own VPC endpoints and flow logs.
            self.vpc: ec2.IVpc = ec2.Vpc.from_lookup(self, "Vpc", vpc_id=vpc_id)
            self.subnets = self.vpc.select_subnets(
                subnet_type=ec2.SubnetType.PRIVATE_ISOLATED
                if self.vpc.isolated_subnets
                else ec2.SubnetType.PRIVATE_WITH_EGRESS
            )
        else:
            self.vpc = self._new_vpc()
            self.subnets = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)

        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="SageMaker endpoint: no inbound; HTTPS out to VPC endpoints and S3",
            allow_all_outbound=False,
        )
        # S3's address ranges are an AWS-managed prefix list, looked up per region
        # (the CDK CLI's context lookup; `deploy up` supplies it from EC2).
        s3_ranges = ec2.PrefixList.from_lookup(
            self, "S3PrefixList", prefix_list_name=f"com.amazonaws.{Stack.of(self).region}.s3"
        )
        self.endpoint_security_group.add_egress_rule(
            ec2.Peer.prefix_list(s3_ranges.prefix_list_id),
            ec2.Port.tcp(443),
            "S3 (model archives) through the gateway endpoint",
        )
        if vpc_id is None:
            self._add_interface_endpoints()
        else:
            self.endpoint_security_group.add_egress_rule(
                ec2.Peer.ipv4(self.vpc.vpc_cidr_block), ec2.Port.tcp(443), "VPC endpoints"
            )

    def _add_interface_endpoints(self) -> None:
        # One security group for all interface endpoints, admitting HTTPS from the
        # endpoint instances only.
        self.interface_endpoint_security_group = ec2.SecurityGroup(
            self,
            "InterfaceEndpointSecurityGroup",
            vpc=self.vpc,
            description="VPC interface endpoints: HTTPS from the SageMaker endpoint only",
            allow_all_outbound=False,
        )
        self.interface_endpoint_security_group.add_ingress_rule(
            self.endpoint_security_group, ec2.Port.tcp(443), "SageMaker endpoint instances"
        )
        self.endpoint_security_group.add_egress_rule(
            self.interface_endpoint_security_group, ec2.Port.tcp(443), "VPC interface endpoints"
        )
        for name, service in INTERFACE_ENDPOINTS.items():
            endpoint = self.vpc.add_interface_endpoint(
                name,
                service=service,
                private_dns_enabled=True,
                open=False,
                security_groups=[self.interface_endpoint_security_group],
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            )
            # Only this account's principals may call AWS through the endpoint.
            endpoint.add_to_policy(
                iam.PolicyStatement(
                    sid="ThisAccountOnly",
                    principals=[iam.AnyPrincipal()],
                    actions=["*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:PrincipalAccount": Aws.ACCOUNT_ID}},
                )
            )

    def _new_vpc(self) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.40.0.0/16"),
            max_azs=2,
            nat_gateways=0,
            create_internet_gateway=False,
            # Nothing runs in the default security group; restricting it would add a
            # custom-resource Lambda to every stack for no gain.
            restrict_default_security_group=False,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=20
                )
            ],
        )
        # Same construct path as the `gateway_endpoints` property would give it.
        s3_endpoint = vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        for statement in self._s3_endpoint_statements():
            s3_endpoint.add_to_policy(statement)
        log_key = LogKey(self, "FlowLogKey", names=("vpc-flow-logs",), purpose="VPC flow")
        flow_log_group = log_key.log_group(self, "FlowLogs", name="vpc-flow-logs")
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        return vpc

    def _s3_endpoint_statements(self) -> list[iam.PolicyStatement]:
        """What the S3 gateway endpoint may reach: the buckets the endpoint uses, no others."""
        assets = (
            f"cdk-{DefaultStackSynthesizer.DEFAULT_QUALIFIER}-assets-{Aws.ACCOUNT_ID}-{Aws.REGION}"
        )
        return [
            iam.PolicyStatement(
                sid="ModelStoreAndAssets",
                principals=[iam.AnyPrincipal()],
                actions=[
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListBucket",
                    "s3:GetBucketLocation",
                ],
                resources=[
                    self._model_bucket.bucket_arn,
                    self._model_bucket.arn_for_objects("*"),
                    f"arn:{Aws.PARTITION}:s3:::{assets}",
                    f"arn:{Aws.PARTITION}:s3:::{assets}/*",
                ],
            ),
            # Image layers of ECR (reached through the ECR interface endpoints) are
            # served from this AWS-owned bucket.
            iam.PolicyStatement(
                sid="EcrImageLayers",
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=[f"arn:{Aws.PARTITION}:s3:::prod-{Aws.REGION}-starport-layer-bucket/*"],
            ),
        ]
