"""cdk-nag AwsSolutions findings reviewed and accepted, each with its specific reason.

Suppressions are attached where the resource is built (`suppress(...)`) and
name the exact wildcard they accept (`applies_to`), so a new wildcard is still
a finding. `REVIEWED` lists them all for the README and the tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import IConstruct

REVIEWED: dict[str, str] = {
    "execution-role-prefix": (
        "SageMaker's multi-model container reads any archive under the model-store prefix "
        "(TargetModel names are chosen per request); the grant is limited to that prefix"
    ),
    "execution-role-star": (
        "ecr:GetAuthorizationToken, cloudwatch:PutMetricData (conditioned on the SageMaker "
        "namespaces) and the ec2 network-interface calls SageMaker makes for VpcConfig do not "
        "support resource-level permissions"
    ),
    "execution-role-logs": (
        "SageMaker names the endpoint's log streams at run time inside "
        "/aws/sagemaker/Endpoints/<endpoint>; the grant is limited to that log group"
    ),
    "async-prefixes": (
        "SageMaker names asynchronous requests' answers and errors at run time, and "
        "clients name their requests by content; the grants are limited to the endpoint's "
        "input (read), output and failure (write) prefixes"
    ),
    "data-capture-prefix": (
        "SageMaker names data-capture objects by variant, date and request at run time; "
        "the write grant is limited to the endpoint's capture prefix"
    ),
    "python-runtime": (
        "the front door is pinned to python3.12 on purpose: a runtime bump is a reviewed "
        "change (the asset's compiled wheels are built for it: deploy_infra/lambda_bundle.py)"
    ),
    "canary-alarms-prefix": (
        "the canary-rollback function deletes the alarms of the canary it rolled back; their "
        "names are made per canary at release time, so the grant is limited to the endpoint's "
        "canary-alarm prefix"
    ),
    "python-runtime-rollback": (
        "the canary-rollback function is pinned to python3.12 with the front door: a runtime "
        "bump is a reviewed change for both"
    ),
}


def suppress(
    construct: IConstruct,
    rule: str,
    reviewed: str,
    *,
    applies_to: Sequence[str | RegexAppliesTo] | None = None,
) -> None:
    NagSuppressions.add_resource_suppressions(
        construct,
        [
            NagPackSuppression(
                id=f"AwsSolutions-{rule}",
                reason=REVIEWED[reviewed],
                applies_to=list(applies_to) if applies_to else None,
            )
        ],
        apply_to_children=True,
    )
