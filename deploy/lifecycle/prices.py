"""Cost previews from the instance catalogue's price table (deploy/catalogue/prices.json).

The table is dated and marked as an estimate; cost previews say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deploy.catalogue.instances import hourly_price, price_table
from deploy.errors import ConfigError
from deploy.hosting.capacity import InfraSpec


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


def estimate(
    region: str, instance_type: str, *, min_instances: int, max_instances: int
) -> CostEstimate:
    table = price_table()
    if min_instances < 0 or max_instances < min_instances:
        raise ConfigError(
            f"instance counts {min_instances}..{max_instances} are not a range",
            where="infra.min_instance_count / infra.max_instance_count",
            fix="set min_instance_count <= max_instance_count",
        )
    price = hourly_price(instance_type, region)
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


@dataclass(frozen=True)
class ServerlessCostEstimate:
    """SageMaker serverless: paid per second of inference and per GB processed, not per hour.

    `hourly_max` is the ceiling: every one of `max_concurrency` copies busy for
    the whole hour. Idle time costs nothing on demand; provisioned concurrency
    is billed while provisioned, at a price the table does not hold.
    """

    region: str
    memory_mb: int
    max_concurrency: int
    provisioned_concurrency: int | None
    per_gb_second: float | None  # None: not in the table for this region
    per_gb_processed: float | None
    as_of: str
    source: str

    @property
    def per_second(self) -> float | None:
        """One copy busy for one second at the configured memory."""
        if self.per_gb_second is None:
            return None
        return round(self.per_gb_second * self.memory_mb / 1024, 10)

    @property
    def hourly_max(self) -> float | None:
        if self.per_second is None:
            return None
        return round(self.per_second * 3600 * self.max_concurrency, 4)

    def describe(self) -> str:
        if self.per_second is None or self.hourly_max is None:
            return f"serverless inference has no price in the table for {self.region}"
        text = (
            f"${self.per_second:.6f} per second of inference at {self.memory_mb} MB, "
            f"${self.per_gb_processed:.3f}/GB processed, $0 while idle; at most "
            f"${self.hourly_max:.2f}/h with all {self.max_concurrency} concurrent copies busy "
            f"({self.region}; estimate as of {self.as_of})"
        )
        if self.provisioned_concurrency:
            text += (
                f"; plus {self.provisioned_concurrency} provisioned copies, billed while "
                "provisioned (not in the price table)"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosting": "serverless",
            "region": self.region,
            "memory_mb": self.memory_mb,
            "max_concurrency": self.max_concurrency,
            "provisioned_concurrency": self.provisioned_concurrency,
            "per_gb_second_usd": self.per_gb_second,
            "per_second_usd": self.per_second,
            "per_gb_processed_usd": self.per_gb_processed,
            "hourly_max_usd": self.hourly_max,
            "provisioned_concurrency_priced": False,
            "as_of": self.as_of,
            "estimate": True,
            "source": self.source,
        }


def serverless_estimate(
    region: str, *, memory_mb: int, max_concurrency: int, provisioned_concurrency: int | None
) -> ServerlessCostEstimate:
    table = price_table()["serverless"]
    prices: dict[str, float] = table["regions"].get(region, {})
    return ServerlessCostEstimate(
        region=region,
        memory_mb=memory_mb,
        max_concurrency=max_concurrency,
        provisioned_concurrency=provisioned_concurrency,
        per_gb_second=prices.get("per_gb_second"),
        per_gb_processed=prices.get("per_gb_processed"),
        as_of=str(table["as_of"]),
        source=str(table["source"]).split(" ", 1)[0],
    )


# What a plan's price is: hourly for instances, per second of inference for serverless.
Cost = CostEstimate | ServerlessCostEstimate


def estimate_for(region: str, desired: InfraSpec) -> Cost:
    """The price of what `desired` runs on: serverless capacity or instances."""
    if desired.serverless is not None:
        return serverless_estimate(
            region,
            memory_mb=desired.serverless.memory_mb,
            max_concurrency=desired.serverless.max_concurrency,
            provisioned_concurrency=desired.serverless.provisioned_concurrency,
        )
    return estimate(
        region,
        desired.instance_type,
        min_instances=desired.min_instance_count,
        max_instances=desired.max_instance_count,
    )
