"""`hosting = "single-model"`: one archive with every model behind the router.

What ml.inf1 needs (SageMaker runs no multi-model endpoints there; `ml.inf1.*`
implies this mode), and what any GPU or CPU instance can use to load every
model at start. The archive and the manifest live under `inf1/` in the model
store (the folder's name predates other instances using the layout; stores
published before keep working).
"""

from __future__ import annotations

from deploy.client.manifest import SINGLE_MODEL
from deploy.hosting import rules
from deploy.hosting.mode import HostingMode, LocalServing
from deploy.hosting.router import RouterLayout

FOLDER = "inf1/"

MODE = HostingMode(
    name=SINGLE_MODEL,
    summary="single-model endpoint: one archive, every model behind the router",
    layout=RouterLayout(FOLDER),
    check_settings=rules.all_of(
        rules.known_instance, rules.single_model_instance, rules.keeps_an_instance
    ),
    endpoint_stack="single-model-endpoint",
    local=LocalServing("router", router=True),
)
