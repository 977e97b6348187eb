"""`hosting = "async"`: a SageMaker asynchronous endpoint (request bodies in S3).

InvokeEndpointAsync has no TargetModel, so the mode uses the router layout
under `async/` in the model store, on GPU or CPU instances (the SageMaker
Triton image). It may scale to zero (`min_instance_count = 0`): requests wait
in SageMaker's queue until an instance runs. The endpoint stack is
`infra/stacks/async_endpoint.py`; requests, answers and errors live under
`async/<endpoint>/` of the model-store bucket (`deploy.async_inference`).
"""

from __future__ import annotations

from deploy.client.manifest import ASYNC
from deploy.hosting import rules
from deploy.hosting.mode import HostingMode
from deploy.hosting.router import RouterLayout

FOLDER = "async/"

MODE = HostingMode(
    name=ASYNC,
    summary="asynchronous endpoint: one archive behind the router, request bodies in S3",
    layout=RouterLayout(FOLDER),
    check_settings=rules.all_of(rules.known_instance, rules.async_instance),
    endpoint_stack=ASYNC,
)
