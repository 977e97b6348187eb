"""`hosting = "serverless"`: a SageMaker serverless endpoint for small CPU models.

Serverless endpoints are single-model, so the mode uses the router layout
under `serverless/` in the model store. Its settings checks (CPU only,
memory, payload) and endpoint stack are not in this version:
`check_settings` refuses the mode before anything is packaged.
"""

from __future__ import annotations

from deploy.client.manifest import SERVERLESS
from deploy.hosting import rules
from deploy.hosting.mode import HostingMode
from deploy.hosting.router import RouterLayout

FOLDER = "serverless/"

MODE = HostingMode(
    name=SERVERLESS,
    summary="serverless endpoint: one archive behind the router, CPU, scales to zero",
    layout=RouterLayout(FOLDER),
    check_settings=rules.not_available(SERVERLESS),
    endpoint_stack=SERVERLESS,
)
