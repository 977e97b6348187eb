"""`async_lane = true`: a multi-model stage paired with an asynchronous endpoint.

SageMaker's real-time endpoints take requests up to 6 MB; the lane takes the
larger ones (up to 1 GB, through S3). It is an endpoint of hosting async in
all but name: the router layout under `async/` in the model store (the same
archive `hosting = "async"` uploads), its own stack (`<stack>-async-lane`)
next to the multi-model endpoint's, its requests under
`async/<endpoint>-async/`. The multi-model manifest names it in its
`async_lane` section, so the SDK sends requests over 6 MB there by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deploy.async_inference.layout import manifest_section, stage_locations
from deploy.hosting import asynchronous

if TYPE_CHECKING:
    from deploy.config import DeploySettings

COMPONENT = "async-lane"  # the lane's stack: DeploySettings.stack_name(COMPONENT)
SUFFIX = "-async"
MODE = asynchronous.MODE  # its layout, folder and settings checks are the lane's


def endpoint_name(settings: DeploySettings) -> str:
    return f"{settings.endpoint_name}{SUFFIX}"


def lane_settings(settings: DeploySettings) -> DeploySettings:
    """The stage's settings as the lane's endpoint stack reads them (hosting async,
    the lane's endpoint name; everything else the stage's)."""
    return settings.model_copy(
        update={"endpoint_name": endpoint_name(settings), "hosting": MODE.name, "async_lane": False}
    )


def manifest_sections(settings: DeploySettings, bucket: str) -> Mapping[str, Any]:
    """The multi-model manifest's `async_lane`: the lane and its S3 prefixes."""
    name = endpoint_name(settings)
    return {"async_lane": {"endpoint_name": name, **manifest_section(stage_locations(bucket, name))}}
