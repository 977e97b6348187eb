"""`deploy up` with hosting components: per-component plans and calls. STUBBED SAGEMAKER.

LABEL: the inference components' side of AWS here is a botocore Stubber, not
SageMaker. moto has no inference-component API (and its CloudFormation skips
unknown types), so SageMaker's Create/Update/Describe/List/DeleteInferenceComponent,
Application Auto Scaling's copy scaling and CloudWatch's scale-from-zero alarm are
botocore clients with a Stubber built from botocore's service models: each call
our code makes must be the next one expected, with exactly the expected
parameters, and each answer written here must fit the service model. The
Describe answers echo what the test saw our code send (what SageMaker would hold).

Everything else is real: CDK synthesis of the stage's stacks, their
CloudFormation deployment on the moto server, S3 uploads of the archives and
the published manifest there, and the smoke test: the SDK calls each created or
updated component by its InferenceComponentName on a SageMaker-compatible data
plane (`--smoke-endpoint-url`), the local endpoint of hosting components on the
real tritonserver, which refuses a call that names no component. moto's SageMaker
refuses an endpoint config whose variant names no model; SageMaker accepts one
for inference components (`ManagedInstanceScaling`), so the server's check is
patched to skip such variants.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from rich.console import Console

from deploy.aws.inference_components import InferenceComponents
from deploy.catalogue.instances import hourly_price
from deploy.client.manifest import INFERENCE_COMPONENT_HEADER
from deploy.config import DeploySettings, load_settings
from deploy.lifecycle.actions import CreateComponent, DeleteComponent, UpdateComponent
from deploy.lifecycle.aws_clients import aws_clients
from deploy.lifecycle.aws_provider import AwsProvider, RolloutFailedError
from deploy.lifecycle.prices import CostEstimate
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.render import render_status
from deploy.lifecycle.up import UpOptions, UpResult, up
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
]

ENDPOINT = "triton-mixed"  # each test's own stage and endpoint (one moto server)
BROKEN = "triton-broken"
INSTANCE = "ml.g4dn.12xlarge"  # 4 GPUs; moto's SageMaker knows the type
ACCOUNT_ARN = "arn:aws:sagemaker:us-east-1:123456789012"
DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
NOW = datetime.now(UTC)
CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [{{ name: "x", data_type: TYPE_FP32, dims: [3] }}]
output [{{ name: "y", data_type: TYPE_FP32, dims: [3] }}]
instance_group [{{ kind: {kind}, count: 2 }}]
"""


@pytest.fixture(scope="module")
def moto_env(moto_server: str) -> Iterator[str]:
    from moto.sagemaker.models import SageMakerModelBackend

    check = SageMakerModelBackend.validate_production_variants

    def components_allowed(self: Any, variants: list[dict[str, Any]]) -> None:
        check(self, [variant for variant in variants if "ModelName" in variant])

    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        patch.setattr(SageMakerModelBackend, "validate_production_variants", components_allowed)
        yield moto_server


@pytest.fixture(scope="module")
def data_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The smoke test's data plane: a local endpoint of components named as the stage
    names them (`<endpoint>-<model>`), serving add/sub models of the stage's names."""
    from deploy.local.modes.components import ComponentEndpoint
    from deploy.local.modes.endpoint import EndpointOptions
    from deploy.packaging import package_repository
    from tests.functional.local_models import addsub_files, write_folder

    repository = tmp_path_factory.mktemp("data-plane-repo")
    for name in ("detector", "tabular"):
        write_folder(repository, addsub_files(name))
    store = tmp_path_factory.mktemp("data-plane-store")
    package_repository(repository, store)
    served = ComponentEndpoint(store, options=EndpointOptions(endpoint_name=ENDPOINT))
    served.start()
    yield served.url
    served.stop()


# The add/sub models' tensors, which the smoke test generates its inputs from.
TENSORS = {
    "inputs": [{"name": f"INPUT{i}", "datatype": "FP32", "shape": [4]} for i in (0, 1)],
    "outputs": [{"name": f"OUTPUT{i}", "datatype": "FP32", "shape": [4]} for i in (0, 1)],
}


class Stage:
    """A repository (a GPU and a CPU model), its package written to the manifest
    contract (opaque archives), and the settings of a components stage."""

    def __init__(self, root: Path, endpoint: str = ENDPOINT) -> None:
        self.root = root
        self.endpoint = endpoint
        self.repository = root / "models"
        self.package = root / "package"
        self.package.mkdir(parents=True)
        self.entries: dict[str, dict[str, Any]] = {}

    def put(self, name: str, kind: str, data: bytes) -> str:
        folder = self.repository / name
        (folder / "1").mkdir(parents=True, exist_ok=True)
        (folder / "config.pbtxt").write_text(CONFIG.format(name=name, kind=kind), "utf-8")
        (folder / "1" / "model.onnx").write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        target = f"{name}-{digest[:16]}.tar.gz"
        (self.package / target).write_bytes(data)
        self.entries[name] = {
            "name": name,
            "target_model": target,
            "sha256": digest,
            "bytes": len(data),
            "kind": "model",
            "max_batch_size": 8,
            **TENSORS,
        }
        self._write()
        return target

    def remove(self, name: str) -> None:
        (self.repository / name / "config.pbtxt").unlink()
        (self.repository / name / "1" / "model.onnx").unlink()
        (self.repository / name / "1").rmdir()
        (self.repository / name).rmdir()
        del self.entries[name]
        self._write()

    def _write(self) -> None:
        document = {"format": 1, "hosting": "multi-model", "models": self.entries}
        (self.package / "manifest.json").write_text(json.dumps(document), encoding="utf-8")

    def settings(self) -> DeploySettings:
        models = {"tabular": {"min_copies": 0, "max_copies": 3, "memory_mb": 2048}}
        return load_settings(
            stage="prod",
            endpoint_name=self.endpoint,
            instance_type=INSTANCE,
            hosting="components",
            repository=self.repository,
            package_dir=self.package,
            infra={"min_instance_count": 0, "max_instance_count": 2},
            models={name: value for name, value in models.items() if name in self.entries},
        )


class Stubbed:
    """The three stubbed clients, and each SageMaker request our code sent."""

    def __init__(self) -> None:
        session = boto3.Session(
            aws_access_key_id="stub", aws_secret_access_key="stub", region_name="us-east-1"
        )
        self.clients = {
            service: session.client(service, endpoint_url="http://127.0.0.1:9")
            for service in ("sagemaker", "application-autoscaling", "cloudwatch")
        }
        self.stubs = {service: Stubber(client) for service, client in self.clients.items()}
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.clients["sagemaker"].meta.events.register(
            "provide-client-params.sagemaker.*", self._record
        )
        for stub in self.stubs.values():
            stub.activate()

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.sent.append((model.name, json.loads(json.dumps(params))))

    def components(self) -> InferenceComponents:
        return InferenceComponents(self.clients.__getitem__)

    def expect(self, service: str, method: str, response: dict[str, Any], params: Any) -> None:
        self.stubs[service].add_response(method, response, params)

    def done(self) -> None:
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()

    def created(self, name: str) -> dict[str, Any]:
        """The last Specification our code sent for component `name`."""
        for operation, params in reversed(self.sent):
            if operation in {"CreateInferenceComponent", "UpdateInferenceComponent"} and (
                params["InferenceComponentName"] == name
            ):
                return dict(params["Specification"])
        raise AssertionError(f"no request for {name}")


def describe(
    name: str,
    specification: dict[str, Any],
    status: str,
    reason: str = "",
    endpoint: str = ENDPOINT,
) -> dict[str, Any]:
    """DescribeInferenceComponent's answer; `specification` as the request sent it."""
    summary: dict[str, Any] = {}
    if specification:
        container = specification["Container"]
        summary = {
            "Container": {
                "DeployedImage": {"SpecifiedImage": container["Image"]},
                "ArtifactUrl": container["ArtifactUrl"],
                "Environment": container["Environment"],
            },
            "ComputeResourceRequirements": specification["ComputeResourceRequirements"],
        }
    answer = {
        "InferenceComponentName": name,
        "InferenceComponentArn": f"{ACCOUNT_ARN}:inference-component/{name}",
        "EndpointName": endpoint,
        "EndpointArn": f"{ACCOUNT_ARN}:endpoint/{endpoint}",
        "VariantName": "AllTraffic",
        "Specification": summary,
        "RuntimeConfig": {"DesiredCopyCount": 1, "CurrentCopyCount": 1},
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
        "InferenceComponentStatus": status,
    }
    if reason:
        answer["FailureReason"] = reason
    return answer


def expect_plan(
    stubbed: Stubbed, names: dict[str, tuple[int, int]], endpoint: str, failed: str = ""
) -> None:
    """The plan's reads: the components on the endpoint, each described (`failed`: that
    one's last rollout Failed), their bounds."""
    stubbed.expect(
        "sagemaker",
        "list_inference_components",
        {
            "InferenceComponents": [
                {
                    "InferenceComponentName": name,
                    "InferenceComponentArn": f"{ACCOUNT_ARN}:inference-component/{name}",
                    "EndpointName": ENDPOINT,
                    "EndpointArn": f"{ACCOUNT_ARN}:endpoint/{ENDPOINT}",
                    "VariantName": "AllTraffic",
                    "CreationTime": NOW,
                    "LastModifiedTime": NOW,
                    "InferenceComponentStatus": "InService",
                }
                for name in sorted(names)
            ]
        },
        {"EndpointNameEquals": endpoint},
    )
    for name in sorted(names):
        stubbed.expect(
            "sagemaker",
            "describe_inference_component",
            describe(name, stubbed.created(name), "Failed", "out of memory")
            if name == failed
            else describe(name, stubbed.created(name), "InService"),
            {"InferenceComponentName": name},
        )
    stubbed.expect(
        "application-autoscaling",
        "describe_scalable_targets",
        {
            "ScalableTargets": [
                {
                    "ServiceNamespace": "sagemaker",
                    "ResourceId": f"inference-component/{name}",
                    "ScalableDimension": DIMENSION,
                    "MinCapacity": low,
                    "MaxCapacity": high,
                    "RoleARN": "arn:aws:iam::123456789012:role/scaling",
                    "CreationTime": NOW,
                }
                for name, (low, high) in sorted(names.items())
            ]
        },
        {
            "ServiceNamespace": "sagemaker",
            "ResourceIds": [f"inference-component/{name}" for name in sorted(names)],
            "ScalableDimension": DIMENSION,
        },
    )


def expect_scaling(stubbed: Stubbed, name: str, low: int, high: int) -> None:
    resource = f"inference-component/{name}"
    stubbed.expect(
        "application-autoscaling",
        "register_scalable_target",
        {},
        {
            "ServiceNamespace": "sagemaker",
            "ResourceId": resource,
            "ScalableDimension": DIMENSION,
            "MinCapacity": low,
            "MaxCapacity": high,
        },
    )
    stubbed.expect(
        "application-autoscaling",
        "put_scaling_policy",
        {"PolicyARN": f"arn:aws:autoscaling:us-east-1:1:policy/{name}/target"},
        {
            "PolicyName": "InvocationsPerCopy",
            "ServiceNamespace": "sagemaker",
            "ResourceId": resource,
            "ScalableDimension": DIMENSION,
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": ANY,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
                },
                "ScaleInCooldown": ANY,
                "ScaleOutCooldown": ANY,
            },
        },
    )
    if low > 0:
        stubbed.expect(
            "cloudwatch",
            "delete_alarms",
            {},
            {"AlarmNames": [f"{name}-NoCapacityInvocationFailures"]},
        )
        return
    step = f"arn:aws:autoscaling:us-east-1:1:policy/{name}/step"
    stubbed.expect(
        "application-autoscaling",
        "put_scaling_policy",
        {"PolicyARN": step},
        {
            "PolicyName": "ScaleFromZero",
            "ServiceNamespace": "sagemaker",
            "ResourceId": resource,
            "ScalableDimension": DIMENSION,
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": {
                "AdjustmentType": "ChangeInCapacity",
                "MetricAggregationType": "Maximum",
                "Cooldown": 60,
                "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
            },
        },
    )
    stubbed.expect(
        "cloudwatch",
        "put_metric_alarm",
        {},
        {
            "AlarmName": f"{name}-NoCapacityInvocationFailures",
            "AlarmDescription": ANY,
            "Namespace": "AWS/SageMaker",
            "MetricName": "NoCapacityInvocationFailures",
            "Dimensions": [{"Name": "InferenceComponentName", "Value": name}],
            "Statistic": "Sum",
            "Period": 60,
            "EvaluationPeriods": 1,
            "DatapointsToAlarm": 1,
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "missing",
            # The step policy first (it adds the copy), then the stage's alarm topic.
            "AlarmActions": [step, ANY],
        },
    )


def expect_listing(name: str) -> dict[str, Any]:
    return {
        "InferenceComponents": [
            {
                "InferenceComponentName": name,
                "InferenceComponentArn": f"{ACCOUNT_ARN}:inference-component/{name}",
                "EndpointName": ENDPOINT,
                "EndpointArn": f"{ACCOUNT_ARN}:endpoint/{ENDPOINT}",
                "VariantName": "AllTraffic",
                "CreationTime": NOW,
                "LastModifiedTime": NOW,
                "InferenceComponentStatus": "InService",
            }
        ]
    }


def run_up(
    stage: Stage, stubbed: Stubbed, cache: Path, data_plane: str | None = None
) -> tuple[UpResult, AwsProvider]:
    """`deploy up`; with a `data_plane` URL its smoke test calls the components there
    (as `--smoke-endpoint-url URL --smoke-endpoint-name ENDPOINT`), else it is skipped."""
    settings = stage.settings()
    clients = dataclasses.replace(aws_clients("us-east-1"), components=stubbed.components())
    provider = AwsProvider(
        settings,
        clients=clients,
        template_cache=cache,
        poll_s=0.01,
        smoke_endpoint_url=data_plane,
        smoke_endpoint_name=ENDPOINT if data_plane else None,
    )
    provider.components_timeout_s = 60
    result = up(
        settings,
        provider,
        repository=stage.repository,
        package_dir=stage.package,
        options=UpOptions(skip_package=True, skip_smoke=data_plane is None, timeout_s=60),
        reporter=SilentReporter(),
    )
    return result, provider


def smoked(result: UpResult) -> dict[str, str | None]:
    """Each smoke-tested model and the component it called (all answered)."""
    assert all(s.ok for s in result.smoke), result.smoke
    return {s.name: s.inference_component for s in result.smoke}


def published(provider: AwsProvider) -> dict[str, Any]:
    document = provider.published_manifest()
    assert document is not None
    return document


def test_a_gpu_and_a_cpu_model_deploy_as_two_components_and_each_changes_alone(
    moto_env: str, data_plane: str, tmp_path: Path
) -> None:
    cache = tmp_path / "templates"
    stage = Stage(tmp_path)
    stage.put("detector", "KIND_GPU", b"\0" * (3 * 1024 * 1024))
    stage.put("tabular", "KIND_CPU", b"tabular v1")
    detector, tabular = f"{ENDPOINT}-detector", f"{ENDPOINT}-tabular"

    # GIVEN nothing deployed: the plan reads no component (no endpoint yet); deploy up
    # creates both, waits for each to be InService, then scales each.
    stubbed = Stubbed()
    for name in (detector, tabular):
        stubbed.expect(
            "sagemaker",
            "create_inference_component",
            {"InferenceComponentArn": f"{ACCOUNT_ARN}:inference-component/{name}"},
            {
                "InferenceComponentName": name,
                # The endpoint the stack made (moto names it after the stack's resource).
                "EndpointName": ANY,
                "VariantName": "AllTraffic",
                "Specification": ANY,
                "RuntimeConfig": {"CopyCount": 1},
            },
        )
    # The CPU model takes a poll to start: deploy up waits for it.
    stubbed.stubs["sagemaker"].add_response(
        "describe_inference_component",
        describe(detector, {}, "InService"),
        {"InferenceComponentName": detector},
    )
    for status in ("Creating", "InService"):
        stubbed.stubs["sagemaker"].add_response(
            "describe_inference_component",
            describe(tabular, {}, status),
            {"InferenceComponentName": tabular},
        )
    expect_scaling(stubbed, detector, 1, 4)
    expect_scaling(stubbed, tabular, 0, 3)

    # WHEN deploy up runs
    first, provider = run_up(stage, stubbed, cache, data_plane)

    # THEN the plan had one create action per model, and two components exist with
    # their own requirements: the GPU model 1 GPU, the CPU model 2 cores and no GPU.
    stubbed.done()
    assert [type(a) for a in first.plan.actions if "Component" in type(a).__name__] == [
        CreateComponent,
        CreateComponent,
    ]
    location, endpoint = provider.store_location(), provider.endpoint_name()
    assert location is not None and endpoint is not None
    creates = [p for op, p in stubbed.sent if op == "CreateInferenceComponent"]
    assert {p["EndpointName"] for p in creates} == {endpoint}
    image = provider.templates()[settings_stack(provider)]["Outputs"]["ImageUri"]["Value"]
    document = published(provider)
    for name, model in ((detector, "detector"), (tabular, "tabular")):
        target = document["models"][model]["target_model"]
        container = stubbed.created(name)["Container"]
        assert container == {
            "Image": image,
            "ArtifactUrl": f"s3://{location.bucket}/{location.prefix}{target}",
            # Its one model, and Triton's metrics (the per-model dashboards read them).
            "Environment": {
                "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": model,
                "SAGEMAKER_TRITON_ALLOW_METRICS": "true",
            },
        }
        # The published manifest names each model's component (the SDK's header).
        assert document["models"][model]["inference_component"] == name
    assert document["hosting"] == "components"
    # ... with the component addressing, which SDKs read from `invoke`.
    assert document["invoke"]["addressing"] == INFERENCE_COMPONENT_HEADER
    # Each new component answered the smoke test, called by its name, before publishing.
    assert smoked(first) == {"detector": detector, "tabular": tabular}
    # KIND_GPU: one GPU; twice 3 MB of files plus the server's 1024 MB.
    assert stubbed.created(detector)["ComputeResourceRequirements"] == {
        "NumberOfCpuCoresRequired": 1.0,
        "MinMemoryRequiredInMb": 1030,
        "NumberOfAcceleratorDevicesRequired": 1.0,
    }
    # KIND_CPU count 2: two cores, no GPU; memory_mb from deploy.toml.
    assert stubbed.created(tabular)["ComputeResourceRequirements"] == {
        "NumberOfCpuCoresRequired": 2.0,
        "MinMemoryRequiredInMb": 2048,
    }

    # GIVEN only the CPU model's files change
    old_detector = stubbed.created(detector)
    stage.put("tabular", "KIND_CPU", b"tabular v2")
    expect_plan(stubbed, {detector: (1, 4), tabular: (0, 3)}, endpoint)
    stubbed.expect(
        "sagemaker",
        "update_inference_component",
        {"InferenceComponentArn": f"{ACCOUNT_ARN}:inference-component/{tabular}"},
        {
            "InferenceComponentName": tabular,
            "Specification": ANY,
            # The stage's rollout (linear, 50% by default): copies replaced in batches.
            "DeploymentConfig": {
                "RollingUpdatePolicy": {
                    "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                    "WaitIntervalInSeconds": 300,
                    "MaximumExecutionTimeoutInSeconds": 3600,
                    "RollbackMaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                }
            },
        },
    )
    for status in ("Updating", "InService"):
        stubbed.stubs["sagemaker"].add_response(
            "describe_inference_component",
            describe(tabular, {}, status),
            {"InferenceComponentName": tabular},
        )

    # WHEN deploy up runs again
    second, provider = run_up(stage, stubbed, cache, data_plane)

    # THEN the one update call was the CPU model's (the Stubber refuses any other
    # call), with its new archive; no stack changed; the GPU model's is as it was.
    stubbed.done()
    updates = [p for op, p in stubbed.sent if op == "UpdateInferenceComponent"]
    assert [p["InferenceComponentName"] for p in updates] == [tabular]
    new_target = published(provider)["models"]["tabular"]["target_model"]
    assert updates[0]["Specification"]["Container"]["ArtifactUrl"].endswith(new_target)
    component_actions = [a for a in second.plan.actions if "Component" in type(a).__name__]
    assert [(type(a), a.name) for a in component_actions] == [(UpdateComponent, tabular)]
    assert not [r for r in second.plan.resources if r.get("action") != "unchanged"]
    assert stubbed.created(detector) == old_detector
    assert smoked(second) == {"tabular": tabular}  # only the updated component
    # The plan said how the update rolls out.
    assert any(
        note.startswith("component updates (tabular) replace 50% of the copies at a time")
        for note in second.plan.notes
    ), second.plan.notes

    # WHEN deploy up runs a third time with nothing changed
    mutations = len([op for op, _ in stubbed.sent if not op.startswith(("Describe", "List"))])
    expect_plan(stubbed, {detector: (1, 4), tabular: (0, 3)}, endpoint)
    third, provider = run_up(stage, stubbed, cache, data_plane)

    # THEN it plans nothing and makes no call but the plan's reads
    stubbed.done()
    assert third.plan.actions == ()
    assert third.smoke == []
    assert len([op for op, _ in stubbed.sent if not op.startswith(("Describe", "List"))]) == (
        mutations
    )

    # WHEN deploy status runs: it lists each component with its copies and needs
    expect_plan(stubbed, {detector: (1, 4), tabular: (0, 3)}, endpoint)
    status = provider.status()
    stubbed.done()
    assert status["components"] == {
        detector: {
            "status": "InService",
            "copies": 1,
            "desired_copies": 1,
            "min_copies": 1,
            "max_copies": 4,
            "accelerators": 1,
            "cpus": 1.0,
            "memory_mb": 1030,
            "failure_reason": "",
        },
        tabular: {
            "status": "InService",
            "copies": 1,
            "desired_copies": 1,
            "min_copies": 0,
            "max_copies": 3,
            "accelerators": 0,
            "cpus": 2.0,
            "memory_mb": 2048,
            "failure_reason": "",
        },
    }
    printed = Console(record=True, width=120)
    render_status(status, printed)
    text = printed.export_text()
    assert "inference components" in text
    assert "1 CPU, 1030 MB, 1 accelerator(s)" in text and "2 CPU, 2048 MB" in text
    assert "1 (1-4)" in text and "1 (0-3)" in text

    # GIVEN the GPU model's component failed its last rollout, its model unchanged
    expect_plan(stubbed, {detector: (1, 4), tabular: (0, 3)}, endpoint, failed=detector)
    stubbed.expect(
        "sagemaker",
        "update_inference_component",
        {"InferenceComponentArn": f"{ACCOUNT_ARN}:inference-component/{detector}"},
        {"InferenceComponentName": detector, "Specification": ANY, "DeploymentConfig": ANY},
    )
    stubbed.stubs["sagemaker"].add_response(
        "describe_inference_component",
        describe(detector, {}, "InService"),
        {"InferenceComponentName": detector},
    )

    # WHEN deploy up runs
    again, provider = run_up(stage, stubbed, cache, data_plane)

    # THEN it updates that component and smoke-tests it by its name, though no model
    # changed (a new copy serves it); nothing is published (the manifest is the same)
    stubbed.done()
    assert [(type(a), a.name) for a in again.plan.actions] == [(UpdateComponent, detector)]
    assert smoked(again) == {"detector": detector}
    assert not again.published

    # GIVEN the CPU model is removed from the repository
    stage.remove("tabular")
    expect_plan(stubbed, {detector: (1, 4), tabular: (0, 3)}, endpoint)
    seen_at_delete: list[dict[str, Any]] = []
    stubbed.expect(
        "application-autoscaling",
        "deregister_scalable_target",
        {},
        {
            "ServiceNamespace": "sagemaker",
            "ResourceId": f"inference-component/{tabular}",
            "ScalableDimension": DIMENSION,
        },
    )
    stubbed.expect(
        "cloudwatch",
        "delete_alarms",
        {},
        {"AlarmNames": [f"{tabular}-NoCapacityInvocationFailures"]},
    )
    stubbed.expect(
        "sagemaker", "delete_inference_component", {}, {"InferenceComponentName": tabular}
    )
    stubbed.clients["sagemaker"].meta.events.register(
        "provide-client-params.sagemaker.DeleteInferenceComponent",
        lambda **_: seen_at_delete.append(published(provider)),
    )

    # WHEN deploy up runs
    fourth, provider = run_up(stage, stubbed, cache, data_plane)

    # THEN the component is deleted last, when the published manifest no longer names it
    stubbed.done()
    assert [type(a).__name__ for a in fourth.plan.actions][-2:] == [
        "PublishManifest",
        "DeleteComponent",
    ]
    assert isinstance(fourth.plan.actions[-1], DeleteComponent)
    assert fourth.smoke == []  # the remaining component did not change
    # The price is the instances' (0-2 x the instance type), however many components.
    price = hourly_price(INSTANCE, "us-east-1")
    assert price is not None
    for result in (first, fourth):
        cost = result.plan.cost
        assert isinstance(cost, CostEstimate)
        assert (cost.min_instances, cost.max_instances) == (0, 2)
        assert cost.hourly_max == pytest.approx(2 * price)
    assert len(seen_at_delete) == 1
    assert set(seen_at_delete[0]["models"]) == {"detector"}

    # WHEN the stage goes down: the components deploy up made go before the endpoint
    # stack (SageMaker deletes no endpoint that holds one)
    stubbed.expect(
        "sagemaker",
        "list_inference_components",
        expect_listing(detector),
        {"EndpointNameEquals": endpoint},
    )
    stubbed.expect(
        "application-autoscaling",
        "deregister_scalable_target",
        {},
        {
            "ServiceNamespace": "sagemaker",
            "ResourceId": f"inference-component/{detector}",
            "ScalableDimension": DIMENSION,
        },
    )
    stubbed.expect(
        "cloudwatch",
        "delete_alarms",
        {},
        {"AlarmNames": [f"{detector}-NoCapacityInvocationFailures"]},
    )
    stubbed.expect(
        "sagemaker", "delete_inference_component", {}, {"InferenceComponentName": detector}
    )
    stubbed.stubs["sagemaker"].add_client_error(
        "describe_inference_component",
        "ValidationException",
        f"Could not find inference component {detector}.",
        expected_params={"InferenceComponentName": detector},
    )
    endpoint_stack = provider.stack("endpoint")
    stack_at_delete: list[bool] = []
    stubbed.clients["sagemaker"].meta.events.register(
        "provide-client-params.sagemaker.DeleteInferenceComponent",
        lambda **_: stack_at_delete.append(provider.stacks.describe(endpoint_stack) is not None),
    )
    down = provider.down(purge=False, timeout_s=60)
    stubbed.done()
    assert endpoint_stack in down["removed_stacks"]
    assert stack_at_delete[-1] is True


def settings_stack(provider: AwsProvider) -> str:
    return provider.stack("endpoint")


def test_a_failed_component_stops_deploy_up_with_its_reason_and_nothing_published(
    moto_env: str, tmp_path: Path
) -> None:
    stage = Stage(tmp_path, BROKEN)
    stage.put("detector", "KIND_GPU", b"onnx")
    stubbed = Stubbed()
    name = f"{BROKEN}-detector"
    stubbed.expect(
        "sagemaker",
        "create_inference_component",
        {"InferenceComponentArn": f"{ACCOUNT_ARN}:inference-component/{name}"},
        {
            "InferenceComponentName": name,
            "EndpointName": ANY,
            "VariantName": "AllTraffic",
            "Specification": ANY,
            "RuntimeConfig": {"CopyCount": 1},
        },
    )
    reason = "The model in /opt/ml/model failed to load: config.pbtxt: unknown platform"
    stubbed.stubs["sagemaker"].add_response(
        "describe_inference_component",
        describe(name, {}, "Failed", reason, endpoint=BROKEN),
        {"InferenceComponentName": name},
    )

    with pytest.raises(RolloutFailedError) as failed:
        run_up(stage, stubbed, tmp_path / "templates")

    stubbed.done()
    assert reason in failed.value.message
    assert "not published" in failed.value.message
    settings = stage.settings()
    provider = AwsProvider(settings, template_cache=tmp_path / "templates")
    assert provider.published_manifest() is None
