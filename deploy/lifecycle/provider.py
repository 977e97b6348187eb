"""What a deployment target offers the stages: the Provider protocol.

`deploy up` (AWS: `deploy.lifecycle.aws_provider`) and `deploy up --local`
(`deploy.lifecycle.local_provider`) run the same stages; only the provider differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from deploy.hosting import StoredFile
from deploy.hosting.component_sizing import Component
from deploy.lifecycle.actions import CreateComponent, UpdateComponent
from deploy.lifecycle.components import ComponentChange
from deploy.lifecycle.plan import InfraChange, InfraSpec


@dataclass(frozen=True)
class InfraPlan:
    action: Literal["create", "update", "none"]
    current: InfraSpec | None
    changes: tuple[InfraChange, ...]
    resources: tuple[dict[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # what the plan could not check, or found close to a limit
    store_stack: str | None = None  # the stack holding the model store (AWS)


@dataclass(frozen=True)
class UploadOutcome:
    target_model: str
    bytes_sent: int
    parts_sent: int
    parts_reused: int
    resumed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_model": self.target_model,
            "bytes_sent": self.bytes_sent,
            "parts_sent": self.parts_sent,
            "parts_reused": self.parts_reused,
            "resumed": self.resumed,
        }


@dataclass(frozen=True)
class EndpointView:
    """The endpoint as the provider sees it after (or during) a rollout."""

    name: str
    status: str
    config_name: str
    instance_type: str
    instance_count: int
    failure_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "config_name": self.config_name,
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "failure_reason": self.failure_reason,
            **self.extra,
        }


@dataclass(frozen=True)
class DataPlane:
    """Where smoke tests send requests (the SDK's `Endpoint` arguments)."""

    endpoint_name: str
    region: str
    endpoint_url: str | None  # None: the SageMaker runtime of the region


class Reporter(Protocol):
    """Live views for long stages; a silent one is used for --json and non-TTY."""

    def upload_started(self, files: int, total_bytes: int) -> None: ...
    def uploaded(self, nbytes: int) -> None: ...
    def upload_finished(self) -> None: ...
    def stage(self, name: str, detail: str = "") -> None:
        """A stage of `deploy up` starts (validate, package, plan, upload, ...)."""
        ...

    @property
    def package_progress(self) -> bool:
        """Whether packaging shows its own byte progress bar."""
        ...

    def rollout(
        self, stack: str, status: str, endpoint_status: str, events: Sequence[str]
    ) -> None: ...
    def rollout_finished(self) -> None: ...


class Provider(Protocol):
    name: str  # "aws" | "local"
    region_source: str | None  # where the region came from (None: no region applies)
    hostings: tuple[str, ...]  # the hosting modes it can deploy (deploy.hosting)

    def unavailable(self) -> str | None:
        """Why the provider cannot be asked anything now (e.g. no AWS credentials), or None."""
        ...

    def published_manifest(self) -> dict[str, Any] | None:
        """The manifest clients resolve names with now (None: nothing published)."""
        ...

    def stored_sha256(self, target_models: Iterable[str]) -> dict[str, str | None]:
        """The SHA-256 the store holds under each key (None: absent); keys are relative
        to the store's prefix (a multi-model archive's key is its TargetModel)."""
        ...

    def use_model_archive(self, key: str) -> None:
        """Router layouts: the endpoint's Model reads the archive stored under `key`."""
        ...

    def require_provisioning_tools(self, resources: Sequence[str]) -> None:
        """Raise before anything changes if provisioning `resources` (the plan's
        `Provision` and `CreateModelStore` names) needs a missing tool."""
        ...

    def plan_infra(self, desired: InfraSpec) -> InfraPlan: ...

    def upload(self, files: Sequence[StoredFile], reporter: Reporter) -> list[UploadOutcome]:
        """Put each file under its key (resumable where the store can)."""
        ...

    def provision_resources(self, resources: Sequence[str], reporter: Reporter) -> None:
        """Create or update each named resource (as `plan_infra` listed it), and only those."""
        ...

    def wait(self, *, timeout_s: float, reporter: Reporter) -> EndpointView: ...

    def data_plane(self) -> DataPlane: ...

    def publish_manifest(self, document: bytes) -> None: ...

    def store_bucket(self) -> str | None:
        """The model-store bucket once it exists (None: the store is no bucket)."""
        ...

    def plan_components(self, desired: Sequence[Component]) -> tuple[ComponentChange, ...]:
        """Hosting components: each component to create, update or delete."""
        ...

    def apply_components(
        self, actions: Sequence[CreateComponent | UpdateComponent], reporter: Reporter
    ) -> None:
        """Create or update each component, wait until each is InService, scale it."""
        ...

    def delete_components(self, names: Sequence[str], reporter: Reporter) -> None:
        """Delete each named component (after the manifest stopped naming its model)."""
        ...
