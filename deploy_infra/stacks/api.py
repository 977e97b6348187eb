"""The API stack: the KServe v2 HTTP front door for one endpoint."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from deploy_infra.constructs.front_door import FrontDoor
from deploy_infra.constructs.model_store import ModelStore

MANIFEST_NAME = "manifest.json"


class ApiStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        store: ModelStore,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.front_door = FrontDoor(
            self,
            "FrontDoor",
            endpoint_name=endpoint_name,
            bucket=store.bucket,
            manifest_key=f"{store.prefix}{MANIFEST_NAME}",
            key=store.key,
        )
        CfnOutput(self, "ApiUrl", value=self.front_door.url)
        CfnOutput(self, "FunctionName", value=self.front_door.function.function_name)
