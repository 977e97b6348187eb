"""A stage's resources on AWS, found by name: stacks, the model store, the endpoint.

Shared by the AWS provider (the `deploy up` stages), the rollout and the
operations (`deploy status/down/prune`); describe and get calls only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from deploy.aws.s3 import ConditionFailedError, ModelStore
from deploy.aws.sagemaker import EndpointState
from deploy.config import DeploySettings
from deploy.errors import AwsError
from deploy.hosting import HostingMode
from deploy.lifecycle.aws_clients import AwsClients
from deploy.lifecycle.manifest_writes import ManifestBasis, conflict

ENDPOINT_TYPE = "AWS::SageMaker::Endpoint"


@dataclass(frozen=True)
class StoreLocation:
    bucket: str
    prefix: str


class AwsStage:
    """`settings`' stage on AWS, as hosted by `mode`, seen through `clients`."""

    def __init__(self, settings: DeploySettings, clients: AwsClients, mode: HostingMode) -> None:
        self.settings = settings
        self.clients = clients
        self.mode = mode
        # What the next manifest publish replaces: the first read since the last publish.
        self.manifest_basis: ManifestBasis | None = None

    def stack(self, component: str) -> str:
        return self.settings.stack_name(component)

    def store_location(self) -> StoreLocation | None:
        state = self.clients.stacks.describe(self.stack("model-store"))
        if state is None or "ModelBucket" not in state.outputs:
            return None
        prefix = state.outputs.get("ModelPrefix", self.settings.infra.model_prefix)
        return StoreLocation(state.outputs["ModelBucket"], prefix)

    def store(self) -> tuple[ModelStore, str] | None:
        """The model store's client and key prefix (None before its stack exists)."""
        location = self.store_location()
        if location is None:
            return None
        return self.clients.store(location.bucket), location.prefix

    def endpoint_name(self) -> str | None:
        """The endpoint the stage's stack owns (its physical id), None before it exists."""
        name = self.stack("endpoint")
        if self.clients.stacks.describe(name) is None:
            return None
        ids = self.clients.stacks.physical_ids(name, ENDPOINT_TYPE)
        if not ids:
            return None
        return ids[0].rsplit("/", 1)[-1] if ids[0].startswith("arn:") else ids[0]

    def endpoint_state(self) -> EndpointState | None:
        name = self.endpoint_name()
        return self.clients.sagemaker.endpoint(name) if name else None

    def published_manifest(self) -> dict[str, Any] | None:
        """The manifest clients resolve names with (the mode's key under the prefix)."""
        found = self.store()
        if found is None:
            return None
        store, prefix = found
        key = prefix + self.mode.manifest_key
        read = store.read(key)
        if self.manifest_basis is None:
            self.manifest_basis = ManifestBasis(read.etag if read is not None else None)
        if read is None:
            return None
        try:
            document: dict[str, Any] = json.loads(read.data)
        except ValueError as exc:
            raise AwsError(
                f"the published manifest is not JSON: {exc}",
                where=f"s3://{store.bucket}/{key}",
                fix="re-run `deploy up` to publish a fresh manifest",
            ) from exc
        return document

    def publish_manifest(self, document: bytes) -> None:
        """Replace the manifest only if it is still the version read first (`If-Match`),
        or create it only if none is published (`If-None-Match: *`); the loser of a race
        raises `ManifestConflictError` and writes nothing."""
        found = self.store()
        if found is None:
            raise AwsError(
                "no model store to publish the manifest to",
                where=f"stack {self.stack('model-store')}",
                fix="re-run `deploy up`",
            )
        store, prefix = found
        key = prefix + self.mode.manifest_key
        if self.manifest_basis is None:
            # Nothing read before (or no store then: `deploy up` created it since): the
            # publish is based on now, and still creates with If-None-Match.
            read = store.read(key)
            self.manifest_basis = ManifestBasis(read.etag if read is not None else None)
        version = self.manifest_basis.version
        try:
            etag = store.put_bytes(
                key,
                document,
                content_type="application/json",
                if_match=version,
                if_none_match=version is None,
            )
        except ConditionFailedError as exc:
            raise conflict(f"s3://{store.bucket}/{key}") from exc
        self.manifest_basis = ManifestBasis(etag)

    def bounds(self, endpoint: str, variant: str) -> tuple[int, int, str] | None:
        """(min, max, source) of the variant's instance count.

        Application Auto Scaling is asked first (by the physical endpoint name, then
        by the name the template asks for); without a scalable target there (an
        emulator that does not model them), the deployed template's is read.
        """
        for name in (endpoint, self.settings.endpoint_name):
            bounds = self.clients.autoscaling.bounds(name, variant)
            if bounds is not None:
                return bounds.min_capacity, bounds.max_capacity, "application-autoscaling"
        template = self.clients.stacks.template(self.stack("endpoint")) or {}
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
