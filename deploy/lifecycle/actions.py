"""The changes a plan makes, as typed actions: what `deploy up` prints and what it applies.

A `Plan` (deploy.lifecycle.plan) holds the comparison (models new, changed or
removed, the stacks that differ, the settings before and after); `plan_actions`
turns it into the list of changes, one action each, in the order they run:

    CreateModelStore -> UploadArchive... -> Provision... -> CreateComponent/UpdateComponent...
        -> PublishManifest -> DeleteComponent...

(Components: hosting components only. A component is deleted only once the
manifest that no longer names its model is published, so no client is sent to it.)

`render.py` prints each action with its renderer and `apply.py` executes each
with its executor; both read `Plan.actions`, so the printed plan and what is
applied are the same list. Actions are plain frozen data: what they change
and why, nothing about how (that is the executor's, through the provider).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from deploy.hosting.component_sizing import Component

if TYPE_CHECKING:
    from deploy.lifecycle.plan import Plan

__all__ = [
    "ACTION_KINDS",
    "PHASES",
    "Action",
    "CreateComponent",
    "CreateModelStore",
    "DeleteComponent",
    "Phase",
    "Provision",
    "PublishManifest",
    "UpdateComponent",
    "UploadArchive",
    "plan_actions",
]

# When an action runs: the store and the archives first (the endpoint reads them),
# then the infrastructure and ("models") the inference components, then, after the
# endpoint answered the smoke test, the manifest that switches clients, and last
# ("retire") the components no manifest names any more.
Phase = Literal["upload", "provision", "models", "publish", "retire"]
PHASES: tuple[Phase, ...] = get_args(Phase)


@dataclass(frozen=True)
class CreateModelStore:
    """Create the stack holding the model store, before the archives go up into it."""

    stack: str
    phase: ClassVar[Phase] = "upload"

    @property
    def why(self) -> str:
        return "the archives go here, before the endpoint is touched"


@dataclass(frozen=True)
class UploadArchive:
    """Put one archive of the package under its key in the model store."""

    key: str  # under the store's prefix (a multi-model archive's key is its TargetModel)
    bytes: int
    sha256: str
    models: tuple[str, ...]  # the logical models it holds
    why: str  # "new", "changed", "missing from the store", ...
    phase: ClassVar[Phase] = "upload"


@dataclass(frozen=True)
class Provision:
    """Create or update one resource of the provider: a CloudFormation stack (AWS) or the
    background endpoint process (local)."""

    resource: str  # "stack" | "local endpoint"
    name: str
    change: Literal["create", "update"]
    phase: ClassVar[Phase] = "provision"

    @property
    def why(self) -> str:
        if self.resource != "stack":
            return "it is not running"
        if self.change == "create":
            return "it does not exist yet"
        return "its deployed template differs, or its last rollout failed"


@dataclass(frozen=True)
class PublishManifest:
    """Publish the package's manifest, switching clients to its TargetModels (last)."""

    changes: tuple[str, ...]  # "alpha new", "beta removed", "archive K (was J)"
    phase: ClassVar[Phase] = "publish"


@dataclass(frozen=True)
class CreateComponent:
    """Create one model's inference component (and its copy autoscaling)."""

    name: str
    model: str
    why: str
    component: Component
    phase: ClassVar[Phase] = "models"


@dataclass(frozen=True)
class UpdateComponent:
    """Update one model's inference component: its Specification, rolled out in copy
    batches (`respec`), and/or its copy autoscaling (`rescale`)."""

    name: str
    model: str
    why: str
    component: Component
    respec: bool
    rescale: bool
    phase: ClassVar[Phase] = "models"


@dataclass(frozen=True)
class DeleteComponent:
    """Delete the component of a removed model, after the manifest stops naming it."""

    name: str
    model: str
    why: str
    phase: ClassVar[Phase] = "retire"


Action = (
    CreateModelStore
    | UploadArchive
    | Provision
    | CreateComponent
    | UpdateComponent
    | PublishManifest
    | DeleteComponent
)
_CHANGES: dict[str, Literal["create", "update"]] = {"create": "create", "update": "update"}
# Every kind of action; each has exactly one executor (apply.py) and one renderer (render.py).
ACTION_KINDS: tuple[type[Action], ...] = get_args(Action)


def to_dict(action: Action) -> dict[str, Any]:
    """The action as JSON: its kind, fields and reason."""
    fields = asdict(action)
    component = fields.pop("component", None)  # its spec: the plan's `components` list it
    if component is not None:
        fields["archive_key"] = component["archive_key"]
    return {"action": type(action).__name__, **fields, "why": _why(action)}


def _why(action: Action) -> str:
    if isinstance(action, PublishManifest):
        return ", ".join(action.changes)
    return action.why


def plan_actions(plan: Plan) -> tuple[Action, ...]:
    """The plan's changes, one action each, in the order `apply` runs them.

    An offline plan (no credentials) compared nothing, so it lists no action; it
    is never applied.
    """
    if plan.offline_reason is not None:
        return ()
    store: list[Action] = []
    provision: list[Action] = []
    for resource in plan.resources:
        if "stack" in resource:
            change = _CHANGES.get(resource.get("action", ""))
            if change is None:
                continue
            if resource["stack"] == plan.store_stack and change == "create":
                store.append(CreateModelStore(resource["stack"]))
            else:
                provision.append(Provision("stack", resource["stack"], change))
        elif (started := _CHANGES.get(plan.infra_action)) is not None:
            # The local endpoint: one background process on this machine.
            kind = resource.get("type", "resource")
            provision.append(Provision(kind, resource.get("name", ""), started))
    uploads: list[Action] = [
        UploadArchive(m.target_model, m.bytes, m.sha256, (m.name,), _upload_why(m.action))
        for m in plan.uploads
    ]
    archive = plan.archive
    if archive is not None and archive.upload:
        moved = archive.key != archive.previous_key
        uploads.append(
            UploadArchive(
                archive.key,
                archive.bytes,
                archive.sha256,
                tuple(m.name for m in plan.models if m.action != "removed"),
                "new" if moved else "missing from the store",
            )
        )
    components: list[Action] = []
    retire: list[Action] = []
    for item in plan.components:
        why = ", ".join(item.reasons)
        if item.action == "delete":
            retire.append(DeleteComponent(item.name, item.model, why))
        elif item.component is not None and item.action == "create":
            components.append(CreateComponent(item.name, item.model, why, item.component))
        elif item.component is not None:
            components.append(
                UpdateComponent(
                    item.name, item.model, why, item.component, item.respec, item.rescale
                )
            )
    publish: list[Action] = []
    if plan.manifest_changes:
        publish.append(PublishManifest(_manifest_changes(plan)))
    return (*store, *uploads, *provision, *components, *publish, *retire)


def _upload_why(action: str) -> str:
    # An unchanged model is uploaded only when the store lost its bytes.
    return "missing from the store" if action == "unchanged" else action


def _manifest_changes(plan: Plan) -> tuple[str, ...]:
    canaries = {canary.name: canary for canary in plan.canaries if canary.changes_manifest}
    changes = [
        canaries[m.name].describe() if m.name in canaries else f"{m.name} {m.action}"
        for m in plan.models
        if m.action != "unchanged" or m.name in canaries
    ]
    archive = plan.archive
    if archive is not None and archive.key != archive.previous_key:
        was = f" (was {archive.previous_key})" if archive.previous_key else ""
        changes.append(f"archive {archive.key}{was}")
    return tuple(changes)
