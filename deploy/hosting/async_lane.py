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

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploy.async_inference.layout import manifest_section, stage_locations
from deploy.client import manifest as contract
from deploy.hosting import asynchronous, multi_model
from deploy.hosting.changes import ArchiveChange, ModelChange
from deploy.hosting.layout import Diff, StagePackage, folder_manifest_key
from deploy.hosting.mode import HostingMode
from deploy.hosting.per_model import PerModelLayout
from deploy.hosting.router import RouterLayout

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
    return {
        "async_lane": {"endpoint_name": name, **manifest_section(stage_locations(bucket, name))}
    }


def lane_archive(published: Mapping[str, Any] | None) -> str | None:
    """The lane's archive key (under the model prefix) the published manifest names."""
    lane = (published or {}).get("async_lane")
    key = lane.get("archive") if isinstance(lane, dict) else None
    return key if isinstance(key, str) and key else None


@dataclass(frozen=True)
class LanedLayout:
    """The multi-model layout plus the lane's router archive (under `async/`).

    The per-model archives and the manifest stay where a multi-model stage keeps
    them; the package's `archive` is the lane's (the lane's Model reads it), and
    the published manifest's `async_lane.archive` names it, so the next plan
    compares with it and `deploy prune` keeps it.
    """

    models: PerModelLayout = dataclasses.field(default_factory=PerModelLayout)
    lane: RouterLayout = dataclasses.field(
        default_factory=lambda: RouterLayout(asynchronous.FOLDER, hosting=MODE.name)
    )
    name: str = "per-model + router"
    folder: str = ""

    @property
    def manifest_key(self) -> str:
        return folder_manifest_key(self.folder)

    def describe(self) -> str:
        return f"{self.models.describe()}; the async lane: {self.lane.describe()}"

    def describe_smoke(self, count: int) -> str:
        return self.models.describe_smoke(count)

    def package(
        self,
        repository: Path,
        out: Path,
        *,
        progress: bool = False,
        triton_version: str | None = None,
    ) -> StagePackage:
        models = self.models.package(
            repository, out, progress=progress, triton_version=triton_version
        )
        lane = self.lane.package(
            repository, out / self.lane.folder.rstrip("/"), triton_version=triton_version
        )
        return _joined(models, lane)

    def read_package(self, out: Path) -> StagePackage:
        lane = self.lane.read_package(out / self.lane.folder.rstrip("/"))
        return _joined(self.models.read_package(out), lane)

    def diff(
        self,
        package: StagePackage,
        published: dict[str, Any] | None,
        stored_sha256: dict[str, str | None],
    ) -> Diff:
        archive = package.archive
        assert archive is not None  # _joined sets it
        change = ArchiveChange(
            key=archive.key,
            previous_key=lane_archive(published),
            sha256=archive.sha256,
            bytes=archive.bytes,
            upload=stored_sha256.get(archive.key) != archive.sha256,
        )
        return Diff(self.models.diff(package, published, stored_sha256).models, change)

    def smoke_changes(
        self, models: Sequence[ModelChange], *, deployed: bool
    ) -> tuple[ModelChange, ...]:
        return self.models.smoke_changes(models, deployed=deployed)

    def published_document(self, package: StagePackage) -> bytes:
        """The multi-model manifest, its `async_lane` naming the lane's archive."""
        if package.archive is None:
            return self.models.published_document(package)
        return contract.dump(contract.with_lane_archive(package.manifest, package.archive.key))

    def referenced_keys(self, published: dict[str, Any] | None) -> set[str]:
        archive = lane_archive(published)
        return self.models.referenced_keys(published) | ({archive} if archive else set())

    def served_models(self, published: dict[str, Any] | None) -> dict[str, str]:
        return self.models.served_models(published)

    def archive_key(self, published: dict[str, Any] | None) -> str | None:
        return lane_archive(published)


def _joined(models: StagePackage, lane: StagePackage) -> StagePackage:
    """The multi-model package with the lane's archive among the files to store."""
    assert lane.archive is not None
    return dataclasses.replace(models, files=(*models.files, lane.archive), archive=lane.archive)


# A multi-model stage with `async_lane = true` (`deploy.hosting.mode_for` picks it).
LANED_MODE: HostingMode = dataclasses.replace(
    multi_model.MODE,
    summary=multi_model.MODE.summary + ", requests over 6 MB to its asynchronous lane",
    layout=LanedLayout(),
    manifest_sections=manifest_sections,
)
