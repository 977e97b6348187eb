"""`deploy up` asks Service Quotas for the stage's instance type before it creates anything.

moto answers SageMaker's quotas with NoSuchResource (it emulates only VPC quotas), so the
quota's answers below come from a botocore Stubber on a real service-quotas client, built from
botocore's service model (labelled STUBBED); the unknown case runs against the moto server.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from deploy.aws.quotas import ServiceQuotas, endpoint_quota_name
from deploy.aws.session import AwsSession
from deploy.config import load_settings
from deploy.errors import ConfigError
from deploy.hosting.capacity import InfraSpec
from deploy.lifecycle.aws_provider import AwsProvider


class _Session(AwsSession):
    """An AwsSession whose service-quotas client is the one given."""

    def __init__(self, client: Any) -> None:
        super().__init__("us-east-1")
        self._quotas = client

    def client(self, service: str, *, max_attempts: int = 5) -> Any:
        assert service == "service-quotas"
        return self._quotas


def _stubbed(pages: list[list[tuple[str, str, float]]]) -> tuple[ServiceQuotas, Stubber]:
    client = boto3.client(
        "service-quotas",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    stubber = Stubber(client)  # STUBBED: answers as the service model defines them
    for index, quotas in enumerate(pages):
        response: dict[str, Any] = {
            "Quotas": [
                {"ServiceCode": "sagemaker", "QuotaName": n, "QuotaCode": c, "Value": v}
                for n, c, v in quotas
            ]
        }
        expected: dict[str, Any] = {"ServiceCode": "sagemaker"}
        if index:
            expected["NextToken"] = f"page{index}"
        if index + 1 < len(pages):
            response["NextToken"] = f"page{index + 1}"
        stubber.add_response("list_service_quotas", response, expected)
    stubber.activate()
    return ServiceQuotas(_Session(client)), stubber


def _provider(quotas: ServiceQuotas) -> AwsProvider:
    settings = load_settings(instance_type="ml.g5.xlarge", infra={"account": "123456789012"})
    provider = AwsProvider.__new__(AwsProvider)
    provider.settings = settings
    provider.clients = type("Clients", (), {"quotas": quotas})()  # type: ignore[assignment]
    return provider


def _spec(initial: int, maximum: int) -> InfraSpec:
    return InfraSpec("ml.g5.xlarge", initial, initial, maximum)


def test_the_quota_is_found_across_pages() -> None:
    name = endpoint_quota_name("ml.g5.xlarge")
    quotas, stubber = _stubbed(
        [[("ml.m5.xlarge for endpoint usage", "L-1", 8)], [(name, "L-G5", 2)]]
    )
    quota = quotas.endpoint_instances("ml.g5.xlarge").quota
    assert quota is not None and (quota.code, quota.value) == ("L-G5", 2)
    stubber.assert_no_pending_responses()


def test_a_zero_quota_stops_the_plan_before_anything_is_created() -> None:
    quotas, _ = _stubbed([[(endpoint_quota_name("ml.g5.xlarge"), "L-G5", 0)]])
    with pytest.raises(ConfigError) as caught:
        _provider(quotas)._check_quota(_spec(1, 2))
    assert "may run 0 ml.g5.xlarge" in caught.value.message
    assert "Nothing was created" in caught.value.message
    assert caught.value.fix and "--quota-code L-G5 --desired-value 2" in caught.value.fix


def test_a_quota_below_the_autoscaling_maximum_is_a_plan_note() -> None:
    quotas, _ = _stubbed([[(endpoint_quota_name("ml.g5.xlarge"), "L-G5", 2)]])
    (note,) = _provider(quotas)._check_quota(_spec(1, 4))
    assert "autoscaling stops at 2" in note
    quotas, _ = _stubbed([[(endpoint_quota_name("ml.g5.xlarge"), "L-G5", 4)]])
    assert _provider(quotas)._check_quota(_spec(1, 4)) == ()


@pytest.mark.moto
def test_an_emulator_without_sagemaker_quotas_is_an_unknown_quota(
    moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    quotas = ServiceQuotas(AwsSession("us-east-1"))
    answer = quotas.endpoint_instances("ml.g5.xlarge")
    assert answer.quota is None and answer.unknown_because
    (note,) = _provider(quotas)._check_quota(_spec(1, 2))
    assert "could not be read" in note
