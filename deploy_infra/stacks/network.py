"""The network stack."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_s3 as s3
from constructs import Construct

from deploy_infra.constructs.network import PrivateNetwork


class NetworkStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc_id: str | None,
        model_bucket: s3.IBucket,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = PrivateNetwork(self, "Network", vpc_id=vpc_id, model_bucket=model_bucket)
        CfnOutput(self, "VpcId", value=self.network.vpc.vpc_id)
