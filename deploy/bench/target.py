"""Where a load test sends its requests, as plain data every worker process can open.

The parent process resolves the manifest once and hands it to the workers,
so a hundred workers do not each ask S3 (or the local endpoint) for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deploy.client import Endpoint, Manifest


@dataclass(frozen=True)
class Target:
    """An endpoint and the model a load test calls on it."""

    endpoint: str
    model: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    manifest: Manifest | str | None = None
    target_model: str | None = None
    timeout_s: float = 30.0
    attempts: int = 1  # retries hide throttling and cold loads from the counts: off by default

    def open(self) -> Endpoint:
        """An SDK endpoint for this target (one per process; its calls are thread-safe)."""
        from deploy.client import Endpoint, RetryPolicy

        session: Any = None
        if self.profile is not None:
            import boto3

            session = boto3.Session(profile_name=self.profile, region_name=self.region)
        return Endpoint(
            self.endpoint,
            region=self.region,
            endpoint_url=self.endpoint_url,
            session=session,
            manifest=self.manifest,
            timeout=self.timeout_s,
            retries=RetryPolicy(max_attempts=self.attempts, total_timeout=self.timeout_s * 2),
        )

    def describe(self) -> str:
        place = self.endpoint_url or (f"{self.region}" if self.region else "AWS")
        return f"endpoint {self.endpoint!r} at {place}"

    def with_manifest(self, manifest: Manifest | None) -> Target:
        from dataclasses import replace

        return replace(self, manifest=manifest)
