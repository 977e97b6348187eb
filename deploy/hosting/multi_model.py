"""`hosting = "multi-model"`: a SageMaker multi-model endpoint (the default).

One archive per model under the model-store prefix; clients name a model by
its TargetModel; the endpoint loads and evicts archives on demand; the HTTP
API front door applies.
"""

from __future__ import annotations

from deploy.client.manifest import MULTI_MODEL
from deploy.hosting import rules
from deploy.hosting.mode import HostingMode, LocalServing
from deploy.hosting.per_model import PerModelLayout

MODE = HostingMode(
    name=MULTI_MODEL,
    summary="SageMaker multi-model endpoint: one archive per model, TargetModel per request",
    layout=PerModelLayout(),
    check_settings=rules.all_of(
        rules.known_instance, rules.multi_model_instance, rules.keeps_an_instance
    ),
    endpoint_stack="endpoint",
    front_door=True,
    local=LocalServing("per-model"),
    async_lane=True,
    model_canaries=True,
    status_names_hosting=False,
)
