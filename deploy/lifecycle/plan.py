"""Plain-data plan objects and the pure functions that compute them.

Nothing here calls AWS: the inputs are manifests (the local one `deploy
package` wrote, the one the store serves) and the infrastructure as it is and
as it should be. The same plan drives `--dry-run`, the upload and the report.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from deploy.errors import ConfigError
from deploy.hosting.capacity import InfraSpec, ServerlessSpec
from deploy.hosting.changes import ArchiveChange, ModelAction, ModelChange
from deploy.hosting.per_model import ArchiveEntry, diff_models, manifest_entries
from deploy.lifecycle.actions import Action, plan_actions
from deploy.lifecycle.actions import to_dict as action_dict
from deploy.lifecycle.components import ComponentChange
from deploy.lifecycle.prices import Cost

if TYPE_CHECKING:
    from deploy.lifecycle.canary import CanaryChange

__all__ = [
    "NEEDS_CREDENTIALS",
    "ArchiveChange",
    "ArchiveEntry",
    "InfraAction",
    "InfraChange",
    "InfraSpec",
    "ModelAction",
    "ModelChange",
    "Plan",
    "ServerlessSpec",
    "diff_infra",
    "diff_models",
    "manifest_entries",
    "superseded_archives",
]

InfraAction = Literal["create", "update", "none", "unknown"]

# What an offline plan (`deploy up --dry-run` without AWS credentials) leaves out.
NEEDS_CREDENTIALS = (
    "models new/changed/unchanged/removed (needs the published manifest)",
    "archives to upload (needs the model store)",
    "stack changes and the instances running now (needs CloudFormation and SageMaker)",
    "the CDK bootstrap check (needs SSM or CloudFormation)",
)


@dataclass(frozen=True)
class InfraChange:
    setting: str
    before: str | None
    after: str

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Plan:
    stage: str
    provider: str
    endpoint: str
    models: tuple[ModelChange, ...]
    infra_action: InfraAction
    infra: tuple[InfraChange, ...]
    resources: tuple[dict[str, str], ...]  # provider-specific resource changes
    cost: Cost | None
    hosting: str = "multi-model"
    archive: ArchiveChange | None = None  # router layouts only (one archive)
    region: str | None = None  # AWS: the region and where it came from
    region_source: str | None = None
    # Offline (no credentials): why, and the parts of the plan that need them.
    offline_reason: str | None = None
    needs_credentials: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # the hosting mode's warnings about the package
    # The stack holding the model store (AWS): created first when missing, the archives go there.
    store_stack: str | None = None
    # Multi-model: the canaries the published manifest names (deploy.lifecycle.canary).
    canaries: tuple[CanaryChange, ...] = ()
    # Hosting components: the inference components created, updated or deleted.
    components: tuple[ComponentChange, ...] = ()

    def offline(self, reason: str) -> Plan:
        """This plan with every part that needs AWS marked unknown (`needs_credentials`)."""
        archive = self.archive and replace(self.archive, previous_key=None, upload=False)
        return replace(
            self,
            models=tuple(
                replace(m, action="unknown", previous_target_model=None, upload=False)
                for m in self.models
                if m.action != "removed"
            ),
            archive=archive,
            canaries=(),
            infra_action="unknown",
            infra=tuple(replace(change, before=None) for change in self.infra),
            resources=(),
            components=(),
            offline_reason=reason,
            needs_credentials=NEEDS_CREDENTIALS,
        )

    @property
    def actions(self) -> tuple[Action, ...]:
        """The changes, one action each, in the order `deploy up` applies them: what
        the printed plan lists and all that `deploy.lifecycle.apply.apply` does."""
        return plan_actions(self)

    @property
    def changed_models(self) -> tuple[ModelChange, ...]:
        return tuple(m for m in self.models if m.action in {"new", "changed"})

    @property
    def uploads(self) -> tuple[ModelChange, ...]:
        return tuple(m for m in self.models if m.upload)

    @property
    def upload_keys(self) -> frozenset[str]:
        """Store keys (under the prefix) the plan uploads."""
        keys = {m.target_model for m in self.uploads}
        if self.archive is not None and self.archive.upload:
            keys.add(self.archive.key)
        return frozenset(keys)

    @property
    def manifest_changes(self) -> bool:
        archive_moved = self.archive is not None and self.archive.key != self.archive.previous_key
        canaries = any(canary.changes_manifest for canary in self.canaries)
        return archive_moved or canaries or any(m.action != "unchanged" for m in self.models)

    @property
    def empty(self) -> bool:
        archive_upload = self.archive is not None and self.archive.upload
        return (
            not self.manifest_changes
            and not self.uploads
            and not archive_upload
            and self.infra_action == "none"
            and not self.components
        )

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "stage": self.stage,
            "provider": self.provider,
            "endpoint": self.endpoint,
            "models": [m.to_dict() for m in self.models],
            "upload_bytes": sum(m.bytes for m in self.uploads),
            "infra_action": self.infra_action,
            "infra": [c.to_dict() for c in self.infra],
            "resources": list(self.resources),
            "cost": self.cost.to_dict() if self.cost else None,
            "actions": [action_dict(action) for action in self.actions],
        }
        if self.region is not None:
            document["region"] = self.region
            document["region_source"] = self.region_source
        if self.offline_reason is not None:
            document["offline_reason"] = self.offline_reason
            document["needs_credentials"] = list(self.needs_credentials)
        if self.notes:
            document["notes"] = list(self.notes)
        if self.canaries:
            document["canaries"] = [canary.to_dict() for canary in self.canaries]
        if self.components:
            document["components"] = [change.to_dict() for change in self.components]
        if self.archive is not None:
            document["hosting"] = self.hosting
            document["archive"] = self.archive.to_dict()
            document["upload_bytes"] = self.archive.bytes if self.archive.upload else 0
        return document


def diff_infra(current: InfraSpec | None, desired: InfraSpec) -> tuple[InfraChange, ...]:
    changes = []
    for key, after in desired.to_dict().items():
        # A key missing from the current spec (instances before, serverless after) is new.
        before = None if current is None else current.to_dict().get(key)
        if before != after:
            changes.append(InfraChange(key, None if before is None else str(before), str(after)))
    return tuple(changes)


def superseded_archives(stored_keys: list[str], referenced: set[str], *, keep: int) -> list[str]:
    """Archives no manifest references, minus the `keep` newest per model.

    `stored_keys` are target-model names in upload order (oldest first);
    a model's archives are grouped by the name before the content hash
    (`<model>-<hash>.tar.gz`).
    """
    if keep < 0:
        raise ConfigError(
            f"--keep {keep} is negative", where="deploy prune --keep", fix="pass 0 or more"
        )
    groups: dict[str, list[str]] = {}
    for key in stored_keys:
        if not key.endswith(".tar.gz"):
            continue
        model = key[: -len(".tar.gz")].rsplit("-", 1)[0]
        groups.setdefault(model, []).append(key)
    doomed: list[str] = []
    for keys in groups.values():
        unreferenced = [key for key in keys if key not in referenced]
        # Newest last; keep the last `keep` unreferenced ones as rollback targets.
        cut = len(unreferenced) - keep
        doomed.extend(unreferenced[: max(cut, 0)])
    return doomed
