"""`deploy up` stages with the AWS provider against the moto server.

Real CDK synth, real CloudFormation deployment (moto's), real S3 multipart
uploads. Archives here are opaque bytes and the smoke stage is skipped (the
data plane is exercised in test_lifecycle_up_e2e.py against Triton).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from deploy.config import DeploySettings, load_settings
from deploy.errors import AwsError
from deploy.lifecycle.aws_provider import AwsProvider, RolloutFailedError
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.up import UpOptions, UpResult, up

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.slow,
    # moto's CloudFormation skips resource types it does not model (e.g. security group
    # egress rules, bucket policies) with a UserWarning raised in the server's thread;
    # as an error it would turn the request into a 500.
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
]

PART = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def moto_env(moto_server: str) -> Iterator[str]:
    """boto3 pointed at the session's moto server, the account CDK-bootstrapped."""
    with aws_environment(moto_server):
        yield moto_server


@contextlib.contextmanager
def aws_environment(url: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", url)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        patch.delenv("AWS_PROFILE", raising=False)
        # What `cdk bootstrap` leaves behind and the templates' BootstrapVersion reads.
        boto3.client("ssm").put_parameter(
            Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True
        )
        account = boto3.client("sts").get_caller_identity()["Account"]
        boto3.client("s3").create_bucket(Bucket=f"cdk-hnb659fds-assets-{account}-us-east-1")
        # moto's server imports a service's models on its first request, and only then
        # can its CloudFormation create that service's resources: touch each once.
        boto3.client("application-autoscaling").describe_scalable_targets(
            ServiceNamespace="sagemaker"
        )
        boto3.client("cloudwatch").describe_alarms()
        boto3.client("sns").list_topics()
        yield


class Package:
    """A package folder written by hand to the manifest contract (opaque archives)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.models: dict[str, dict[str, Any]] = {}

    def put(self, name: str, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        target = f"{name}-{digest[:16]}.tar.gz"
        (self.root / target).write_bytes(data)
        self.models[name] = {
            "name": name,
            "target_model": target,
            "sha256": digest,
            "bytes": len(data),
            "source_digest": digest,
            "kind": "model",
            "backend": "python",
            "platform": "",
            "max_batch_size": 0,
            "inputs": [],
            "outputs": [],
            "contains": [name],
        }
        document = {"format": 1, "hosting": "multi-model", "models": self.models}
        (self.root / "manifest.json").write_text(json.dumps(document), encoding="utf-8")
        return target


def settings_for(tmp: Path, stage: str, instance: str, *, api: bool = False) -> DeploySettings:
    return load_settings(
        stage=stage,
        instance_type=instance,
        repository=tmp,
        package_dir=tmp / "package",
        infra={"api": api, "max_instance_count": 2},
    )


def run_up(
    settings: DeploySettings, cache: Path, **provider_args: Any
) -> tuple[UpResult, AwsProvider]:
    provider = AwsProvider(
        settings, template_cache=cache, poll_s=0.05, part_size=PART, **provider_args
    )
    result = up(
        settings,
        provider,
        repository=settings.repository,
        package_dir=settings.package_dir,
        options=UpOptions(skip_package=True, skip_smoke=True, timeout_s=60),
        reporter=SilentReporter(),
    )
    return result, provider


def published(provider: AwsProvider) -> dict[str, str]:
    manifest = provider.published_manifest() or {"models": {}}
    return {name: model["target_model"] for name, model in manifest["models"].items()}


def test_up_converges_changes_models_and_instances_resumes_prunes_and_downs(
    moto_env: str, tmp_path: Path
) -> None:
    cache = tmp_path / "templates"
    package = Package(tmp_path / "package")
    package.put("alpha", b"alpha v1" * 1000)
    package.put("beta", b"beta v1" * 1000)
    settings = settings_for(tmp_path, "func", "ml.m5.xlarge")

    # GIVEN nothing deployed, WHEN up runs, THEN every stack, archive and the manifest exist
    first, provider = run_up(settings, cache)
    assert first.plan.infra_action == "create"
    assert {m.action for m in first.plan.models} == {"new"}
    assert sorted(u.target_model for u in first.uploads) == sorted(
        m["target_model"] for m in package.models.values()
    )
    assert first.endpoint is not None and first.endpoint.status == "InService"
    assert first.endpoint.instance_type == "ml.m5.xlarge"
    assert first.published and published(provider) == {
        n: m["target_model"] for n, m in package.models.items()
    }
    config_before = first.endpoint.config_name

    # WHEN it runs again unchanged, THEN nothing is uploaded, provisioned or published
    again, _ = run_up(settings, cache)
    assert again.plan.infra_action == "none", (again.plan.infra, again.plan.resources)
    assert again.plan.empty and again.uploads == [] and not again.published

    # WHEN one model changes, THEN only its archive goes up and the endpoint is untouched
    old_alpha = package.models["alpha"]["target_model"]
    new_alpha = package.put("alpha", b"alpha v2" * 1000)
    second, provider = run_up(settings, cache)
    assert [(m.name, m.action) for m in second.plan.models] == [
        ("alpha", "changed"),
        ("beta", "unchanged"),
    ]
    assert [u.target_model for u in second.uploads] == [new_alpha]
    assert second.plan.infra_action == "none"
    assert second.endpoint is not None and second.endpoint.config_name == config_before
    assert published(provider)["alpha"] == new_alpha
    store = provider.store()
    assert store is not None
    assert store[0].head(store[1] + old_alpha) is not None  # superseded, kept until prune

    # WHEN the instance type changes, THEN a new endpoint config serves it
    bigger = settings_for(tmp_path, "func", "ml.g4dn.xlarge")
    third, provider = run_up(bigger, cache)
    assert [(c.setting, c.before, c.after) for c in third.plan.infra] == [
        ("instance_type", "ml.m5.xlarge", "ml.g4dn.xlarge")
    ]
    assert third.uploads == []
    assert third.endpoint is not None
    assert third.endpoint.instance_type == "ml.g4dn.xlarge"
    assert third.endpoint.config_name != config_before
    assert third.endpoint.name == first.endpoint.name

    # WHEN an upload is interrupted half-way, THEN nothing shows under the final key
    big = os.urandom(2 * PART + 1234)
    big_target = package.put("beta", big)

    def interrupt(target: str, part: int) -> None:
        if target == big_target and part == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_up(bigger, cache, before_part=interrupt, upload_workers=1)
    store = provider.store()
    assert store is not None
    model_store, prefix = store
    assert model_store.head(prefix + big_target) is None
    assert [key for key, _ in model_store.open_uploads()] == [prefix + big_target]
    assert published(provider)["beta"] != big_target  # manifest not switched

    # AND a re-run resumes it: the parts already there are not sent again
    resumed, provider = run_up(bigger, cache)
    (outcome,) = resumed.uploads
    assert outcome.resumed and outcome.parts_reused == 1 and outcome.parts_sent == 2
    head = model_store.head(prefix + big_target)
    assert head is not None and head.sha256 == hashlib.sha256(big).hexdigest()
    assert model_store.get_bytes(prefix + big_target) == big
    assert model_store.open_uploads() == []
    assert published(provider)["beta"] == big_target

    # GIVEN some traffic recorded by CloudWatch for the variant
    dimensions = [
        {"Name": "EndpointName", "Value": third.endpoint.name},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]
    boto3.client("cloudwatch").put_metric_data(
        Namespace="AWS/SageMaker",
        MetricData=[
            {"MetricName": "Invocations", "Dimensions": dimensions, "Value": 40.0},
            {"MetricName": "Invocation5XXErrors", "Dimensions": dimensions, "Value": 3.0},
            {"MetricName": "ModelLatency", "Dimensions": dimensions, "Value": 1500.0},
            {"MetricName": "ModelLatency", "Dimensions": dimensions, "Value": 2500.0},
        ],
    )
    # WHEN status is asked, THEN it shows the endpoint, its scaling, the manifest, health
    status = provider.status()
    assert status["endpoint"]["instance_type"] == "ml.g4dn.xlarge"
    assert status["endpoint"]["status"] == "InService"
    assert status["scaling"]["min"] == 1 and status["scaling"]["max"] == 2
    assert status["models"] == published(provider)
    assert status["metrics"]["invocations"] == 40 and status["metrics"]["errors_5xx"] == 3
    assert status["metrics"]["model_latency_avg_ms"] == pytest.approx(2.0)  # µs → ms
    assert status["metrics"]["model_latency_max_ms"] == pytest.approx(2.5)
    # Each published model has a row of calls over the window (moto turns no EMF log line
    # into metrics, so none were counted: tests/unit/test_status_model_calls_stubbed.py).
    assert status["calls_window_s"] == 3600
    assert {row["model"]: row["target_model"] for row in status["calls"]} == published(provider)
    assert all(row["calls"] == 0 and row["p99_seconds"] is None for row in status["calls"])

    # WHEN prune keeps no superseded archive, THEN only referenced archives remain
    pruned = provider.prune(keep=0)
    assert sorted(pruned["deleted"]) == sorted([old_alpha, first.plan.models[1].target_model])
    remaining = {o.key[len(prefix) :] for o in model_store.objects(prefix)}
    assert remaining == {*published(provider).values(), "manifest.json"}

    # WHEN down runs, THEN the endpoint stack is gone and the model store stays
    gone = provider.down(purge=False)
    assert gone["removed_stacks"] == [provider.stack("endpoint")]
    assert provider.endpoint_state() is None
    assert provider.stacks.describe(provider.stack("endpoint")) is None
    assert gone["model_store_kept"] and published(provider) == status["models"]


def test_failed_rollout_leaves_the_previous_config_serving(moto_env: str, tmp_path: Path) -> None:
    cache = tmp_path / "templates"
    package = Package(tmp_path / "package")
    package.put("alpha", b"alpha" * 100)
    first, provider = run_up(settings_for(tmp_path, "canary", "ml.m5.xlarge"), cache)
    assert first.endpoint is not None
    # GIVEN a model change and an instance type the (emulated) SageMaker rejects
    package.put("alpha", b"alpha v2" * 100)
    # WHEN up runs, THEN it fails naming SageMaker's reason and what still serves
    with pytest.raises(RolloutFailedError) as caught:
        run_up(settings_for(tmp_path, "canary", "ml.g5.xlarge"), cache)
    text = str(caught.value)
    assert "rollout failed" in text and "ml.g5.xlarge" in text and "instanceType" in text
    assert f"still serves endpoint config {first.endpoint.config_name} (ml.m5.xlarge x1)" in text
    assert isinstance(caught.value, AwsError)
    serving = provider.sagemaker.endpoint(first.endpoint.name)
    assert serving is not None and serving.in_service
    # (moto has already removed the old config object: its CloudFormation does not
    # roll back. The endpoint itself still points at it and stays InService.)
    assert serving.config_name == first.endpoint.config_name
    # AND the manifest still names the archive that was serving
    assert published(provider)["alpha"] == first.plan.models[0].target_model


def test_api_stack_gets_its_lambda_code_published_first(moto_env: str, tmp_path: Path) -> None:
    # GIVEN a stage with the HTTP API front door (a Lambda whose code is a file asset)
    Package(tmp_path / "package").put("alpha", b"alpha" * 100)
    settings = settings_for(tmp_path, "withapi", "ml.m5.xlarge", api=True)
    # WHEN up runs
    result, provider = run_up(settings, tmp_path / "templates")
    # THEN the code is in the bootstrap bucket, as `cdk deploy` would have put it
    api = provider.stacks.describe(provider.stack("api"))
    assert api is not None and api.status == "CREATE_COMPLETE"
    assert result.plan.resources[-1] == {"stack": provider.stack("api"), "action": "create"}
    account = boto3.client("sts").get_caller_identity()["Account"]
    assets = boto3.client("s3").list_objects_v2(Bucket=f"cdk-hnb659fds-assets-{account}-us-east-1")
    keys = [item["Key"] for item in assets.get("Contents", [])]
    assert any(key.endswith(".zip") for key in keys), keys
    functions = boto3.client("lambda").list_functions()["Functions"]
    assert any(f["FunctionName"].startswith(provider.stack("api")) for f in functions)
    # AND down removes the API with the endpoint
    gone = provider.down(purge=False)
    assert gone["removed_stacks"] == [provider.stack("api"), provider.stack("endpoint")]
