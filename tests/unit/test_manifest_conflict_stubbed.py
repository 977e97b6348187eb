"""Conditional manifest writes meet S3's answers moto never gives: STUBBED S3.

LABEL: S3's side here is a botocore Stubber, not S3. The moto server enforces
If-Match and If-None-Match (412 PreconditionFailed; tests/functional/
test_release_canary.py races real writes there), but never answers 409
ConditionalRequestConflict, which S3 returns when two conditional writes to one
key are in flight at once, and its If-Match on a deleted key answers a 404 only
as real S3 does. The answers are shaped by botocore's S3 model (the Stubber
refuses others). Under test is ours: the request carries the condition, and
each losing answer becomes the one clear error with nothing written.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from deploy.aws.s3 import ConditionFailedError, ModelStore
from deploy.aws.session import AwsCallError, AwsSession
from deploy.config import load_settings
from deploy.hosting import mode_for
from deploy.lifecycle.aws_clients import AwsClients
from deploy.lifecycle.aws_stage import AwsStage, StoreLocation
from deploy.lifecycle.manifest_writes import CONFLICT, ManifestBasis, ManifestConflictError

BUCKET = "store"
KEY = "models/manifest.json"


class StubbedSession(AwsSession):
    def __init__(self, client: Any) -> None:
        super().__init__("us-east-1")
        self.s3 = client

    def client(self, service: str, *, max_attempts: int = 5) -> Any:
        assert service == "s3"
        return self.s3


class StubbedStage(AwsStage):
    """The stage's model store found without CloudFormation (its stack is not under test)."""

    def store_location(self) -> StoreLocation | None:
        return StoreLocation(BUCKET, "models/")


def stage_with(client: Any) -> AwsStage:
    session = StubbedSession(client)
    settings = load_settings(stage="stub", instance_type="ml.m5.xlarge")
    clients: Any = AwsClients(
        session=session,
        stacks=None,
        sagemaker=None,
        autoscaling=None,
        cloudwatch=None,
        quotas=None,
        store=lambda bucket: ModelStore(session, bucket),
        parameter=lambda name: None,
        lookup_context=lambda account: {},
    )
    return StubbedStage(settings, clients, mode_for(settings))


def s3_client() -> Any:
    return boto3.Session(
        aws_access_key_id="stub", aws_secret_access_key="stub", region_name="us-east-1"
    ).client("s3")


@pytest.mark.parametrize(
    ("basis", "condition", "code", "status"),
    [
        ('"etag-read"', {"IfMatch": '"etag-read"'}, "ConditionalRequestConflict", 409),
        ('"etag-read"', {"IfMatch": '"etag-read"'}, "PreconditionFailed", 412),
        ('"etag-read"', {"IfMatch": '"etag-read"'}, "NoSuchKey", 404),  # deleted since read
        (None, {"IfNoneMatch": "*"}, "PreconditionFailed", 412),
    ],
)
def test_each_losing_answer_is_the_conflict_error(
    basis: str | None, condition: dict[str, str], code: str, status: int
) -> None:
    client = s3_client()
    stage = stage_with(client)
    stage.manifest_basis = ManifestBasis(basis)
    with Stubber(client) as stub:
        stub.add_client_error(
            "put_object",
            service_error_code=code,
            http_status_code=status,
            expected_params={
                "Bucket": BUCKET,
                "Key": KEY,
                "Body": b"{}\n",
                "ContentType": "application/json",
                "ChecksumSHA256": ANY,
                "Metadata": ANY,
                **condition,
            },
        )
        with pytest.raises(ManifestConflictError) as lost:
            stage.publish_manifest(b"{}\n")
        stub.assert_no_pending_responses()
    assert lost.value.message == CONFLICT
    assert f"s3://{BUCKET}/{KEY}" in str(lost.value)
    assert stage.manifest_basis == ManifestBasis(basis)  # still based on the read


def test_other_failures_are_not_called_conflicts() -> None:
    client = s3_client()
    store = ModelStore(StubbedSession(client), BUCKET)
    with Stubber(client) as stub:
        stub.add_client_error("put_object", service_error_code="AccessDenied", http_status_code=403)
        with pytest.raises(AwsCallError) as denied:
            store.put_bytes(KEY, b"{}", content_type="application/json", if_match='"e"')
    assert not isinstance(denied.value, ConditionFailedError)
    assert denied.value.code == "AccessDenied"
