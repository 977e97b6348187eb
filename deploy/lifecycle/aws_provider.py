"""The AWS provider: model store in S3, stacks through CloudFormation, SageMaker.

Provisioning deploys the CDK app's synthesized templates with CloudFormation
(CreateStack/UpdateStack), against AWS and against the moto server alike
(the CDK CLI cannot deploy to moto). Stacks go in dependency order; the
model store stack comes first because archives are uploaded before the
endpoint is touched.

An ml.inf1 stage (single-model hosting) differs in three places: its one
archive goes to `<prefix>inf1/model-<hash>.tar.gz` and its manifest to
`<prefix>inf1/manifest.json` (next to the archive, where the SDK looks for
it); its templates point the Model at that archive (`use_model_archive`);
and its stacks are deployed by the pinned CDK CLI, which builds the Neuron
image (a container asset) with Docker: `require_provisioning_tools` checks
for both before anything changes.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.aws import ssm
from deploy.aws.autoscaling import AutoScaling
from deploy.aws.cloudformation import StackEvent, Stacks, template_body
from deploy.aws.cloudwatch import CloudWatch
from deploy.aws.ec2 import cdk_lookup_context
from deploy.aws.s3 import DEFAULT_PART_SIZE, ModelStore
from deploy.aws.sagemaker import EndpointState, SageMaker
from deploy.aws.session import AwsCallError, AwsSession
from deploy.config import DeploySettings
from deploy.errors import AwsError, DeployError
from deploy.lifecycle.assets import publish_file_assets
from deploy.lifecycle.cdk_cli import cdk_deploy, require_tools
from deploy.lifecycle.plan import (
    InfraSpec,
    ModelChange,
    diff_infra,
    manifest_entries,
    superseded_archives,
)
from deploy.lifecycle.provider import DataPlane, EndpointView, InfraPlan, Reporter, UploadOutcome
from deploy.lifecycle.templates import (
    StageTemplates,
    Synthesizer,
    cdk_synthesizer,
    project_root,
    stage_templates,
)
from deploy.neuron.instances import is_inferentia

MANIFEST_KEY = "manifest.json"
# Where an inf1 stage keeps its archives and manifest, under the model-store prefix.
SINGLE_MODEL_FOLDER = "inf1/"
ENDPOINT_TYPE = "AWS::SageMaker::Endpoint"
BOOTSTRAP_STACK = "CDKToolkit"
# `deploy down` deletes in this order (the network imports the model-store bucket for
# its S3 endpoint policy, so it goes first); without --purge only what is billed per hour.
_DOWN_ORDER = ("api", "endpoint", "network", "model-store")
_BILLED_HOURLY = ("api", "endpoint")
# The synthesized templates' CheckBootstrapVersion rule refuses versions 1-5.
MIN_BOOTSTRAP_VERSION = 6


class RolloutFailedError(AwsError):
    """A stack update failed; the previous configuration keeps serving."""


@dataclass(frozen=True)
class StoreLocation:
    bucket: str
    prefix: str


class AwsProvider:
    name = "aws"

    def __init__(
        self,
        settings: DeploySettings,
        *,
        session: AwsSession | None = None,
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
        self.single_model = is_inferentia(settings.instance_type)
        self.session = session or AwsSession(settings.region)
        self.region_source: str | None = self.session.region_source
        self.stacks = Stacks(self.session, sleep=sleep)
        self.sagemaker = SageMaker(self.session)
        self.autoscaling = AutoScaling(self.session)
        self.cloudwatch = CloudWatch(self.session)
        self._template_cache = template_cache or _default_template_cache()
        self._synthesize = synthesize
        self._stage: StageTemplates | None = None
        self._smoke_url = smoke_endpoint_url
        self._smoke_name = smoke_endpoint_name
        self._part_size = part_size
        self._workers = upload_workers
        self._poll_s = poll_s
        self._sleep = sleep
        self._before_part = before_part
        self._container_engine = container_engine
        self._model_archive: str | None = None

    # -- names and locations ----------------------------------------------------------

    def stack(self, component: str) -> str:
        return self.settings.stack_name(component)

    def _synthesized(self) -> StageTemplates:
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
            if synthesize is None:
                # The lookups the CDK CLI would make for this account and region.
                account = settings.infra.account or self.session.account_id()
                synthesize = cdk_synthesizer(cdk_lookup_context(self.session, account))
            self._stage = stage_templates(
                settings,
                cache_dir=self._template_cache,
                synthesize=synthesize,
            )
        return self._stage

    def use_model_archive(self, key: str) -> None:
        """inf1: the endpoint's Model reads `<prefix><key>` (templates are re-synthesized)."""
        if key != self._model_archive:
            self._model_archive = key
            self._stage = None

    @property
    def manifest_key(self) -> str:
        """The published manifest's key under the model-store prefix."""
        return (SINGLE_MODEL_FOLDER if self.single_model else "") + MANIFEST_KEY

    def templates(self) -> dict[str, dict[str, Any]]:
        return self._synthesized().templates

    def store_location(self) -> StoreLocation | None:
        state = self.stacks.describe(self.stack("model-store"))
        if state is None or "ModelBucket" not in state.outputs:
            return None
        prefix = state.outputs.get("ModelPrefix", self.settings.infra.model_prefix)
        return StoreLocation(state.outputs["ModelBucket"], prefix)

    def _store(self) -> tuple[ModelStore, str] | None:
        location = self.store_location()
        if location is None:
            return None
        return ModelStore(self.session, location.bucket), location.prefix

    def endpoint_name(self) -> str | None:
        """The endpoint the stage's stack owns (its physical id), None before it exists."""
        name = self.stack("endpoint")
        if self.stacks.describe(name) is None:
            return None
        ids = self.stacks.physical_ids(name, ENDPOINT_TYPE)
        if not ids:
            return None
        return ids[0].rsplit("/", 1)[-1] if ids[0].startswith("arn:") else ids[0]

    def endpoint_state(self) -> EndpointState | None:
        name = self.endpoint_name()
        return self.sagemaker.endpoint(name) if name else None

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
                version = ssm.parameter(self.session, name)
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
                    fix=f"run `npx cdk bootstrap aws://{account}/{region}` once, then re-run "
                    "`deploy up`",
                )

    def published_manifest(self) -> dict[str, Any] | None:
        import json

        found = self._store()
        if found is None:
            return None
        store, prefix = found
        data = store.get_bytes(prefix + self.manifest_key)
        if data is None:
            return None
        try:
            document: dict[str, Any] = json.loads(data)
        except ValueError as exc:
            raise AwsError(
                f"the published manifest is not JSON: {exc}",
                where=f"s3://{store.bucket}/{prefix}{self.manifest_key}",
                fix="re-run `deploy up` to publish a fresh manifest",
            ) from exc
        return document

    def stored_sha256(self, target_models: Iterable[str]) -> dict[str, str | None]:
        names = list(target_models)
        found = self._store()
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
        bounds = self._bounds(state.name, variant.name)
        config = self.sagemaker.endpoint_config(state.config_name)
        initial = config.variants[0].desired_count if config and config.variants else 0
        return InfraSpec(
            instance_type=variant.instance_type,
            initial_instance_count=initial,
            min_instance_count=bounds[0] if bounds else initial,
            max_instance_count=bounds[1] if bounds else initial,
        )

    def _bounds(self, endpoint: str, variant: str) -> tuple[int, int, str] | None:
        """(min, max, source) of the variant's instance count.

        Application Auto Scaling is asked first (by the physical endpoint name, then
        by the name the template asks for); without a scalable target there (an
        emulator that does not model them), the deployed template's is read.
        """
        for name in (endpoint, self.settings.endpoint_name):
            bounds = self.autoscaling.bounds(name, variant)
            if bounds is not None:
                return bounds.min_capacity, bounds.max_capacity, "application-autoscaling"
        template = self.stacks.template(self.stack("endpoint")) or {}
        for resource in template.get("Resources", {}).values():
            properties = resource.get("Properties", {})
            if (
                resource.get("Type") == "AWS::ApplicationAutoScaling::ScalableTarget"
                and properties.get("ScalableDimension") == "sagemaker:variant:DesiredInstanceCount"
            ):
                return (
                    int(properties["MinCapacity"]),
                    int(properties["MaxCapacity"]),
                    "deployed template",
                )
        return None

    def plan_infra(self, desired: InfraSpec) -> InfraPlan:
        resources: list[dict[str, str]] = []
        missing = False
        for name, template in self.templates().items():
            current = self.stacks.template(name)
            if current is None:
                action = "create"
                missing = True
            elif template_body(current) != template_body(template):
                action = "update"
            else:
                action = "unchanged"
            resources.append({"stack": name, "action": action})
        pending = [item["stack"] for item in resources if item["action"] != "unchanged"]
        if pending:
            self.require_bootstrap(pending)
        current_spec = self.current_infra()
        changes = diff_infra(current_spec, desired)
        if missing:
            overall = "create"
        elif changes or any(item["action"] == "update" for item in resources):
            overall = "update"
        else:
            overall = "none"
        return InfraPlan(
            action=overall,  # type: ignore[arg-type]
            current=current_spec,
            changes=changes,
            resources=tuple(resources),
        )

    # -- upload -------------------------------------------------------------------------

    def ensure_store(self, reporter: Reporter) -> tuple[ModelStore, str]:
        found = self._store()
        if found is not None:
            return found
        name = self.stack("model-store")
        self._deploy_stack(name, self.templates()[name], reporter)
        found = self._store()
        if found is None:
            raise AwsError(
                "the model store stack has no ModelBucket output",
                where=f"stack {name}",
                fix="check the stack's outputs in the CloudFormation console",
            )
        return found

    def upload(
        self, package_dir: Path, changes: Sequence[ModelChange], reporter: Reporter
    ) -> list[UploadOutcome]:
        store, prefix = self.ensure_store(reporter)

        def send(change: ModelChange) -> UploadOutcome:
            return self._send(
                store,
                prefix,
                change.target_model,
                package_dir / change.target_model,
                change.sha256,
                reporter,
            )

        total = sum(change.bytes for change in changes)
        with self._uploading(reporter, len(changes), total), ThreadPoolExecutor(2) as pool:
            return list(pool.map(send, changes))

    def upload_archive(
        self, path: Path, key: str, sha256: str, reporter: Reporter
    ) -> UploadOutcome:
        """inf1: the single-model archive to `<prefix><key>` (resumable, as `upload`)."""
        store, prefix = self.ensure_store(reporter)
        with self._uploading(reporter, 1, path.stat().st_size):
            return self._send(store, prefix, key, path, sha256, reporter)

    @contextlib.contextmanager
    def _uploading(self, reporter: Reporter, files: int, total_bytes: int) -> Iterator[None]:
        """The upload progress view around sending `files`; a note if interrupted."""
        reporter.upload_started(files, total_bytes)
        try:
            yield
        except KeyboardInterrupt:
            _say(
                "upload interrupted: nothing incomplete is visible in the store and the "
                "manifest was not switched; re-run `deploy up` to resume the upload"
            )
            raise
        finally:
            reporter.upload_finished()

    def _send(
        self,
        store: ModelStore,
        prefix: str,
        key: str,
        path: Path,
        sha256: str,
        reporter: Reporter,
    ) -> UploadOutcome:
        """One archive to `<prefix><key>` (checksummed, resumable multipart)."""
        hook = self._before_part
        result = store.upload_file(
            prefix + key,
            path,
            sha256,
            part_size=self._part_size,
            workers=self._workers,
            progress=reporter.uploaded,
            before_part=(lambda number: hook(key, number)) if hook else None,
        )
        return UploadOutcome(
            key, result.bytes_sent, result.parts_sent, result.parts_reused, result.resumed
        )

    # -- provision and wait -------------------------------------------------------------

    def _stale_stacks(self) -> list[str]:
        """Stacks whose deployed template differs from the stage's (or that are missing)."""
        return [
            name
            for name, template in self.templates().items()
            if not self._up_to_date(name, template)
        ]

    def _up_to_date(self, name: str, template: dict[str, Any]) -> bool:
        """The stack runs `template` and has settled (not in progress, not failed)."""
        current = self.stacks.template(name)
        if current is None or template_body(current) != template_body(template):
            return False
        state = self.stacks.describe(name)
        return state is not None and not state.in_progress and not state.failed

    def require_provisioning_tools(self, infra: InfraPlan) -> None:
        """inf1: the CDK CLI and a Docker engine, checked before anything changes."""
        if not self.single_model or infra.action == "none":
            return
        stacks = [item["stack"] for item in infra.resources if item.get("action") != "unchanged"]
        require_tools(
            root=project_root(),
            stage=self.settings.stage,
            stacks=stacks or [self.stack("endpoint")],
            image="infra/neuron/Dockerfile",
            engine=self._container_engine,
        )

    def _provision_with_cdk_cli(self, reporter: Reporter) -> None:
        stacks = self._stale_stacks()
        if not stacks:
            return
        root = project_root()
        cli = require_tools(
            root=root,
            stage=self.settings.stage,
            stacks=stacks,
            image="infra/neuron/Dockerfile",
            engine=self._container_engine,
        )
        region = self.settings.region
        environment = {"AWS_REGION": region, "AWS_DEFAULT_REGION": region}
        if self._container_engine:
            environment["CDK_DOCKER"] = self._container_engine
        before = self.endpoint_state()
        with self._rolling_out(reporter):
            try:
                cdk_deploy(
                    cli, self._synthesized().assembly, stacks, cwd=root, environment=environment
                )
            except DeployError as exc:
                raise self._rollout_failed(", ".join(stacks), exc.message, before) from exc

    def provision(self, infra: InfraPlan, desired: InfraSpec, reporter: Reporter) -> None:
        if self.single_model:
            self._provision_with_cdk_cli(reporter)
            return
        before = self.endpoint_state()
        with self._rolling_out(reporter):
            for name, template in self.templates().items():
                self._deploy_stack(name, template, reporter, before=before)

    @contextlib.contextmanager
    def _rolling_out(self, reporter: Reporter) -> Iterator[None]:
        """The rollout view around a stack update; a note if interrupted."""
        try:
            yield
        except KeyboardInterrupt:
            _say(
                "interrupted: CloudFormation carries on with the running update (and rolls "
                "it back by itself if it fails); the manifest was not switched. Follow it "
                f"with `deploy status --stage {self.settings.stage}` and re-run `deploy up` "
                "to resume"
            )
            raise
        finally:
            reporter.rollout_finished()

    def _deploy_stack(
        self,
        name: str,
        template: dict[str, Any],
        reporter: Reporter,
        *,
        before: EndpointState | None = None,
    ) -> None:
        if self._up_to_date(name, template):
            return
        publish_file_assets(
            self._synthesized().assembly,
            name,
            self.session,
            region=self.settings.region,
        )
        started = time.time()
        try:
            outcome = self.stacks.deploy(name, template, tags={"deploy:stage": self.settings.stage})
        except AwsCallError as exc:
            raise self._rollout_failed(name, exc.message, before) from exc
        if outcome == "unchanged":
            return
        self._wait_stack(name, reporter, since=started, before=before)

    def _wait_stack(
        self,
        name: str,
        reporter: Reporter,
        *,
        since: float,
        before: EndpointState | None,
        timeout_s: float = 3600.0,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.stacks.describe(name)
            events = [e for e in self.stacks.events(name) if e.timestamp.timestamp() >= since - 1]
            endpoint = self.endpoint_state() if name == self.stack("endpoint") else None
            reporter.rollout(
                name,
                state.status if state else "DELETED",
                endpoint.status if endpoint else "",
                [_event_line(e) for e in events],
            )
            if state is None:
                raise AwsError(
                    "the stack disappeared while deploying",
                    where=f"stack {name}",
                    fix="re-run `deploy up`",
                )
            if not state.in_progress:
                if state.failed:
                    raise self._rollout_failed(name, failure_reason(events, state.reason), before)
                return
            if time.monotonic() > deadline:
                raise AwsError(
                    f"still {state.status} after {timeout_s:.0f} s",
                    where=f"stack {name}",
                    fix="CloudFormation carries on; follow it with `deploy status` and re-run "
                    "`deploy up` once it settles",
                )
            self._sleep(self._poll_s)

    def _rollout_failed(
        self, stack: str, reason: str, before: EndpointState | None
    ) -> RolloutFailedError:
        now = None
        try:
            now = self.endpoint_state()
        except DeployError:
            now = None
        serving = now or before
        if serving is not None:
            variant = serving.variants[0] if serving.variants else None
            detail = (
                f"endpoint {serving.name} still serves endpoint config {serving.config_name}"
                + (f" ({variant.instance_type} x{variant.current_count})" if variant else "")
                + f", status {serving.status}"
            )
        else:
            detail = "no endpoint was serving before this rollout"
        if len(reason) > 500:
            reason = reason[:500] + "…"
        return RolloutFailedError(
            f"rollout failed: {reason}. {detail}; the manifest was not switched",
            where=f"stack {stack}",
            fix="correct the setting the reason names (e.g. --instance) and re-run `deploy up`",
        )

    def wait(self, *, timeout_s: float, reporter: Reporter) -> EndpointView:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.endpoint_state()
            if state is None:
                raise AwsError(
                    "the endpoint stack holds no endpoint",
                    where=f"stack {self.stack('endpoint')}",
                    fix="re-run `deploy up`",
                )
            if state.status == "Failed":
                raise RolloutFailedError(
                    f"endpoint failed: {state.failure_reason}",
                    where=f"endpoint {state.name}",
                    fix="fix the reason above and re-run `deploy up`",
                )
            if state.in_service:
                variant = state.variants[0] if state.variants else None
                return EndpointView(
                    name=state.name,
                    status=state.status,
                    config_name=state.config_name,
                    instance_type=variant.instance_type if variant else "",
                    instance_count=variant.current_count if variant else 0,
                )
            if time.monotonic() > deadline:
                raise AwsError(
                    f"endpoint still {state.status} after {timeout_s:.0f} s",
                    where=f"endpoint {state.name}",
                    fix="SageMaker carries on; re-run `deploy up` (or `deploy status`) later",
                )
            reporter.rollout(self.stack("endpoint"), "UPDATE_COMPLETE", state.status, [])
            self._sleep(self._poll_s)

    # -- smoke and publish --------------------------------------------------------------

    def data_plane(self) -> DataPlane:
        name = self._smoke_name or self.endpoint_name() or self.settings.endpoint_name
        return DataPlane(name, self.settings.region, self._smoke_url)

    def publish_manifest(self, document: bytes) -> None:
        found = self._store()
        if found is None:
            raise AwsError(
                "no model store to publish the manifest to",
                where=f"stack {self.stack('model-store')}",
                fix="re-run `deploy up`",
            )
        store, prefix = found
        store.put_bytes(prefix + self.manifest_key, document, content_type="application/json")

    # -- status, down, prune --------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        stacks = {}
        for component in ("model-store", "network", "endpoint", "api"):
            stack_state = self.stacks.describe(self.stack(component))
            if stack_state is not None:
                stacks[stack_state.name] = stack_state.status
        result: dict[str, Any] = {
            "stage": self.settings.stage,
            "region": self.settings.region,
            "stacks": stacks,
            "endpoint": None,
            "scaling": None,
            "models": {},
            "metrics": None,
        }
        location = self.store_location()
        if location is not None:
            result["model_store"] = f"s3://{location.bucket}/{location.prefix}"
        manifest = self.published_manifest()
        if self.single_model:
            from deploy.lifecycle.single_model import published_key

            result["hosting"] = "single-model"
            result["models"] = {
                str(name): str(model.get("target_model", name))
                for name, model in ((manifest or {}).get("models") or {}).items()
            }
            archive_key = published_key(manifest)
            if archive_key:
                result["archive"] = archive_key
        else:
            result["models"] = {
                name: entry.target_model
                for name, entry in manifest_entries(manifest, where="published manifest").items()
            }
        state = self.endpoint_state()
        if state is not None:
            variant = state.variants[0] if state.variants else None
            result["endpoint"] = {
                "name": state.name,
                "status": state.status,
                "config": state.config_name,
                "variant": variant.name if variant else None,
                "instance_type": variant.instance_type if variant else None,
                "instance_count": variant.current_count if variant else 0,
                "failure_reason": state.failure_reason,
            }
            if variant is not None:
                bounds = self._bounds(state.name, variant.name)
                if bounds is not None:
                    result["scaling"] = {"min": bounds[0], "max": bounds[1], "source": bounds[2]}
                health = self.cloudwatch.variant_health(state.name, variant.name)
                result["metrics"] = {
                    "window_minutes": health.window_minutes,
                    "invocations": health.invocations,
                    "errors_5xx": health.errors_5xx,
                    "model_latency_avg_ms": health.model_latency_avg_ms,
                    "model_latency_max_ms": health.model_latency_max_ms,
                }
        return result

    def down_plan(self, *, purge: bool) -> dict[str, Any]:
        """What `down(purge=...)` would delete (stacks that exist) and what it keeps."""
        remove: list[str] = []
        keep: list[str] = []
        for component in _DOWN_ORDER:
            name = self.stack(component)
            if self.stacks.describe(name) is None:
                continue
            (remove if purge or component in _BILLED_HOURLY else keep).append(f"{name}")
        location = self.store_location()
        store = f"s3://{location.bucket}/{location.prefix}" if location else None
        kept = [f"stack {name}" for name in keep]
        if store and not purge:
            kept.append(f"model store {store}")
        return {"remove": remove, "keep": kept, "model_store": store}

    def down(self, *, purge: bool, timeout_s: float = 3600.0) -> dict[str, Any]:
        """Delete the endpoint (and API) stacks: nothing billed per hour remains.

        The model store and the network stay (the next `deploy up` reuses them)
        unless `purge`, which empties and deletes the bucket, then both stacks.
        """
        removed: list[str] = []
        components = [c for c in _DOWN_ORDER if purge or c in _BILLED_HOURLY]
        location = self.store_location() if purge else None
        for component in components:
            name = self.stack(component)
            if self.stacks.describe(name) is None:
                continue
            if component == "model-store" and location is not None:
                # The bucket is retained by the stack: empty and delete it first.
                ModelStore(self.session, location.bucket).purge()
            self.stacks.delete(name)
            self.stacks.wait_deleted(name, timeout_s=timeout_s)
            removed.append(name)
        kept = None if purge or location is not None else self.store_location()
        return {
            "stage": self.settings.stage,
            "removed_stacks": removed,
            "model_store_kept": (f"s3://{kept.bucket}/{kept.prefix}" if kept else None),
            "purged": purge,
        }

    def prune(self, *, keep: int, dry_run: bool = False) -> dict[str, Any]:
        found = self._store()
        if found is None:
            return {
                "deleted": [],
                "kept_referenced": [],
                "bytes_freed": 0,
                "dry_run": dry_run,
                "store": None,
                "sizes": {},
            }
        store, prefix = found
        manifest = self.published_manifest()
        if self.single_model:
            from deploy.lifecycle.single_model import published_key

            archive_key = published_key(manifest)
            referenced = {archive_key} if archive_key else set()
        else:
            referenced = {
                entry.target_model
                for entry in manifest_entries(manifest, where="published manifest").values()
            }
        objects = sorted(
            (item for item in store.objects(prefix) if item.key != prefix + self.manifest_key),
            key=lambda item: (item.last_modified is None, item.last_modified, item.key),
        )
        names = [item.key[len(prefix) :] for item in objects]
        doomed = superseded_archives(names, referenced, keep=keep)
        sizes = {item.key[len(prefix) :]: item.size for item in objects}
        if doomed and not dry_run:
            store.delete([prefix + name for name in doomed])
        return {
            "deleted": doomed,
            "kept_referenced": sorted(referenced),
            "bytes_freed": sum(sizes[name] for name in doomed),
            "dry_run": dry_run,
            "store": f"s3://{store.bucket}/{prefix}",
            "sizes": {name: sizes[name] for name in doomed},
        }


def _default_template_cache() -> Path:
    from deploy.errors import ConfigError

    try:
        return project_root() / "build" / "templates"
    except ConfigError:
        return Path("build/templates")


def failure_reason(events: Sequence[StackEvent], fallback: str) -> str:
    """The first failure CloudFormation recorded (events arrive newest first)."""
    for event in reversed(list(events)):
        if event.status.endswith("_FAILED") and event.reason:
            return f"{event.logical_id} ({event.resource_type}): {event.reason}"
    return fallback or "no reason recorded"


def _event_line(event: StackEvent) -> str:
    reason = f" - {event.reason}" if event.reason else ""
    return f"{event.timestamp:%H:%M:%S} {event.logical_id} {event.status}{reason}"


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
