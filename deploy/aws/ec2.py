"""EC2 lookups the CDK CLI would otherwise make (availability zones for synth)."""

from __future__ import annotations

from typing import Any

from deploy.aws.session import AwsSession, aws_call


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
