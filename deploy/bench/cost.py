"""Cost per million inferences: the instances' hourly price over what they served.

    cost per million = hourly price x instance count / (inferences per second x 3600) x 1e6

An inference is one item (a batch row), so a request of batch 8 counts 8.
Prices come from the dated table `deploy up` prices its plans with
(`deploy.lifecycle.prices`); like there, the figure is an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deploy.errors import BenchError


@dataclass(frozen=True)
class Pricing:
    instance_type: str
    instance_count: int
    region: str
    hourly_per_instance: float
    as_of: str
    source: str  # where the instance type and count came from (a stage, flags)

    @property
    def hourly(self) -> float:
        return self.hourly_per_instance * self.instance_count

    def per_million(self, items_per_s: float) -> float | None:
        if items_per_s <= 0:
            return None
        return round(self.hourly / (items_per_s * 3600) * 1e6, 4)

    def describe(self) -> str:
        return (
            f"{self.instance_count} x {self.instance_type} at ${self.hourly_per_instance:.3f}/h "
            f"({self.region}, {self.source}; estimate as of {self.as_of})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "region": self.region,
            "hourly_per_instance_usd": self.hourly_per_instance,
            "hourly_usd": round(self.hourly, 4),
            "as_of": self.as_of,
            "source": self.source,
            "estimate": True,
        }


def pricing_for(instance_type: str, count: int, region: str, *, source: str) -> Pricing:
    """The price of `count` x `instance_type` in `region`; a clear error if the table has none."""
    from deploy.lifecycle.prices import estimate, supported_instance_types

    found = estimate(region, instance_type, min_instances=count, max_instances=count)
    if found.hourly_per_instance is None:
        known = supported_instance_types()
        hint = (
            f"the table has {instance_type} in other regions"
            if instance_type in known
            else "check the instance type (deploy/catalogue/prices.json lists the priced ones)"
        )
        raise BenchError(
            f"no price for {instance_type} in {region} in the price table",
            where=source,
            fix=hint,
        )
    return Pricing(
        instance_type=instance_type,
        instance_count=count,
        region=region,
        hourly_per_instance=found.hourly_per_instance,
        as_of=found.as_of,
        source=source,
    )
