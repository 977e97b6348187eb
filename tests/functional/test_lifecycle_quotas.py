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


Page = list[tuple[str, str, float]]


def _client() -> Any:
    return boto3.client(
        "service-quotas",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _add_pages(stubber: Stubber, method: str, pages: list[Page]) -> None:
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
        stubber.add_response(method, response, expected)


def _stubbed(
    pages: list[Page], defaults: list[Page] | None = None
) -> tuple[ServiceQuotas, Stubber]:
    """STUBBED: `pages` answer ListServiceQuotas, `defaults` ListAWSDefaultServiceQuotas,
    as botocore's service model defines the answers."""
    client = _client()
    stubber = Stubber(client)
    _add_pages(stubber, "list_service_quotas", pages)
    if defaults is not None:
        _add_pages(stubber, "list_aws_default_service_quotas", defaults)
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


def test_a_type_the_region_does_not_list_is_not_offered_there() -> None:
    # The account has applied values for two types; the region's defaults list others,
    # but no ml.g5.xlarge: SageMaker does not host it there (not a quota of 0).
    quotas, stubber = _stubbed(
        [[("ml.m5.xlarge for endpoint usage", "L-M5", 8)]],
        defaults=[
            [("ml.g4dn.xlarge for endpoint usage", "L-G4", 0)],
            [("ml.g5.2xlarge for endpoint usage", "L-G52", 0), ("Number of endpoints", "L-E", 5)],
        ],
    )
    answer = quotas.endpoint_instances("ml.g5.xlarge")
    assert answer.not_offered and answer.quota is None and answer.unknown_because is None
    assert answer.offered == ("ml.g4dn.xlarge", "ml.g5.2xlarge", "ml.m5.xlarge")
    stubber.assert_no_pending_responses()
    quotas, _ = _stubbed(
        [[("ml.m5.xlarge for endpoint usage", "L-M5", 8)]],
        defaults=[[("ml.g5.2xlarge for endpoint usage", "L-G52", 0)]],
    )
    with pytest.raises(ConfigError) as caught:
        _provider(quotas)._check_quota(_spec(1, 2))
    error = caught.value
    assert "ml.g5.xlarge is not offered for SageMaker endpoints in us-east-1" in error.message
    assert "Nothing was created" in error.message
    assert error.where == "instance_type"
    assert error.fix and "region" in error.fix and "ml.g5.2xlarge" in error.fix


def test_a_type_with_only_a_default_value_has_that_quota() -> None:
    # No applied value for the account: the region's default (0) is the quota.
    name = endpoint_quota_name("ml.g5.xlarge")
    quotas, stubber = _stubbed(
        [[("ml.m5.xlarge for endpoint usage", "L-M5", 8)]], defaults=[[(name, "L-G5", 0)]]
    )
    answer = quotas.endpoint_instances("ml.g5.xlarge")
    assert answer.quota is not None and answer.quota.default and answer.quota.value == 0
    assert not answer.not_offered
    stubber.assert_no_pending_responses()
    quotas, _ = _stubbed([[]], defaults=[[(name, "L-G5", 0)]])
    with pytest.raises(ConfigError) as caught:
        _provider(quotas)._check_quota(_spec(1, 2))
    assert "may run 0 ml.g5.xlarge" in caught.value.message


def test_access_denied_is_an_unknown_quota_not_a_missing_type() -> None:
    client = _client()
    stubber = Stubber(client)  # STUBBED: the error as IAM answers a missing permission
    for _ in range(2):  # two plans' worth
        stubber.add_client_error(
            "list_service_quotas",
            service_error_code="AccessDeniedException",
            service_message="User is not authorized to perform: servicequotas:ListServiceQuotas",
            http_status_code=403,
        )
    stubber.activate()
    quotas = ServiceQuotas(_Session(client))
    answer = quotas.endpoint_instances("ml.g5.xlarge")
    assert answer.quota is None and not answer.not_offered
    assert answer.unknown_because and "access denied" in answer.unknown_because
    (note,) = _provider(quotas)._check_quota(_spec(1, 2))
    assert "could not be read (access denied to servicequotas:ListServiceQuotas" in note


def test_lists_without_endpoint_quotas_say_nothing_about_the_type() -> None:
    # Neither list names any endpoint quota (an emulator, a partition without them):
    # that is no evidence that the type is missing.
    quotas, _ = _stubbed([[]], defaults=[[("Number of endpoints", "L-E", 5)]])
    answer = quotas.endpoint_instances("ml.g5.xlarge")
    assert answer.quota is None and not answer.not_offered
    assert answer.unknown_because and "lists no SageMaker endpoint quotas" in answer.unknown_because
