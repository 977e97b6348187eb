"""`hosting = "async"`: a SageMaker asynchronous endpoint (request bodies in S3).

InvokeEndpointAsync has no TargetModel, so the mode uses the router layout
under `async/` in the model store. Its settings checks, endpoint stack and the
SDK's asynchronous path are not in this version: `check_settings` refuses
the mode before anything is packaged.
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
    check_settings=rules.not_available(ASYNC),
    endpoint_stack=ASYNC,
)
