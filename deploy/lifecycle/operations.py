"""`deploy status`, `deploy down` and `deploy prune` for a stage on AWS.

Status reads the stacks, the endpoint, its scaling bounds and recent
metrics, the published manifest's models (as the stage's hosting mode lays
them out), for hosting components each inference component and, where models
take canaries, each canary alarm. Down
deletes what is billed per hour (the API and endpoint stacks); `--purge`
also empties the model store and deletes it and the network. Prune deletes
archives the published manifest no longer references, keeping the newest
`keep` per model as rollback targets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deploy.lifecycle.aws_stage import AwsStage
from deploy.lifecycle.plan import superseded_archives

if TYPE_CHECKING:
    from deploy.aws.inference_components import InferenceComponents

# `deploy down` deletes in this order (the network imports the model-store bucket for
# its S3 endpoint policy, so it goes first); without --purge only what is billed per hour.
DOWN_ORDER = ("api", "async-lane", "endpoint", "network", "model-store")
BILLED_HOURLY = ("api", "async-lane", "endpoint")


class StageOperations:
    def __init__(self, stage: AwsStage) -> None:
        self.stage = stage

    def status(self, *, window_s: int = 3600) -> dict[str, Any]:
        """The stage's stacks, endpoint, scaling and models; each model's calls over the
        last `window_s` (`calls`, from its per-model metrics) once the endpoint exists."""
        stage, clients, settings = self.stage, self.stage.clients, self.stage.settings
        stacks = {}
        for component in ("model-store", "network", "endpoint", "api"):
            stack_state = clients.stacks.describe(stage.stack(component))
            if stack_state is not None:
                stacks[stack_state.name] = stack_state.status
        result: dict[str, Any] = {
            "stage": settings.stage,
            "region": settings.region,
            "stacks": stacks,
            "endpoint": None,
            "scaling": None,
            "models": {},
            "metrics": None,
        }
        location = stage.store_location()
        if location is not None:
            result["model_store"] = f"s3://{location.bucket}/{location.prefix}"
        manifest = stage.published_manifest()
        layout = stage.mode.layout
        if stage.mode.status_names_hosting:
            result["hosting"] = stage.mode.name
        result["models"] = layout.served_models(manifest)
        archive_key = layout.archive_key(manifest)
        if archive_key:
            result["archive"] = archive_key
        if stage.mode.model_canaries:
            result["canary_alarms"] = self._canary_alarms(manifest)
        state = stage.endpoint_state()
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
            if variant is not None and variant.serverless is not None:
                result["endpoint"]["serverless"] = {
                    "memory_mb": variant.serverless.memory_mb,
                    "max_concurrency": variant.serverless.max_concurrency,
                    "provisioned_concurrency": variant.serverless.provisioned_concurrency,
                }
            if variant is not None:
                bounds = stage.bounds(state.name, variant.name)
                if bounds is not None:
                    result["scaling"] = {"min": bounds[0], "max": bounds[1], "source": bounds[2]}
                health = clients.cloudwatch.variant_health(state.name, variant.name)
                result["metrics"] = {
                    "window_minutes": health.window_minutes,
                    "invocations": health.invocations,
                    "errors_5xx": health.errors_5xx,
                    "model_latency_avg_ms": health.model_latency_avg_ms,
                    "model_latency_max_ms": health.model_latency_max_ms,
                }
            if stage.mode.components is not None:
                result["components"] = self._components(state.name)
            result["calls_window_s"] = window_s
            result["calls"] = clients.cloudwatch.model_calls(
                state.name, result["models"], window_s=window_s
            )
        return result

    def _canary_alarms(self, manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
        """Each canary alarm of the endpoint (`<model>/<canary target model>/<kind>`), its
        state, and whether its canary has ended (the manifest no longer names it: the
        rollback function leaves its alarms; the next publish deletes them)."""
        from deploy.client.manifest import parse
        from deploy.lifecycle.canary_alarms import KINDS, CanaryAlarms, alarm_name, alarm_prefix

        endpoint = self.stage.settings.endpoint_name
        current: set[str] = set()
        if manifest is not None:
            for model, info in parse(manifest, "published manifest").models.items():
                if info.canary is not None:
                    target = info.canary.target_model
                    current.update(alarm_name(endpoint, model, target, kind) for kind in KINDS)
        prefix = alarm_prefix(endpoint)
        states = CanaryAlarms(self.stage.clients.session, endpoint).states()
        return [
            {
                "alarm": name.removeprefix(prefix),
                "state": state,
                "canary_ended": name not in current,
            }
            for name, state in sorted(states.items())
        ]

    def _components(self, endpoint: str) -> dict[str, dict[str, Any]]:
        """Hosting components: each inference component on the endpoint, its status,
        copies (now, wanted, autoscaling bounds) and what one copy reserves."""
        return {
            name: {
                "status": item.status,
                "copies": item.current_copies,
                "desired_copies": item.desired_copies,
                "min_copies": item.min_copies,
                "max_copies": item.max_copies,
                "accelerators": item.accelerators,
                "cpus": item.cpus,
                "memory_mb": item.memory_mb,
                "failure_reason": item.failure_reason,
            }
            for name, item in self._inference_components().on_endpoint(endpoint).items()
        }

    def down_plan(self, *, purge: bool) -> dict[str, Any]:
        """What `down(purge=...)` would delete (stacks that exist) and what it keeps."""
        remove: list[str] = []
        keep: list[str] = []
        for component in DOWN_ORDER:
            name = self.stage.stack(component)
            if self.stage.clients.stacks.describe(name) is None:
                continue
            (remove if purge or component in BILLED_HOURLY else keep).append(f"{name}")
        location = self.stage.store_location()
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
        stacks = self.stage.clients.stacks
        removed: list[str] = []
        components = [c for c in DOWN_ORDER if purge or c in BILLED_HOURLY]
        location = self.stage.store_location() if purge else None
        for component in components:
            name = self.stage.stack(component)
            if stacks.describe(name) is None:
                continue
            if component == "model-store" and location is not None:
                # The bucket is retained by the stack: empty and delete it first.
                self.stage.clients.store(location.bucket).purge()
            if component == "endpoint" and self.stage.mode.components is not None:
                self._delete_components(timeout_s)
            stacks.delete(name)
            stacks.wait_deleted(name, timeout_s=timeout_s)
            removed.append(name)
        kept = None if purge or location is not None else self.stage.store_location()
        return {
            "stage": self.stage.settings.stage,
            "removed_stacks": removed,
            "model_store_kept": (f"s3://{kept.bucket}/{kept.prefix}" if kept else None),
            "purged": purge,
        }

    def _delete_components(self, timeout_s: float) -> None:
        """Hosting components: `deploy up` made the inference components, not the stack;
        SageMaker deletes no endpoint that still holds one."""
        import time

        endpoint = self.stage.endpoint_name()
        if endpoint is None:
            return
        self._inference_components().delete_all(
            endpoint, timeout_s=timeout_s, sleep=time.sleep, poll_s=5.0
        )

    def _inference_components(self) -> InferenceComponents:
        """The stage's inference-component client (given, as tests do, or its session's)."""
        from deploy.aws.inference_components import InferenceComponents

        clients = self.stage.clients
        return clients.components or InferenceComponents(clients.session.client)

    def prune(self, *, keep: int, dry_run: bool = False) -> dict[str, Any]:
        found = self.stage.store()
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
        manifest_key = prefix + self.stage.mode.manifest_key
        referenced = self.stage.mode.layout.referenced_keys(self.stage.published_manifest())
        objects = sorted(
            (item for item in store.objects(prefix) if item.key != manifest_key),
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
