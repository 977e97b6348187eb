"""`deploy up --instance ml.inf1.*`: the single-model chain against the moto server.

Real CDK synth, moto's S3/CloudFormation/SageMaker for the control plane, and
a local single-model endpoint (real tritonserver, the router, the example
Neuron models on their CPU fallback) serving the uploaded archive as the data
plane for the smoke stage. The Neuron image needs Docker and the CDK CLI,
which cannot deploy to moto: where a stage must be provisioned, the test
creates its stacks from the same templates through moto's CloudFormation (what
`cdk deploy` would leave behind) and `deploy up` then finds nothing to provision.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.config import DeploySettings, load_settings
from deploy.hosting import router, single_model
from deploy.lifecycle.aws_provider import AwsProvider
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.smoke import SmokeTestFailedError
from deploy.lifecycle.up import UpOptions, UpResult, up
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
    pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning"),
]

NEURON = Path(__file__).resolve().parents[2] / "model_packages" / "neuron" / "repository"
INSTANCE = "ml.inf1.6xlarge"
MODELS = ["classifier_batched", "classifier_single"]


@pytest.fixture(scope="module")
def aws(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_INFRA__MAX_INSTANCE_COUNT", "2")
        yield moto_server


def copy_repository(root: Path) -> Path:
    assert (NEURON / "classifier_single" / "1" / "model.pt").is_file(), (
        "the example Neuron repository is generated: run `make models`"
    )
    repo = root / "repository"
    shutil.copytree(NEURON, repo, ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def cli(*args: str | Path, ok: bool = True, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(app, [str(a) for a in args], env=env, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def stage_stacks(stage: str) -> list[str]:
    summaries = boto3.client("cloudformation").list_stacks()["StackSummaries"]
    return [
        s["StackName"] for s in summaries if s["StackName"].startswith(f"deploy-triton-{stage}-")
    ]


def buckets() -> set[str]:
    return {b["Name"] for b in boto3.client("s3").list_buckets()["Buckets"]}


def test_dry_run_shows_the_single_model_plan_and_its_price(aws: str, tmp_path: Path) -> None:
    repo = copy_repository(tmp_path)
    out = tmp_path / "package"
    before = buckets()
    args = ("up", "--stage", "inf1dry", "--instance", INSTANCE, "--repository", repo)

    # WHEN --dry-run (JSON)
    document = json.loads(cli(*args, "--package-dir", out, "--dry-run", "--json").stdout)

    # THEN every model is new, in one content-named archive on a single-model endpoint
    plan = document["plan"]
    assert document["dry_run"] and plan["hosting"] == "single-model"
    assert {m["name"]: m["action"] for m in plan["models"]} == dict.fromkeys(MODELS, "new")
    sha = hashlib.sha256((out / "inf1" / "model.tar.gz").read_bytes()).hexdigest()
    assert plan["archive"] == {
        "key": f"inf1/model-{sha[:16]}.tar.gz",
        "previous_key": None,
        "sha256": sha,
        "bytes": (out / "inf1" / "model.tar.gz").stat().st_size,
        "upload": True,
    }
    assert plan["upload_bytes"] == plan["archive"]["bytes"]
    assert plan["infra_action"] == "create"
    infra = {c["setting"]: (c["before"], c["after"]) for c in plan["infra"]}
    assert infra["instance_type"] == (None, INSTANCE)
    assert infra["min_instance_count"] == (None, "1") and infra["max_instance_count"] == (None, "2")
    assert [r["stack"] for r in plan["resources"]] == [
        "deploy-triton-inf1dry-model-store",
        "deploy-triton-inf1dry-network",
        "deploy-triton-inf1dry-endpoint",
    ]
    cost = plan["cost"]
    assert (cost["instance_type"], cost["hourly_per_instance_usd"]) == (INSTANCE, 1.531)
    assert (cost["hourly_min_usd"], cost["hourly_max_usd"]) == (1.531, 3.062)
    # AND nothing changed
    assert stage_stacks("inf1dry") == [] and buckets() == before

    # AND the text plan says the same to a person
    text = cli(*args, "--package-dir", out, "--dry-run").stdout
    assert f"single-model endpoint on {INSTANCE}, 1-2 instance(s)" in text
    assert f"inf1/model-{sha[:16]}.tar.gz (new)" in text
    assert "estimated cost: $1.53-3.06/h" in text
    assert "dry run: nothing was changed" in text


def test_overlapping_neuron_cores_fail_before_anything_is_uploaded(
    aws: str, tmp_path: Path
) -> None:
    # GIVEN classifier_single moved onto classifier_batched's cores (0:3)
    repo = copy_repository(tmp_path)
    config = repo / "classifier_single" / "config.pbtxt"
    text = config.read_text()
    for old, new in (('"4-5"', '"2-3"'), ('"5"', '"3"'), ('"4"', '"2"')):
        assert old in text
        text = text.replace(old, new)
    config.write_text(text)
    before = buckets()
    # WHEN up runs
    result = cli(
        "up", "--stage", "inf1overlap", "--instance", INSTANCE, "--repository", repo,
        "--package-dir", tmp_path / "package", ok=False,
    )  # fmt: skip
    # THEN it stops naming both models, before packaging, uploading or provisioning
    assert result.exit_code == 1, result.output
    assert "classifier_batched" in result.output and "classifier_single" in result.output
    assert "overlap" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "package" / "inf1").exists()
    assert stage_stacks("inf1overlap") == [] and buckets() == before


def test_without_a_docker_engine_up_stops_before_changing_anything(
    aws: str, tmp_path: Path
) -> None:
    repo = copy_repository(tmp_path)
    before = buckets()
    args = ("up", "--stage", "inf1nodocker", "--instance", INSTANCE, "--repository", repo)
    for env in (
        {"CDK_DOCKER": "deploy-test-no-such-docker"},  # not on PATH
        {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"},  # a client, no engine
    ):
        # WHEN up runs with no Docker engine to build the Neuron image
        result = cli(*args, "--package-dir", tmp_path / "package", ok=False, env=env)
        # THEN it says Docker is needed and how to go on, and nothing was created
        assert result.exit_code == 1, result.output
        output = " ".join(result.output.split())
        assert "Docker is needed to build the Neuron image" in output
        assert "Nothing was uploaded or deployed" in output
        assert "on a machine with a running Docker engine" in output
        assert "deploy cdk deploy --all -c stage=inf1nodocker" in output
        assert "Traceback" not in output
        assert stage_stacks("inf1nodocker") == [] and buckets() == before


# -- up with the stage's stacks in place: upload, smoke through the router, publish ----


def provision_as_cdk_would(provider: AwsProvider, key: str) -> None:
    """The stage's stacks, from the templates `deploy up` would hand the CDK CLI."""
    provider.use_model_archive(key)
    for name, template in provider.templates().items():
        provider.stacks.deploy(name, template, tags={"deploy:stage": provider.settings.stage})
        state = provider.stacks.describe(name)
        assert state is not None and not state.failed and not state.in_progress, (
            name,
            state,
            [e.reason for e in provider.stacks.events(name)][:5],
        )


class DataPlane:
    """A local single-model endpoint over an extracted archive (SageMaker's /opt/ml/model)."""

    def __init__(self, archive: Path, root: Path, name: str) -> None:
        from deploy.local.modes.endpoint import EndpointOptions
        from deploy.local.modes.single_model import SingleModelEndpoint

        extracted = root / "opt-ml-model"
        with tarfile.open(archive) as tar:
            tar.extractall(extracted, filter="data")
        self.endpoint = SingleModelEndpoint(
            extracted,
            work_dir=root / "work",
            options=EndpointOptions(endpoint_name=name),
            router_instances=1,
        )
        self.endpoint.start()

    def __enter__(self) -> str:
        return str(self.endpoint.url)

    def __exit__(self, *exc: object) -> None:
        self.endpoint.stop()


def run_up(settings: DeploySettings, provider: AwsProvider) -> UpResult:
    return up(
        settings,
        provider,
        repository=settings.repository,
        package_dir=settings.package_dir,
        options=UpOptions(timeout_s=60),
        reporter=SilentReporter(),
    )


def test_up_uploads_the_archive_smokes_every_model_through_the_router_then_publishes(
    aws: str, tmp_path: Path
) -> None:
    repo = copy_repository(tmp_path)
    settings = load_settings(
        stage="inf1up", instance_type=INSTANCE, repository=repo, package_dir=tmp_path / "package"
    )
    out = tmp_path / "package" / "inf1"  # where up packages the inf1 layout

    def provider(url: str) -> AwsProvider:
        return AwsProvider(
            settings,
            template_cache=tmp_path / "templates",
            poll_s=0.05,
            smoke_endpoint_url=url,
            smoke_endpoint_name="inf1-data-plane",
        )

    # GIVEN the stage provisioned for this package (as `cdk deploy` would have)
    first_package = single_model.MODE.layout.package(repo, out).archive
    assert first_package is not None
    provision_as_cdk_would(provider("http://unused"), first_package.key)

    # WHEN up runs with the data plane serving that archive
    with DataPlane(out / "model.tar.gz", tmp_path / "dp1", "inf1-data-plane") as url:
        aws_provider = provider(url)
        result = run_up(settings, aws_provider)

    # THEN nothing is left to provision, the archive went up under its content key
    key = first_package.key
    assert result.plan.infra_action == "none", (result.plan.infra, result.plan.resources)
    assert [(u.target_model, u.bytes_sent) for u in result.uploads] == [(key, first_package.bytes)]
    location = aws_provider.store_location()
    assert location is not None
    s3 = boto3.client("s3")
    body = s3.get_object(Bucket=location.bucket, Key=location.prefix + key)["Body"].read()
    assert body == (out / "model.tar.gz").read_bytes()
    # AND every model answered through the router, via the SDK and the single-model manifest
    assert [(s.name, s.ok, s.outputs) for s in result.smoke] == [
        (name, True, ("OUTPUT__0",)) for name in MODELS
    ]
    # AND the manifest was published last, next to the archive, naming it
    manifest_key = f"{location.prefix}inf1/manifest.json"
    published = json.loads(s3.get_object(Bucket=location.bucket, Key=manifest_key)["Body"].read())
    assert result.published and published["hosting"] == "single-model"
    assert published["archive"]["key"] == key.removeprefix("inf1/")
    assert sorted(published["models"]) == MODELS
    archive_time = s3.head_object(Bucket=location.bucket, Key=location.prefix + key)
    manifest_time = s3.head_object(Bucket=location.bucket, Key=manifest_key)
    assert manifest_time["LastModified"] >= archive_time["LastModified"]
    # AND the endpoint's Model reads that archive, so the SDK finds the manifest from it
    from deploy.client._manifest import manifest_url_for

    sagemaker = boto3.client("sagemaker")
    endpoint = sagemaker.describe_endpoint(EndpointName=result.endpoint.name)  # type: ignore[union-attr]
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    (variant,) = config["ProductionVariants"]
    assert variant["InstanceType"] == INSTANCE
    model = sagemaker.describe_model(ModelName=variant["ModelName"])["PrimaryContainer"]
    assert model["ModelDataUrl"] == f"s3://{location.bucket}/{location.prefix}{key}"
    assert manifest_url_for(model["ModelDataUrl"]) == f"s3://{location.bucket}/{manifest_key}"

    # GIVEN a model that now fails at inference, and its stage provisioned for it
    source = repo / "classifier_single" / "1" / "model.py"
    anchor = "    def execute(self, requests):\n"
    assert anchor in source.read_text()
    source.write_text(
        source.read_text().replace(
            anchor, anchor + '        raise ValueError("classifier_single is broken")\n'
        )
    )
    broken = single_model.MODE.layout.package(repo, out).archive
    assert broken is not None
    assert broken.key != key
    provision_as_cdk_would(provider("http://unused"), broken.key)

    # WHEN up runs, THEN the smoke test names the model with its error
    data_plane = DataPlane(out / "model.tar.gz", tmp_path / "dp2", "inf1-data-plane")
    with data_plane as url, pytest.raises(SmokeTestFailedError) as failed:
        run_up(settings, provider(url))
    message = str(failed.value)
    assert "smoke test failed for 1 model(s): classifier_single" in message
    assert "classifier_single is broken" in message
    # AND the new archive is stored but clients keep the manifest that names the old one
    assert s3.head_object(Bucket=location.bucket, Key=location.prefix + broken.key)
    still = json.loads(s3.get_object(Bucket=location.bucket, Key=manifest_key)["Body"].read())
    assert still["archive"]["key"] == key.removeprefix("inf1/")

    # WHEN status and prune (keeping no superseded archive) run for the stage
    status = provider("http://unused").status()
    assert status["hosting"] == "single-model" and status["archive"] == key
    assert sorted(status["models"]) == MODELS
    pruned = provider("http://unused").prune(keep=0)
    # THEN only the archive the published manifest names is left
    assert pruned["deleted"] == [broken.key] and pruned["kept_referenced"] == [key]
    left = s3.list_objects_v2(Bucket=location.bucket, Prefix=location.prefix)["Contents"]
    assert sorted(o["Key"] for o in left) == sorted([location.prefix + key, manifest_key])

    # WHEN down runs, THEN the endpoint stack goes and the model store stays
    gone = provider("http://unused").down(purge=False)
    assert gone["removed_stacks"] == ["deploy-triton-inf1up-endpoint"]
    assert gone["model_store_kept"] == f"s3://{location.bucket}/{location.prefix}"


def test_the_cdk_cli_reads_the_assembly_up_would_deploy(aws: str, tmp_path: Path) -> None:
    """The pinned CDK CLI lists the synthesized assembly's stacks, and the endpoint
    template it would deploy is the planned one, pointing at the content-named archive."""
    import subprocess

    from deploy.lifecycle.cdk_cli import cdk_executable
    from deploy.lifecycle.templates import project_root

    settings = load_settings(stage="inf1cli", instance_type=INSTANCE)
    provider = AwsProvider(settings, template_cache=tmp_path / "templates")
    key = router.archive_key(single_model.FOLDER, "0123456789abcdef" * 4)
    provider.use_model_archive(key)
    templates = provider.templates()
    assembly = provider.synthesized().assembly
    listed = subprocess.run(
        [str(cdk_executable(project_root())), "ls", "--app", str(assembly)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == list(templates)
    name = provider.stack("endpoint")
    on_disk = json.loads((assembly / f"{name}.template.json").read_text())
    assert on_disk == templates[name]
    text = json.dumps(on_disk)
    assert f"/models/{key}" in text and "/models/inf1/model.tar.gz" not in text
