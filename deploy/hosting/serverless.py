"""`hosting = "serverless"`: a SageMaker serverless endpoint for small CPU models.

Serverless endpoints are single-model, so the mode uses the router layout
under `serverless/` in the model store, on the CPU Triton image. What differs
from the other router modes:

- settings: CPU instance types only (the instance type picks the image);
  `infra.serverless_memory_mb`, `serverless_max_concurrency` and
  `serverless_provisioned_concurrency` size the endpoint (`deploy.config`);
- repository rules (`deploy.validation.serverless`): no GPU instance groups,
  model files against the memory, 4 MB payloads, 60 s calls;
- the plan's notes: the archive against the 3-minute start budget, the models
  against the memory;
- capacity: memory and concurrency in place of instances (the plan prices that per
  second of inference and per GB processed);
- the endpoint stack takes no VPC (SageMaker refuses one), so there is no network stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deploy.client.manifest import SERVERLESS
from deploy.hosting import rules
from deploy.hosting.capacity import InfraSpec, ServerlessSpec
from deploy.hosting.layout import StagePackage
from deploy.hosting.limits import SERVERLESS_MAX_REQUEST
from deploy.hosting.mode import HostingMode
from deploy.hosting.router import RouterLayout

if TYPE_CHECKING:
    from deploy.config import DeploySettings
    from deploy.repository import Repository
    from deploy.validation.diagnostics import Diagnostic

FOLDER = "serverless/"


def cpu_instance(settings: DeploySettings) -> None:
    from deploy.validation.serverless import require_cpu_instance

    require_cpu_instance(settings, where=rules.INSTANCE)


def repository_rules(
    settings: DeploySettings, repository: Repository, settings_file: str
) -> Sequence[Diagnostic]:
    from deploy.validation.serverless import serverless_diagnostics

    # With the stage's instance type among them: `deploy validate --hosting serverless`
    # reports it; `deploy up` has refused a GPU type already (`cpu_instance`).
    return serverless_diagnostics(repository, settings, settings_file=settings_file)


def package_notes(settings: DeploySettings, package: StagePackage) -> Sequence[str]:
    from deploy.config import settings_file
    from deploy.validation.serverless import package_findings

    if package.archive is None:
        return ()
    sizes = {name: entry.bytes or 0 for name, entry in package.manifest.models.items()}
    findings = package_findings(
        sizes, package.archive.bytes, settings, settings_file=str(settings_file())
    )
    return [f"{found.field}: {found.message} (fix: {found.fix})" for found in findings]


def capacity(settings: DeploySettings) -> InfraSpec:
    infra = settings.infra
    return InfraSpec(
        instance_type=settings.instance_type,
        initial_instance_count=0,
        min_instance_count=0,
        max_instance_count=0,
        serverless=ServerlessSpec(
            memory_mb=infra.serverless_memory_mb,
            max_concurrency=infra.serverless_max_concurrency,
            provisioned_concurrency=infra.serverless_provisioned_concurrency,
        ),
    )


MODE = HostingMode(
    name=SERVERLESS,
    summary="serverless endpoint: one archive behind the router, CPU, scales to zero",
    layout=RouterLayout(FOLDER, hosting=SERVERLESS),
    check_settings=rules.all_of(rules.known_instance, cpu_instance),
    endpoint_stack="serverless-endpoint",
    check_package=package_notes,
    check_repository=repository_rules,
    network=False,
    on_instances=False,
    capacity=capacity,
    max_payload=SERVERLESS_MAX_REQUEST,
)
