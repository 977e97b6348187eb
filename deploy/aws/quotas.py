"""Service Quotas (read only): how many instances of a type the account may run as endpoints,
and whether SageMaker offers the type in the region at all.

SageMaker names its hosting quotas "<instance type> for endpoint usage". A new
account has 0 for most GPU types, and a CloudFormation stack that asks for
more fails after minutes with the stack rolled back; `deploy up` asks first.

Service Quotas has one such quota per instance type SageMaker hosts in the
region. `ListServiceQuotas` returns the account's applied values, and only
those it has ("if the applied quota value is not available for a quota, the
quota is not retrieved"), so a type missing there is looked up among the
region's defaults (`ListAWSDefaultServiceQuotas`). A type missing from both
lists, while the defaults do list other types' endpoint quotas, is not
offered for endpoints in that region: that is `not_offered`, which differs
from a quota of 0 (offered, but the account may run none).

The answer is unknown where the service does not say: an account without
`servicequotas:ListServiceQuotas` / `ListAWSDefaultServiceQuotas` (access
denied), a service error, or an emulator without SageMaker's quotas (no
endpoint quota listed at all). SageMaker still enforces the quota, so the plan
then says it could not check and why, instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deploy.aws.session import AwsCallError, AwsSession, aws_call

SERVICE_CODE = "sagemaker"
ENDPOINT_QUOTA_SUFFIX = " for endpoint usage"
# Failures that are the caller's to fix, whatever the call: raised, not an unknown quota.
_RAISED = frozenset({"NoCredentials", "NoRegion", "ExpiredToken", "ExpiredTokenException"})
_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})


@dataclass(frozen=True)
class Quota:
    name: str
    code: str
    value: float
    default: bool = False  # the region's default value (the account has no applied value)


@dataclass(frozen=True)
class QuotaAnswer:
    """One of: the quota; `not_offered` (the region lists no such quota, and lists
    `offered`, the types it does host); or neither, `unknown_because` saying why."""

    quota: Quota | None  # None: not offered, or not readable (`unknown_because`)
    unknown_because: str | None = None
    not_offered: bool = False
    offered: tuple[str, ...] = ()  # instance types with an endpoint quota in the region


def endpoint_quota_name(instance_type: str) -> str:
    return f"{instance_type}{ENDPOINT_QUOTA_SUFFIX}"


class _UnknownError(Exception):
    def __init__(self, because: str) -> None:
        super().__init__(because)
        self.because = because


class ServiceQuotas:
    def __init__(self, session: AwsSession) -> None:
        self._session = session

    def endpoint_instances(self, instance_type: str) -> QuotaAnswer:
        """The account's quota of `instance_type` instances across endpoints, whether
        the region offers the type for endpoints, or why neither is known."""
        # One attempt: the answer only advises (SageMaker enforces the quota itself).
        client: Any = self._session.client("service-quotas", max_attempts=1)
        wanted = endpoint_quota_name(instance_type)
        try:
            applied = self._find(client, "ListServiceQuotas", wanted)
            if isinstance(applied, Quota):
                return QuotaAnswer(applied)
            defaults = self._find(client, "ListAWSDefaultServiceQuotas", wanted)
        except _UnknownError as unknown:
            return QuotaAnswer(None, unknown.because)
        if isinstance(defaults, Quota):
            return QuotaAnswer(Quota(defaults.name, defaults.code, defaults.value, default=True))
        offered = tuple(sorted(set(applied) | set(defaults)))
        if not offered:
            return QuotaAnswer(
                None, f"Service Quotas lists no SageMaker endpoint quotas in {self._region}"
            )
        return QuotaAnswer(None, not_offered=True, offered=offered)

    @property
    def _region(self) -> str:
        return str(self._session.region)

    def _find(self, client: Any, action: str, wanted: str) -> Quota | list[str]:
        """The quota named `wanted` from one list, or the instance types the list names."""
        method = (
            client.list_service_quotas
            if action == "ListServiceQuotas"
            else client.list_aws_default_service_quotas
        )
        types: list[str] = []
        token: str | None = None
        try:
            with aws_call(f"servicequotas:{action}", where=f"SageMaker quotas in {self._region}"):
                while True:
                    page = method(
                        ServiceCode=SERVICE_CODE, **({"NextToken": token} if token else {})
                    )
                    for quota in page.get("Quotas", []):
                        name = str(quota.get("QuotaName", ""))
                        if name == wanted:
                            return Quota(wanted, quota["QuotaCode"], float(quota["Value"]))
                        if name.startswith("ml.") and name.endswith(ENDPOINT_QUOTA_SUFFIX):
                            types.append(name.removesuffix(ENDPOINT_QUOTA_SUFFIX))
                    token = page.get("NextToken")
                    if not token:
                        return types
        except AwsCallError as exc:
            if exc.code in _RAISED:
                raise
            if exc.code in _DENIED:
                raise _UnknownError(
                    f"access denied to servicequotas:{action}; grant it to check before "
                    "anything is created"
                ) from None
            # A non-AWS answer (an emulator's HTML 500) says nothing worth repeating.
            first = exc.message.splitlines()[0] if exc.message else exc.code
            said = f"Service Quotas answered {exc.code}" if "<" in first else first[:200]
            raise _UnknownError(said) from None
