"""SageMaker control plane: endpoints and endpoint configs (read-mostly).

The endpoint itself is owned by the CloudFormation stack; this module reads
what is serving, and deletes endpoint configs that no stack owns any more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deploy.aws.endpoint_updates import shift_progress
from deploy.aws.session import AwsCallError, AwsSession, aws_call

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


@dataclass(frozen=True)
class ServerlessConfig:
    """A serverless variant's capacity (it has no instance type or count)."""

    memory_mb: int
    max_concurrency: int
    provisioned_concurrency: int | None = None


@dataclass(frozen=True)
class Variant:
    name: str
    instance_type: str  # "" for a serverless variant
    desired_count: int
    current_count: int
    serverless: ServerlessConfig | None = None


def _serverless(config: Any) -> ServerlessConfig | None:
    if not isinstance(config, dict) or "MemorySizeInMB" not in config:
        return None
    provisioned = config.get("ProvisionedConcurrency")
    return ServerlessConfig(
        memory_mb=int(config["MemorySizeInMB"]),
        max_concurrency=int(config.get("MaxConcurrency", 0)),
        provisioned_concurrency=int(provisioned) if provisioned is not None else None,
    )


@dataclass(frozen=True)
class EndpointState:
    name: str
    status: str
    config_name: str
    failure_reason: str
    variants: tuple[Variant, ...]
    shift: str = ""  # an update in flight (deploy.aws.endpoint_updates), "" when none

    @property
    def in_service(self) -> bool:
        return self.status == "InService"


@dataclass(frozen=True)
class EndpointConfigInfo:
    name: str
    variants: tuple[Variant, ...]


class SageMaker:
    def __init__(self, session: AwsSession) -> None:
        self._session = session

    @property
    def _sm(self) -> SageMakerClient:
        client: SageMakerClient = self._session.client("sagemaker")
        return client

    def endpoint(self, name: str) -> EndpointState | None:
        try:
            with aws_call("sagemaker:DescribeEndpoint", where=f"endpoint {name}"):
                response = self._sm.describe_endpoint(EndpointName=name)
        except AwsCallError as exc:
            if exc.code == "ValidationException" and "not" in exc.message.lower():
                return None
            raise
        config = self.endpoint_config(response["EndpointConfigName"])
        configured = {v.name: v for v in config.variants} if config else {}
        variants = tuple(
            Variant(
                name=item["VariantName"],
                instance_type=getattr(configured.get(item["VariantName"]), "instance_type", ""),
                desired_count=int(item.get("DesiredInstanceCount", 0)),
                current_count=int(item.get("CurrentInstanceCount", 0)),
                serverless=_serverless(item.get("CurrentServerlessConfig"))
                or getattr(configured.get(item["VariantName"]), "serverless", None),
            )
            for item in response.get("ProductionVariants", [])
        )
        return EndpointState(
            name=name,
            status=response["EndpointStatus"],
            config_name=response["EndpointConfigName"],
            failure_reason=response.get("FailureReason", ""),
            variants=variants,
            shift=shift_progress(response),
        )

    def endpoint_config(self, name: str) -> EndpointConfigInfo | None:
        try:
            with aws_call("sagemaker:DescribeEndpointConfig", where=f"endpoint config {name}"):
                response = self._sm.describe_endpoint_config(EndpointConfigName=name)
        except AwsCallError as exc:
            if exc.code == "ValidationException":
                return None
            raise
        return EndpointConfigInfo(
            name=name,
            variants=tuple(
                Variant(
                    name=item["VariantName"],
                    instance_type=str(item.get("InstanceType", "")),
                    desired_count=int(item.get("InitialInstanceCount", 0)),
                    current_count=0,
                    serverless=_serverless(item.get("ServerlessConfig")),
                )
                for item in response["ProductionVariants"]
            ),
        )

    def endpoint_config_names(self) -> list[str]:
        names: list[str] = []
        with aws_call("sagemaker:ListEndpointConfigs"):
            paginator = self._sm.get_paginator("list_endpoint_configs")
            for page in paginator.paginate():
                names.extend(item["EndpointConfigName"] for item in page["EndpointConfigs"])
        return names
