"""The model-store stack: the bucket SageMaker reads archives from, and its key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from deploy_infra.constructs.model_store import ModelStore


class ModelStoreStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        prefix: str,
        endpoint_name: str,
        bucket_name: str | None,
        also_endpoints: Sequence[str] = (),
        kms_key_arn: str | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.store = ModelStore(
            self,
            "ModelStore",
            prefix=prefix,
            endpoint_name=endpoint_name,
            also_endpoints=also_endpoints,
            bucket_name=bucket_name,
            kms_key_arn=kms_key_arn,
        )
        CfnOutput(self, "ModelBucket", value=self.store.bucket.bucket_name)
        CfnOutput(self, "ModelPrefix", value=prefix)
        CfnOutput(self, "ModelDataUrl", value=self.store.model_data_url)
        CfnOutput(self, "KmsKeyArn", value=self.store.key.key_arn)
