"""The model store: a KMS-encrypted, versioned S3 bucket with access logs."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from deploy_infra.constructs.monitoring import alarm_arns


class ModelStore(Construct):
    """Bucket + customer-managed key for model archives under `prefix`.

    Attributes: `key`, `bucket`, `access_logs`, `prefix`, `model_data_url`
    (the `s3://bucket/prefix/` SageMaker's multi-model container reads).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        prefix: str,
        endpoint_name: str,
        also_endpoints: Sequence[str] = (),
        bucket_name: str | None = None,
        kms_key_arn: str | None = None,
        noncurrent_days: int = 30,
    ) -> None:
        super().__init__(scope, construct_id)
        self.prefix = prefix
        if kms_key_arn is not None:
            self.key: kms.IKey = kms.Key.from_key_arn(self, "Key", kms_key_arn)
        else:
            key = kms.Key(
                self,
                "Key",
                description="deploy: model store, endpoint volumes, alarm topic",
                enable_key_rotation=True,
                removal_policy=RemovalPolicy.RETAIN,
            )
            # CloudWatch alarms publish to the encrypted SNS topic with this key:
            # this stage's alarms only, in this account (no confused deputy).
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="EndpointAlarmsEncrypt",
                    principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                    actions=["kms:Decrypt", "kms:GenerateDataKey"],
                    resources=["*"],
                    conditions={
                        "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
                        "ArnEquals": {
                            "aws:SourceArn": [
                                arn
                                for name in (endpoint_name, *also_endpoints)
                                for arn in alarm_arns(self, endpoint_name=name)
                            ]
                        },
                    },
                )
            )
            self.key = key

        # S3 server access logs cannot be delivered to an SSE-KMS bucket.
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="model-store/",
            lifecycle_rules=[
                # Archive names change with their content, so superseded versions
                # only matter for a short rollback window.
                s3.LifecycleRule(
                    id="expire-superseded-archives",
                    noncurrent_version_expiration=Duration.days(noncurrent_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.model_data_url = f"s3://{self.bucket.bucket_name}/{prefix}"

    def prefix_arn(self) -> str:
        return self.bucket.arn_for_objects(f"{self.prefix}*")
