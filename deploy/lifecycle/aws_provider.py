"""The AWS provider: the `deploy up` stages' Provider on S3, CloudFormation and SageMaker.

Provisioning deploys the stacks the plan names (`provision_resources`) from
the CDK app's synthesized templates with CloudFormation (CreateStack/UpdateStack),
against AWS and against the moto server alike (the CDK CLI cannot deploy to
moto). Stacks go in dependency order; a missing model store stack is created
first (the plan's `CreateModelStore`) because archives are uploaded before the
endpoint is touched. A stage whose stacks have container image assets (the
inf1 Neuron image) is deployed by the pinned CDK CLI instead, which builds
the image with Docker: `require_provisioning_tools` checks for both before
anything changes.

Hosting components: the endpoint stack holds the endpoint; the inference
components on it are made here, through SageMaker's API, one plan action each
(`plan_components`, `apply_components`, `delete_components`; why not through
the stack: `deploy.hosting.components`).

What differs between hosting modes (where the archives and the manifest go,
which endpoint stack) comes from the stage's `HostingMode`; the service
clients come from `aws_clients` (one factory), so tests pass fakes in.
The units: `aws_stage` (finding the stage's resources), `rollout`
(CloudFormation rollouts and waiting), `cdk_cli` (the CDK CLI), `operations`
(`deploy status/down/prune`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from deploy.aws.cloudformation import Stacks, template_body
from deploy.aws.inference_components import InferenceComponents, Scaling
from deploy.aws.quotas import endpoint_quota_name
from deploy.aws.s3 import DEFAULT_PART_SIZE, ModelStore
from deploy.aws.sagemaker import EndpointState, SageMaker
from deploy.aws.session import AwsCallError, AwsSession
from deploy.client.manifest import HOSTINGS
from deploy.config import DeploySettings
from deploy.errors import AwsError, ConfigError
from deploy.hosting import HostingMode, StoredFile, mode_for
from deploy.hosting.component_sizing import Component
from deploy.lifecycle.actions import CreateComponent, UpdateComponent
from deploy.lifecycle.assets import container_image_stacks, publish_file_assets
from deploy.lifecycle.aws_clients import AwsClients, aws_clients
from deploy.lifecycle.aws_stage import AwsStage, StoreLocation
from deploy.lifecycle.cdk_cli import IMAGE, provision_with_cdk_cli, require_tools
from deploy.lifecycle.components import ComponentChange, plan_components, requested
from deploy.lifecycle.operations import StageOperations
from deploy.lifecycle.plan import InfraSpec, ServerlessSpec, diff_infra
from deploy.lifecycle.provider import DataPlane, EndpointView, InfraPlan, Reporter, UploadOutcome
from deploy.lifecycle.rollout import Rollout, RolloutFailedError, failure_reason, say
from deploy.lifecycle.templates import (
    StageTemplates,
    Synthesizer,
    cdk_synthesizer,
    project_root,
    stage_templates,
)

__all__ = [
    "MIN_BOOTSTRAP_VERSION",
    "AwsProvider",
    "RolloutFailedError",
    "StoreLocation",
    "failure_reason",
]

BOOTSTRAP_STACK = "CDKToolkit"
# The synthesized templates' CheckBootstrapVersion rule refuses versions 1-5.
MIN_BOOTSTRAP_VERSION = 6


class AwsProvider:
    name = "aws"
    hostings: tuple[str, ...] = HOSTINGS  # each mode's own checks refuse what it cannot run

    def __init__(
        self,
        settings: DeploySettings,
        *,
        clients: AwsClients | None = None,
        session: AwsSession | None = None,
        mode: HostingMode | None = None,
        template_cache: Path | None = None,
        synthesize: Synthesizer | None = None,
        smoke_endpoint_url: str | None = None,
        smoke_endpoint_name: str | None = None,
        part_size: int = DEFAULT_PART_SIZE,
        upload_workers: int = 4,
        poll_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        before_part: Callable[[str, int], None] | None = None,
        container_engine: str | None = None,
    ) -> None:
        self.settings = settings
        self.mode = mode or mode_for(settings)
        self.clients = clients or aws_clients(settings.region, session=session, sleep=sleep)
        self.region_source: str | None = self.clients.session.region_source
        self.resources = AwsStage(settings, self.clients, self.mode)
        self.rollout = Rollout(
            self.resources, publish_assets=self._publish_assets, poll_s=poll_s, sleep=sleep
        )
        self.operations = StageOperations(self.resources)
        self._template_cache = template_cache or _default_template_cache()
        self._synthesize = synthesize
        self._stage: StageTemplates | None = None
        self._smoke_url = smoke_endpoint_url
        self._smoke_name = smoke_endpoint_name
        self._part_size = part_size
        self._workers = upload_workers
        self._before_part = before_part
        self._container_engine = container_engine
        self._model_archive: str | None = None
        self._poll_s = poll_s
        self._sleep = sleep
        self.components_timeout_s = 3600.0  # each component's rollout (`deploy up --timeout`)

    # -- the stage's resources ------------------------------------------------------------

    @property
    def session(self) -> AwsSession:
        return self.clients.session

    @property
    def stacks(self) -> Stacks:
        return self.clients.stacks

    @property
    def sagemaker(self) -> SageMaker:
        return self.clients.sagemaker

    @property
    def manifest_key(self) -> str:
        """The published manifest's key under the model-store prefix (the mode's)."""
        return self.mode.manifest_key

    def stack(self, component: str) -> str:
        return self.resources.stack(component)

    def store_location(self) -> StoreLocation | None:
        return self.resources.store_location()

    def store(self) -> tuple[ModelStore, str] | None:
        return self.resources.store()

    def endpoint_name(self) -> str | None:
        return self.resources.endpoint_name()

    def endpoint_state(self) -> EndpointState | None:
        return self.resources.endpoint_state()

    # -- templates ------------------------------------------------------------------------

    def synthesized(self) -> StageTemplates:
        """The stage's templates and cloud assembly (synthesized once, cached on disk)."""
        if self._stage is None:
            settings = self.settings
            synthesize = self._synthesize
            if settings.infra.account is None:
                # Templates name the account (key policies, asset buckets): synthesize
                # for the one the credentials belong to, not a placeholder.
                infra = settings.infra.model_copy(update={"account": self.session.account_id()})
                settings = settings.model_copy(update={"infra": infra})
            if self._model_archive is not None:
                infra = settings.infra.model_copy(update={"model_archive": self._model_archive})
                settings = settings.model_copy(update={"infra": infra})
            if settings.hosting is None:
                settings = settings.model_copy(update={"hosting": self.mode.name})
            if synthesize is None:
                # The lookups the CDK CLI would make for this account and region.
                account = settings.infra.account or self.session.account_id()
                synthesize = cdk_synthesizer(self.clients.lookup_context(account))
            self._stage = stage_templates(
                settings, cache_dir=self._template_cache, synthesize=synthesize
            )
        return self._stage

    def templates(self) -> dict[str, dict[str, Any]]:
        return self.synthesized().templates

    def use_model_archive(self, key: str) -> None:
        """Router layouts: the endpoint's Model reads `<prefix><key>` (templates are
        re-synthesized)."""
        if key != self._model_archive:
            self._model_archive = key
            self._stage = None

    def _publish_assets(self, stack: str) -> list[str]:
        return publish_file_assets(
            self.synthesized().assembly,
            stack,
            account=self.settings.infra.account or self.session.account_id(),
            region=self.settings.region,
            store=self.clients.store,
        )

    # -- planning -----------------------------------------------------------------------

    def unavailable(self) -> str | None:
        return self.session.credentials_missing()

    def require_bootstrap(self, stacks: Iterable[str]) -> None:
        """The CDK bootstrap the templates of `stacks` need exists (else: how to make it).

        Each synthesized template names the SSM parameter holding the bootstrap
        version (`/cdk-bootstrap/<qualifier>/version`) and refuses old versions.
        Without permission to read it, the CDKToolkit stack stands in for it.
        """
        templates = self.templates()
        names = {
            str(parameter["Default"])
            for stack in stacks
            if (parameter := templates[stack].get("Parameters", {}).get("BootstrapVersion"))
            and "Default" in parameter
        }
        for name in sorted(names):
            try:
                version = self.clients.parameter(name)
            except AwsCallError as exc:
                if "AccessDenied" not in exc.code:
                    raise
                version = "unknown" if self.stacks.describe(BOOTSTRAP_STACK) else None
            if version is None or (version.isdigit() and int(version) < MIN_BOOTSTRAP_VERSION):
                account = self.settings.infra.account or self.session.account_id()
                region = self.settings.region
                state = "is missing" if version is None else f"is version {version}"
                raise AwsError(
                    f"account {account} in {region} is not bootstrapped for CDK: the "
                    f"parameter {name} {state} (the stacks need version "
                    f"{MIN_BOOTSTRAP_VERSION} or later)",
                    where=f"account {account}, region {region}",
                    fix=f"run `deploy cdk bootstrap aws://{account}/{region}` once, then re-run "
                    "`deploy up`",
                )

    def published_manifest(self) -> dict[str, Any] | None:
        return self.resources.published_manifest()

    def stored_sha256(self, target_models: Iterable[str]) -> dict[str, str | None]:
        names = list(target_models)
        found = self.store()
        if found is None:
            return dict.fromkeys(names)
        store, prefix = found
        with ThreadPoolExecutor(max_workers=8) as pool:
            heads = list(pool.map(lambda name: store.head(prefix + name), names))
        return {
            name: head.sha256 if head else None for name, head in zip(names, heads, strict=True)
        }

    def current_infra(self) -> InfraSpec | None:
        state = self.endpoint_state()
        if state is None or not state.variants:
            return None
        variant = state.variants[0]
        if variant.serverless is not None:
            # No instances to count: memory and concurrency are what the plan compares.
            return InfraSpec(
                instance_type=variant.instance_type,
                initial_instance_count=0,
                min_instance_count=0,
                max_instance_count=0,
                serverless=ServerlessSpec(
                    memory_mb=variant.serverless.memory_mb,
                    max_concurrency=variant.serverless.max_concurrency,
                    provisioned_concurrency=variant.serverless.provisioned_concurrency,
                ),
            )
        bounds = self.resources.bounds(state.name, variant.name)
        config = self.sagemaker.endpoint_config(state.config_name)
        initial = config.variants[0].desired_count if config and config.variants else 0
        return InfraSpec(
            instance_type=variant.instance_type,
            initial_instance_count=initial,
            min_instance_count=bounds[0] if bounds else initial,
            max_instance_count=bounds[1] if bounds else initial,
        )

    def plan_infra(self, desired: InfraSpec) -> InfraPlan:
        """Each stack's action (create, update or unchanged) and the endpoint's settings
        before and after. A stack is updated when its deployed template differs or its
        last rollout failed; one still rolling out with this template is left to settle."""
        resources = [
            {"stack": name, "action": self._stack_action(name, template)}
            for name, template in self.templates().items()
        ]
        pending = [item["stack"] for item in resources if item["action"] != "unchanged"]
        if pending:
            self.require_bootstrap(pending)
        current_spec = self.current_infra()
        changes = diff_infra(current_spec, desired)
        notes: tuple[str, ...] = ()
        if any(item["action"] == "create" for item in resources):
            overall = "create"
        elif pending:
            overall = "update"
        else:
            overall = "none"
            if changes:
                # CloudFormation re-applies nothing for an unchanged template.
                notes = (
                    "the endpoint runs "
                    + ", ".join(f"{c.setting} {c.before}" for c in changes)
                    + " where its stack's template says "
                    + ", ".join(f"{c.after}" for c in changes)
                    + ": it was changed outside CloudFormation, which `deploy up` does not "
                    "undo; change it back in the SageMaker console, or `deploy down` and "
                    "`deploy up` the stage",
                )
        return InfraPlan(
            action=overall,  # type: ignore[arg-type]
            current=current_spec,
            changes=changes if overall != "none" else (),
            resources=tuple(resources),
            notes=notes + (self._check_quota(desired) if overall != "none" else ()),
            store_stack=self.stack("model-store"),
        )

    def _stack_action(self, name: str, template: dict[str, Any]) -> str:
        """create, update or unchanged: what `Rollout.deploy_stack` will find to do."""
        current = self.stacks.template(name)
        if current is None:
            return "create"
        state = self.stacks.describe(name)
        if state is not None and state.status == "ROLLBACK_COMPLETE":
            return "create"  # a failed creation holds nothing: it is deleted and made again
        if template_body(current) != template_body(template):
            return "update"
        if state is not None and state.failed:
            return "update"
        return "unchanged"

    def _check_quota(self, desired: InfraSpec) -> tuple[str, ...]:
        """The account may run the instances the stage asks for (before anything is made)."""
        if desired.serverless is not None:
            return ()
        instance_type = desired.instance_type
        answer = self.clients.quotas.endpoint_instances(instance_type)
        quota = answer.quota
        if answer.not_offered:
            raise ConfigError(
                f"{instance_type} is not offered for SageMaker endpoints in "
                f"{self.settings.region}: Service Quotas lists no "
                f"'{endpoint_quota_name(instance_type)}' there. Nothing was created",
                where="instance_type",
                fix=_not_offered_fix(instance_type, answer.offered),
            )
        if quota is None:
            return (
                f"the account's quota of {instance_type} endpoint instances could not be read "
                f"({answer.unknown_because}); SageMaker checks it when it creates the endpoint",
            )
        allowed = int(quota.value)
        ask = (
            "ask for more: aws service-quotas request-service-quota-increase --service-code "
            f"sagemaker --quota-code {quota.code} --desired-value {desired.max_instance_count}"
        )
        if allowed < desired.initial_instance_count:
            raise ConfigError(
                f"the account may run {allowed} {instance_type} instance(s) as endpoints "
                f"(Service Quotas: '{quota.name}', {quota.code} in {self.settings.region}); "
                f"this stage starts {desired.initial_instance_count}. Nothing was created",
                where="instance_type",
                fix=f"{ask}, or pick another instance type",
            )
        if allowed < desired.max_instance_count:
            return (
                f"autoscaling stops at {allowed} {instance_type} instance(s), the account's "
                f"quota ('{quota.name}'), below max_instance_count "
                f"{desired.max_instance_count}: {ask}",
            )
        return ()

    # -- upload -------------------------------------------------------------------------

    def upload(self, files: Sequence[StoredFile], reporter: Reporter) -> list[UploadOutcome]:
        """Each file to `<prefix><key>` (checksummed, resumable multipart)."""
        found = self.store()
        if found is None:
            raise AwsError(
                "the model store does not exist yet, so nothing can be uploaded",
                where=f"stack {self.stack('model-store')}",
                fix="run `deploy up`: its plan creates the model store before uploading",
            )
        store, prefix = found
        total = sum(file.bytes for file in files)
        workers = min(2, max(len(files), 1))
        with self._uploading(reporter, len(files), total), ThreadPoolExecutor(workers) as pool:
            return list(pool.map(lambda file: self._send(store, prefix, file, reporter), files))

    @contextlib.contextmanager
    def _uploading(self, reporter: Reporter, files: int, total_bytes: int) -> Iterator[None]:
        """The upload progress view around sending `files`; a note if interrupted."""
        reporter.upload_started(files, total_bytes)
        try:
            yield
        except KeyboardInterrupt:
            say(
                "upload interrupted: nothing incomplete is visible in the store and the "
                "manifest was not switched; re-run `deploy up` to resume the upload"
            )
            raise
        finally:
            reporter.upload_finished()

    def _send(
        self, store: ModelStore, prefix: str, file: StoredFile, reporter: Reporter
    ) -> UploadOutcome:
        hook = self._before_part
        result = store.upload_file(
            prefix + file.key,
            file.path,
            file.sha256,
            part_size=self._part_size,
            workers=self._workers,
            progress=reporter.uploaded,
            before_part=(lambda number: hook(file.key, number)) if hook else None,
        )
        return UploadOutcome(
            file.key, result.bytes_sent, result.parts_sent, result.parts_reused, result.resumed
        )

    # -- provision and wait -------------------------------------------------------------

    def _stale_stacks(self) -> list[str]:
        """Stacks whose deployed template differs from the stage's (or that are missing)."""
        return [
            name
            for name, template in self.templates().items()
            if not self.rollout.up_to_date(name, template)
        ]

    def _needs_cdk_cli(self) -> bool:
        """Stacks with container image assets are deployed by the CDK CLI (it builds them)."""
        stage = self.synthesized()
        return bool(container_image_stacks(stage.assembly, list(stage.templates)))

    def require_provisioning_tools(self, resources: Sequence[str]) -> None:
        """The CDK CLI and a Docker engine when the stacks build an image, checked before
        anything changes."""
        if not resources or not self._needs_cdk_cli():
            return
        require_tools(
            root=project_root(),
            stage=self.settings.stage,
            stacks=list(resources),
            image=IMAGE,
            engine=self._container_engine,
        )

    def provision_resources(self, resources: Sequence[str], reporter: Reporter) -> None:
        """Deploy the named stacks, in order: with the CDK CLI when one of them has a
        container image asset (it builds the image), else with CloudFormation."""
        if not resources:
            return
        stage = self.synthesized()
        if container_image_stacks(stage.assembly, list(resources)):
            provision_with_cdk_cli(
                self.rollout,
                stage.assembly,
                list(resources),
                reporter,
                root=project_root(),
                engine=self._container_engine,
            )
            return
        templates = self.templates()
        before = self.endpoint_state()
        with self.rollout.rolling_out(reporter):
            for name in resources:
                self.rollout.deploy_stack(name, templates[name], reporter, before=before)

    def provision(self, infra: InfraPlan, desired: InfraSpec, reporter: Reporter) -> None:
        """Every stack whose deployed template differs from the stage's, as `cdk deploy
        --all` would (`deploy up` provisions what its plan lists instead)."""
        self.provision_resources(self._stale_stacks(), reporter)

    def wait(self, *, timeout_s: float, reporter: Reporter) -> EndpointView:
        return self.rollout.wait_endpoint(timeout_s=timeout_s, reporter=reporter)

    # -- inference components (hosting components) -----------------------------------------

    @property
    def components(self) -> InferenceComponents:
        return self.clients.components or InferenceComponents(self.session.client)

    def _endpoint_output(self, key: str) -> str | None:
        """An output of the synthesized endpoint stack, where it is a plain string."""
        outputs = self.templates().get(self.stack("endpoint"), {}).get("Outputs", {})
        value = outputs.get(key, {}).get("Value")
        return value if isinstance(value, str) else None

    def _artifact_url(self, key: str) -> str:
        location = self.store_location()
        if location is None:
            return key  # no store yet: nothing deployed to compare with
        return f"s3://{location.bucket}/{location.prefix}{key}"

    def plan_components(self, desired: Sequence[Component]) -> tuple[ComponentChange, ...]:
        endpoint = self.endpoint_name()
        deployed = self.components.on_endpoint(endpoint) if endpoint else {}
        return plan_components(
            desired,
            deployed,
            image=self._endpoint_output("ImageUri") or "",
            artifact_url=self._artifact_url,
        )

    def apply_components(
        self, actions: Sequence[CreateComponent | UpdateComponent], reporter: Reporter
    ) -> None:
        """Once the endpoint is in service: create or update each component, wait until
        every one is InService (a Failed one stops `deploy up` with its FailureReason,
        nothing published), then set its copy autoscaling."""
        if not actions:
            return
        endpoint = self.rollout.wait_endpoint(
            timeout_s=self.components_timeout_s, reporter=reporter
        ).name
        state = self.stacks.describe(self.stack("endpoint"))
        outputs = state.outputs if state is not None else {}
        variant = outputs.get("VariantName") or self._endpoint_output("VariantName") or ""
        image = self._endpoint_output("ImageUri") or outputs.get("ImageUri", "")
        infra = self.settings.infra
        scaling = Scaling(
            invocations_per_copy=infra.target_invocations_per_instance,
            scale_in_cooldown_s=infra.scale_in_cooldown_s,
            scale_out_cooldown_s=infra.scale_out_cooldown_s,
            alarm_topic=outputs.get("AlarmTopicArn"),
        )
        wanted = {
            action.name: requested(
                action.component,
                image=image,
                artifact_url=self._artifact_url(action.component.archive_key),
            )
            for action in actions
        }
        rolled: list[str] = []
        for action in actions:
            if isinstance(action, CreateComponent):
                say(f"component {action.name}: creating ({action.why})")
                self.components.create(endpoint, variant, wanted[action.name])
                rolled.append(action.name)
            elif action.respec:
                say(f"component {action.name}: rolling update ({action.why})")
                self.components.update(wanted[action.name], action.component.deployment)
                rolled.append(action.name)
        self._wait_components(rolled)
        for action in actions:
            if isinstance(action, CreateComponent) or action.rescale:
                self.components.scale(wanted[action.name], scaling)

    def _wait_components(self, names: Sequence[str]) -> None:
        deadline = time.monotonic() + self.components_timeout_s
        pending = list(names)
        seen: dict[str, str] = {}
        while pending:
            for name in list(pending):
                described = self.components.describe(name) or {}
                status = str(described.get("InferenceComponentStatus", "missing"))
                if seen.get(name) != status:
                    seen[name] = status
                    say(f"component {name}: {status}")
                if status == "InService":
                    pending.remove(name)
                elif status in ("Failed", "missing"):
                    reason = described.get("FailureReason") or "SageMaker gave no reason"
                    raise RolloutFailedError(
                        f"inference component {name} failed: {reason}. The manifest was not "
                        "published: clients still call what they called before",
                        where=f"inference component {name}",
                        fix="fix the reason above (the model's files, or its "
                        f"[stages.{self.settings.stage}.models] requirements) and re-run "
                        "`deploy up`",
                    )
            if not pending:
                return
            if time.monotonic() > deadline:
                raise AwsError(
                    f"inference component(s) {', '.join(pending)} not InService after "
                    f"{self.components_timeout_s:.0f} s; the manifest was not published",
                    where=f"endpoint {self.settings.endpoint_name}",
                    fix="SageMaker carries on; re-run `deploy up` later",
                )
            self._sleep(self._poll_s)

    def delete_components(self, names: Sequence[str], reporter: Reporter) -> None:
        for name in names:
            say(f"component {name}: deleting (no published manifest names its model)")
            self.components.delete(name)

    # -- smoke and publish --------------------------------------------------------------

    def data_plane(self) -> DataPlane:
        name = self._smoke_name or self.endpoint_name() or self.settings.endpoint_name
        return DataPlane(name, self.settings.region, self._smoke_url)

    def store_bucket(self) -> str | None:
        location = self.store_location()
        return location.bucket if location is not None else None

    def publish_manifest(self, document: bytes) -> None:
        """Publish conditionally on the manifest the plan read (deploy.lifecycle.manifest_writes),
        then give each canary it names its rollback alarms (deploy.lifecycle.canary_alarms)."""
        self.resources.publish_manifest(document)
        self.sync_canary_alarms(document)

    def sync_canary_alarms(self, document: bytes) -> dict[str, Any] | None:
        """Alarms for a multi-model manifest's canaries; others' deleted (None: no MME)."""
        from deploy.client import manifest as contract
        from deploy.lifecycle.canary_alarms import CanaryAlarms, CanaryThresholds

        if not self.mode.model_canaries:
            return None
        manifest = contract.loads(document, "the manifest published")
        alarms = CanaryAlarms(self.session, self.settings.endpoint_name)
        return alarms.sync(manifest, CanaryThresholds.of(self.settings.rollout))

    # -- status, down, prune (deploy.lifecycle.operations) ---------------------------------

    def status(self, *, window_s: int = 3600) -> dict[str, Any]:
        return self.operations.status(window_s=window_s)

    def down_plan(self, *, purge: bool) -> dict[str, Any]:
        return self.operations.down_plan(purge=purge)

    def down(self, *, purge: bool, timeout_s: float = 3600.0) -> dict[str, Any]:
        return self.operations.down(purge=purge, timeout_s=timeout_s)

    def prune(self, *, keep: int, dry_run: bool = False) -> dict[str, Any]:
        return self.operations.prune(keep=keep, dry_run=dry_run)


def _not_offered_fix(instance_type: str, offered: Sequence[str]) -> str:
    """Another region, or a type the region offers (its own family's first)."""
    family = instance_type.rsplit(".", 1)[0] + "."
    kin = [name for name in offered if name.startswith(family)]
    others = kin or [name for name in offered if name.startswith("ml.")]
    hint = (
        f" (it offers {', '.join(others[:6])}{', ...' if len(others) > 6 else ''})"
        if others
        else ""
    )
    return (
        "pick a region that offers it (set `region` in deploy.toml, DEPLOY_REGION or --region), "
        f"or an instance type this region offers{hint}"
    )


def _default_template_cache() -> Path:
    return project_root() / "build" / "templates"
