"""The hourly price table shipped with the project (deploy/data/prices.json).

The table is dated and marked as an estimate; cost previews say so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from deploy.errors import ConfigError


@dataclass(frozen=True)
class CostEstimate:
    region: str
    instance_type: str
    hourly_per_instance: float | None  # None: not in the table
    min_instances: int
    max_instances: int
    as_of: str
    source: str

    @property
    def hourly_min(self) -> float | None:
        if self.hourly_per_instance is None:
            return None
        return round(self.hourly_per_instance * self.min_instances, 4)

    @property
    def hourly_max(self) -> float | None:
        if self.hourly_per_instance is None:
            return None
        return round(self.hourly_per_instance * self.max_instances, 4)

    def describe(self) -> str:
        if self.hourly_per_instance is None:
            return f"{self.instance_type} has no price in the table for {self.region}"
        low, high = self.hourly_min, self.hourly_max
        span = f"${low:.2f}/h" if low == high else f"${low:.2f}-{high:.2f}/h"
        return (
            f"{span} ({self.min_instances}-{self.max_instances} x {self.instance_type} "
            f"at ${self.hourly_per_instance:.3f}/h, {self.region}; estimate as of {self.as_of})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "instance_type": self.instance_type,
            "hourly_per_instance_usd": self.hourly_per_instance,
            "min_instances": self.min_instances,
            "max_instances": self.max_instances,
            "hourly_min_usd": self.hourly_min,
            "hourly_max_usd": self.hourly_max,
            "as_of": self.as_of,
            "estimate": True,
            "source": self.source,
        }


@cache
def price_table() -> dict[str, Any]:
    text = resources.files("deploy").joinpath("data/prices.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def estimate(
    region: str, instance_type: str, *, min_instances: int, max_instances: int
) -> CostEstimate:
    table = price_table()
    regions: dict[str, dict[str, float]] = table["regions"]
    if min_instances < 0 or max_instances < min_instances:
        raise ConfigError(
            f"instance counts {min_instances}..{max_instances} are not a range",
            where="infra.min_instance_count / infra.max_instance_count",
            fix="set min_instance_count <= max_instance_count",
        )
    price = regions.get(region, {}).get(instance_type)
    return CostEstimate(
        region=region,
        instance_type=instance_type,
        hourly_per_instance=price,
        min_instances=min_instances,
        max_instances=max_instances,
        as_of=str(table["as_of"]),
        source=str(table["source"]).split(" ", 1)[0],
    )


def supported_instance_types() -> set[str]:
    return {name for prices in price_table()["regions"].values() for name in prices}
