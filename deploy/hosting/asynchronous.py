"""`hosting = "async"`: a SageMaker asynchronous endpoint (request bodies in S3).

InvokeEndpointAsync has no TargetModel, so the mode uses the router layout
under `async/` in the model store, on GPU or CPU instances (the SageMaker
Triton image). It may scale to zero (`min_instance_count = 0`): requests wait
in SageMaker's queue until an instance runs. The endpoint stack is
`deploy_infra/stacks/async_endpoint.py`; requests, answers and errors live under
`async/<endpoint>/` of the model-store bucket (`deploy.async_inference`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deploy.async_inference.layout import manifest_section, stage_locations
from deploy.client.manifest import ASYNC
from deploy.hosting import rules
from deploy.hosting.limits import ASYNC_MAX_REQUEST
from deploy.hosting.mode import HostingMode, LocalServing
from deploy.hosting.router import RouterLayout

if TYPE_CHECKING:
    from deploy.config import DeploySettings

FOLDER = "async/"


def manifest_sections(settings: DeploySettings, bucket: str) -> Mapping[str, Any]:
    """The published manifest names the stage's S3 prefixes: clients need nothing else."""
    return {"async_inference": manifest_section(stage_locations(bucket, settings.endpoint_name))}


MODE = HostingMode(
    name=ASYNC,
    summary="asynchronous endpoint: one archive behind the router, request bodies in S3",
    layout=RouterLayout(FOLDER, hosting=ASYNC),
    check_settings=rules.all_of(rules.known_instance, rules.async_instance),
    endpoint_stack="async-endpoint",
    manifest_sections=manifest_sections,
    local=LocalServing("async", router=True, through_s3=True),
    max_payload=ASYNC_MAX_REQUEST,
    scales_to_zero=True,
)
