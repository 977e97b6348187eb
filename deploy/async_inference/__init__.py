"""SageMaker asynchronous inference: where requests and results live in S3, and
the limits of the mode. Shared by the local endpoint, the CDK stack and
`deploy up`; the SDK keeps its own copy of what it needs (it depends on
nothing else of ours)."""

from deploy.async_inference.layout import (
    DEFAULT_INVOCATION_TIMEOUT_S,
    AsyncLocations,
    failure_key,
    manifest_section,
    output_key,
    stage_locations,
)

__all__ = [
    "DEFAULT_INVOCATION_TIMEOUT_S",
    "AsyncLocations",
    "failure_key",
    "manifest_section",
    "output_key",
    "stage_locations",
]
