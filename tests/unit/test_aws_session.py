"""The AWS boundary's error mapping and endpoint configuration (no network)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from botocore.stub import Stubber

from deploy.aws.session import AwsCallError, AwsSession, aws_call
from deploy.errors import AwsError, DeployError


def test_client_errors_name_where_what_and_a_fix() -> None:
    with pytest.raises(AwsCallError) as caught, aws_call("s3:GetObject", where="s3://b/k"):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetObject")
    error = caught.value
    assert isinstance(error, AwsError) and isinstance(error, DeployError)
    assert error.code == "AccessDenied"
    assert str(error).startswith("s3://b/k: s3:GetObject failed: AccessDenied: no")
    assert "grant" in (error.fix or "")


def test_missing_credentials_and_unreachable_endpoints_say_what_to_do() -> None:
    with pytest.raises(AwsCallError, match="no AWS credentials") as caught, aws_call("x"):
        raise NoCredentialsError()
    assert "AWS_PROFILE" in (caught.value.fix or "")
    with pytest.raises(AwsCallError, match="cannot reach") as caught, aws_call("x"):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    assert "AWS_ENDPOINT_URL" in (caught.value.fix or "")


def test_stubbed_client_error_goes_through_the_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    from deploy.aws.sagemaker import SageMaker

    session = AwsSession("us-east-1")
    client = session.client("sagemaker")
    with Stubber(client) as stub:
        stub.add_client_error(
            "describe_endpoint",
            service_error_code="ValidationException",
            service_message="Could not find endpoint 'ep'.",
        )
        assert SageMaker(session).endpoint("ep") is None  # absent is not an error
        stub.add_client_error(
            "describe_endpoint", service_error_code="ThrottlingException", service_message="slow"
        )
        with pytest.raises(AwsCallError, match="endpoint ep: sagemaker:DescribeEndpoint"):
            SageMaker(session).endpoint("ep")


def test_endpoint_urls_come_from_boto3s_own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5999")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:6001")
    session = AwsSession("eu-west-1")
    assert session.client("cloudformation").meta.endpoint_url == "http://127.0.0.1:5999"
    assert session.client("s3").meta.endpoint_url == "http://127.0.0.1:6001"
    assert session.client("s3") is session.client("s3")  # cached
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    fresh = AwsSession("eu-west-1")
    assert (
        fresh.client("sagemaker").meta.endpoint_url
        == "https://api.sagemaker.eu-west-1.amazonaws.com"
    )
