"""`HostingMode`: everything that differs between the ways an endpoint hosts models.

A mode is composed of parts, not subclassed:

- `check_settings`: the validation rules for the stage's settings (instance families,
  limits), run before anything is packaged or changed;
- `layout`: packaging, the plan's diff, the store keys, the published manifest
  (`deploy.hosting.layout.Layout`);
- `check_repository`: the mode's own rules for the models (diagnostics naming the
  file and field), run with the repository rules;
- `endpoint_stack`: the key of the endpoint stack the CDK app synthesizes
  (`deploy_infra.synth.ENDPOINT_STACKS` maps each key to its stack class, so
  `deploy` imports nothing of the CDK app), `front_door`: whether the HTTP API
  applies, and `network`: whether the endpoint runs in the stage's VPC (the
  network stack);
- `local`: how `deploy serve` and `deploy up --local` run the mode on this machine
  (`deploy.local.modes.registry` maps its key to the endpoint), or None where they cannot;
- `max_payload` (`deploy.hosting.limits`), `scales_to_zero`, `async_lane`,
  `model_canaries`: the
  SageMaker facts other layers ask the mode instead of comparing its name;
- `capacity`: what the endpoint runs on (instances, or serverless memory and
  concurrency; `deploy.hosting.capacity`), as the plan compares and prices it;
- `addressing` (from the manifest contract): how the SDK and the smoke test name
  a model: SageMaker's TargetModel, the router's request parameter, or the
  model's InferenceComponentName;
- `components`, `bind_manifest`: hosting components' inference components (one
  per model, which `deploy up` creates, updates and deletes itself) and the
  published manifest that names each model's component.

`deploy up` runs the same stages for every mode (`deploy.lifecycle.up`); only
these parts differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploy.client.manifest import ADDRESSING, Manifest
from deploy.hosting.capacity import InfraSpec
from deploy.hosting.layout import Layout, StagePackage
from deploy.hosting.limits import REALTIME_MAX_REQUEST

if TYPE_CHECKING:
    from deploy.config import DeploySettings
    from deploy.hosting.component_sizing import Component
    from deploy.repository import Repository
    from deploy.validation.diagnostics import Diagnostic

SettingsCheck = Callable[["DeploySettings"], None]
# The mode's rules for a repository's models: (settings, repository, settings file).
RepositoryCheck = Callable[["DeploySettings", "Repository", str], Sequence["Diagnostic"]]
Capacity = Callable[["DeploySettings"], InfraSpec]
# Sections of the published manifest that name the stage's resources (the model-store
# bucket given): hosting async names its S3 prefixes there.
ManifestSections = Callable[["DeploySettings", str], Mapping[str, Any]]
# Warnings about a package on this mode (e.g. a start-up budget), shown with the plan.
PackageCheck = Callable[["DeploySettings", StagePackage], Sequence[str]]
# The inference components a package deploys: (settings, repository folder, package).
ComponentsOf = Callable[["DeploySettings", Path, StagePackage], Sequence["Component"]]
# The published manifest as the stage's resources name it: (settings, packaged manifest).
BindManifest = Callable[["DeploySettings", Manifest], Manifest]


def no_package_warnings(settings: DeploySettings, package: StagePackage) -> Sequence[str]:
    return ()


def no_repository_rules(
    settings: DeploySettings, repository: Repository, settings_file: str
) -> Sequence[Diagnostic]:
    return ()


def instance_capacity(settings: DeploySettings) -> InfraSpec:
    """Instances: the type and the autoscaling bounds."""
    return InfraSpec(
        instance_type=settings.instance_type,
        initial_instance_count=settings.infra.initial_instance_count,
        min_instance_count=settings.infra.min_instance_count,
        max_instance_count=settings.infra.max_instance_count,
    )


@dataclass(frozen=True)
class LocalServing:
    """How the local endpoint runs a mode: `deploy serve --hosting NAME`, `deploy up --local`."""

    endpoint: str  # the key of its local endpoint (`deploy.local.modes.registry.SERVERS`)
    # One archive behind the router serves every model: none is evicted, and a
    # repository is staged, not packaged (--max-loaded-*, --package-dir do not apply).
    router: bool = False
    # Requests and answers travel through S3 (--async-output, --async-input).
    through_s3: bool = False
    # Idle copies of a model with minimum 0 unload (--scale-to-zero-after).
    idle_unload: bool = False


@dataclass(frozen=True)
class HostingMode:
    name: str  # the `hosting` setting and the manifest's `hosting`
    summary: str  # one line for help texts and plans
    layout: Layout
    check_settings: SettingsCheck
    endpoint_stack: str  # the key of the endpoint stack the CDK app synthesizes
    front_door: bool = False  # the HTTP API front door (it sends TargetModel) applies
    check_package: PackageCheck = no_package_warnings
    check_repository: RepositoryCheck = no_repository_rules
    network: bool = True  # the endpoint runs in the stage's VPC (serverless takes none)
    # Models run on `instance_type` (its GPUs are what instance groups may use); a
    # serverless endpoint has no instances (its instance type only picks the image).
    on_instances: bool = True
    capacity: Capacity = instance_capacity
    manifest_sections: ManifestSections | None = None
    local: LocalServing | None = None  # None: no local endpoint serves this mode
    max_payload: int = REALTIME_MAX_REQUEST  # the largest request body SageMaker takes
    scales_to_zero: bool = False  # min_instance_count 0 (requests wait in a queue)
    async_lane: bool = False  # `async_lane = true` may pair it with an asynchronous endpoint
    # A model may name a canary (a second TargetModel) that the SDK and front door split to.
    model_canaries: bool = False
    # `deploy status` names the mode (multi-model's status predates modes: it does not).
    status_names_hosting: bool = True
    components: ComponentsOf | None = None  # None: no inference components
    bind_manifest: BindManifest | None = None

    @property
    def addressing(self) -> str:
        """How a request names a model (`deploy.client.manifest.ADDRESSINGS`)."""
        return ADDRESSING[self.name]

    @property
    def manifest_key(self) -> str:
        """The published manifest's key under the model-store prefix."""
        return self.layout.manifest_key

    def package_dir(self, package_dir: Path) -> Path:
        """Where this mode's package goes under the stage's package directory."""
        folder = self.layout.folder.rstrip("/")
        return package_dir / folder if folder else package_dir
