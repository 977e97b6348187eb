"""EC2 lookups the CDK CLI would otherwise make (availability zones, S3's prefix list)."""

from __future__ import annotations

from typing import Any

from deploy.aws.session import AwsSession, aws_call
from deploy.errors import AwsError


def availability_zones(session: AwsSession) -> list[str]:
    """Names of the region's available zones, sorted (what `cdk synth` puts in context)."""
    client: Any = session.client("ec2")  # (no EC2 type stubs installed here)
    with aws_call("ec2:DescribeAvailabilityZones", where=session.region):
        zones = client.describe_availability_zones(
            Filters=[{"Name": "state", "Values": ["available"]}]
        )["AvailabilityZones"]
    return sorted(
        zone["ZoneName"]
        for zone in zones
        if zone.get("ZoneType", "availability-zone") == "availability-zone"
    )


def s3_prefix_list_id(session: AwsSession) -> str:
    """The id of the AWS-managed prefix list of S3's addresses in the session's region."""
    client: Any = session.client("ec2")
    name = f"com.amazonaws.{session.region}.s3"
    with aws_call("ec2:DescribeManagedPrefixLists", where=session.region):
        found = client.describe_managed_prefix_lists(
            Filters=[{"Name": "prefix-list-name", "Values": [name]}]
        )["PrefixLists"]
    if len(found) != 1:
        raise AwsError(
            f"expected one managed prefix list named {name}, found {len(found)}",
            where=session.region,
            fix="check that the region offers S3 gateway endpoints",
        )
    return str(found[0]["PrefixListId"])


def cdk_lookup_context(session: AwsSession, account: str) -> dict[str, Any]:
    """The context values the CDK CLI's lookups would give the app for this account and region.

    Keys are the CDK's own (a lookup whose key changes with a CDK upgrade is
    reported as missing context by the synthesis, never deployed as a dummy).
    """
    region = session.region
    prefix_list = (
        f"cc-api-provider:account={account}:expectedMatchCount=exactly-one:"
        "propertiesToReturn.0=PrefixListId:"
        f"propertyMatch.PrefixListName=com.amazonaws.{region}.s3:region={region}:"
        "typeName=AWS$:$:EC2$:$:PrefixList"
    )
    return {
        f"availability-zones:account={account}:region={region}": availability_zones(session),
        prefix_list: [{"PrefixListId": s3_prefix_list_id(session)}],
    }
