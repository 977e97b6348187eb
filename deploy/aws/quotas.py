"""Service Quotas (read only): how many instances of a type the account may run as endpoints.

SageMaker names its hosting quotas "<instance type> for endpoint usage". A new
account has 0 for most GPU types, and a CloudFormation stack that asks for
more fails after minutes with the stack rolled back; `deploy up` asks first.
The quota is unknown where the service does not say: an account without
`servicequotas:ListServiceQuotas`, a service error, or an emulator without
SageMaker's quotas. SageMaker still enforces it, so the plan then says it
could not check and why, instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deploy.aws.session import AwsCallError, AwsSession, aws_call

SERVICE_CODE = "sagemaker"
# Failures that are the caller's to fix, whatever the call: raised, not an unknown quota.
_RAISED = frozenset({"NoCredentials", "NoRegion", "ExpiredToken", "ExpiredTokenException"})


@dataclass(frozen=True)
class Quota:
    name: str
    code: str
    value: float


@dataclass(frozen=True)
class QuotaAnswer:
    quota: Quota | None  # None: not found, or not readable (`unknown_because`)
    unknown_because: str | None = None


def endpoint_quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


class ServiceQuotas:
    def __init__(self, session: AwsSession) -> None:
        self._session = session

    def endpoint_instances(self, instance_type: str) -> QuotaAnswer:
        """The account's quota of `instance_type` instances across endpoints, if known."""
        # One attempt: the answer only advises (SageMaker enforces the quota itself).
        client: Any = self._session.client("service-quotas", max_attempts=1)
        wanted = endpoint_quota_name(instance_type)
        token: str | None = None
        try:
            with aws_call(
                "servicequotas:ListServiceQuotas",
                where=f"SageMaker quotas in {self._session.region}",
            ):
                while True:
                    page = client.list_service_quotas(
                        ServiceCode=SERVICE_CODE, **({"NextToken": token} if token else {})
                    )
                    for quota in page.get("Quotas", []):
                        if quota.get("QuotaName") == wanted:
                            found = Quota(wanted, quota["QuotaCode"], float(quota["Value"]))
                            return QuotaAnswer(found)
                    token = page.get("NextToken")
                    if not token:
                        return QuotaAnswer(None, f"Service Quotas lists no '{wanted}'")
        except AwsCallError as exc:
            if exc.code in _RAISED:
                raise
            # A non-AWS answer (an emulator's HTML 500) says nothing worth repeating.
            first = exc.message.splitlines()[0] if exc.message else exc.code
            said = f"Service Quotas answered {exc.code}" if "<" in first else first[:200]
            return QuotaAnswer(None, said)
