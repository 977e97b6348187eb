"""What an endpoint runs on, as a hosting mode sizes it and the plan compares it.

Plain data: instances (type and autoscaling bounds) or, for a serverless
endpoint, its memory and concurrency (`ServerlessSpec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServerlessSpec:
    """A serverless endpoint's capacity: memory per copy and concurrent copies."""

    memory_mb: int
    max_concurrency: int
    provisioned_concurrency: int | None = None


@dataclass(frozen=True)
class InfraSpec:
    """What the endpoint should run on: instances, or (`serverless`) serverless capacity.

    A serverless endpoint has no instances: its spec compares the serverless
    settings, and `instance_type` only names the image's processor.
    """

    instance_type: str
    initial_instance_count: int
    min_instance_count: int
    max_instance_count: int
    serverless: ServerlessSpec | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.serverless is not None:
            return {
                "serverless_memory_mb": self.serverless.memory_mb,
                "serverless_max_concurrency": self.serverless.max_concurrency,
                "serverless_provisioned_concurrency": self.serverless.provisioned_concurrency,
            }
        return {
            "instance_type": self.instance_type,
            "initial_instance_count": self.initial_instance_count,
            "min_instance_count": self.min_instance_count,
            "max_instance_count": self.max_instance_count,
        }
