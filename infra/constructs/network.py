"""A private network for SageMaker endpoints: isolated subnets, VPC endpoints, flow logs."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

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

    def __init__(self, scope: Construct, construct_id: str, *, vpc_id: str | None = None) -> None:
        super().__init__(scope, construct_id)
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
        # The isolated subnets route nothing outside the VPC but S3 (gateway
        # endpoint), whose address ranges are a managed prefix list that cannot be
        # resolved at synth time; HTTPS to any address therefore reaches only S3.
        self.endpoint_security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "S3 through the gateway endpoint"
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
            self.vpc.add_interface_endpoint(
                name,
                service=service,
                private_dns_enabled=True,
                open=False,
                security_groups=[self.interface_endpoint_security_group],
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
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
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
            },
        )
        flow_log_group = logs.LogGroup(
            self,
            "FlowLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        return vpc
