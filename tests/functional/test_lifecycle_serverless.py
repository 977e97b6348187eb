"""`deploy up --hosting serverless`: the router layout on a serverless endpoint, on moto.

Real CDK synth, moto's S3/CloudFormation/SageMaker for the control plane (the
serverless stage has no container asset, so `deploy up` provisions through
CloudFormation itself), and a local single-model endpoint (real tritonserver,
the router) serving the same archive as the data plane for the smoke stage.
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
from deploy.hosting import mode_named
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
    pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning"),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
MODELS = ["adder", "addsub"]
CPU = "ml.m5.xlarge"
CPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3-cpu"


@pytest.fixture(scope="module")
def aws(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_INFRA__SERVERLESS_MEMORY_MB", "3072")
        patch.setenv("DEPLOY_INFRA__SERVERLESS_MAX_CONCURRENCY", "8")
        yield moto_server


def make_repository(root: Path) -> Path:
    """Two python models behind the router (the same tensors: addsub and a renamed copy)."""
    repo = root / "repository"
    for name in MODELS:
        shutil.copytree(
            EXAMPLES / "addsub", repo / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    config = repo / "adder" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "addsub"', 'name: "adder"'))
    return repo


def cli(*args: str | Path, ok: bool = True, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(app, [str(a) for a in args], env=env, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def stage_stacks(stage: str) -> list[str]:
    summaries = boto3.client("cloudformation").list_stacks()["StackSummaries"]
    return sorted(
        s["StackName"]
        for s in summaries
        if s["StackName"].startswith(f"deploy-triton-{stage}-")
        and s["StackStatus"] != "DELETE_COMPLETE"
    )


def buckets() -> set[str]:
    return {b["Name"] for b in boto3.client("s3").list_buckets()["Buckets"]}


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


def test_dry_run_plans_a_serverless_endpoint_with_its_price(aws: str, tmp_path: Path) -> None:
    repo = make_repository(tmp_path)
    out = tmp_path / "package"
    before = buckets()
    args = ("up", "--stage", "slsdry", "--hosting", "serverless", "--instance", CPU)

    # WHEN --dry-run (JSON)
    document = json.loads(
        cli(*args, "--repository", repo, "--package-dir", out, "--dry-run", "--json").stdout
    )

    # THEN every model is new, in one content-named archive under serverless/
    plan = document["plan"]
    assert plan["hosting"] == "serverless"
    assert {m["name"]: m["action"] for m in plan["models"]} == dict.fromkeys(MODELS, "new")
    archive = out / "serverless" / "model.tar.gz"
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert plan["archive"]["key"] == f"serverless/model-{sha[:16]}.tar.gz"
    assert plan["archive"]["upload"] is True
    packaged = json.loads((out / "serverless" / "manifest.json").read_text())
    assert packaged["hosting"] == "serverless" and sorted(packaged["models"]) == MODELS
    # AND the endpoint is sized in memory and concurrency, without a network stack
    infra = {c["setting"]: (c["before"], c["after"]) for c in plan["infra"]}
    assert infra == {
        "serverless_memory_mb": (None, "3072"),
        "serverless_max_concurrency": (None, "8"),
    }
    assert [r["stack"] for r in plan["resources"]] == [
        "deploy-triton-slsdry-model-store",
        "deploy-triton-slsdry-endpoint",
    ]
    # AND priced per second of inference, not per hour
    cost = plan["cost"]
    assert cost["hosting"] == "serverless" and cost["memory_mb"] == 3072
    assert cost["per_second_usd"] == pytest.approx(3 * cost["per_gb_second_usd"])
    assert cost["hourly_max_usd"] == pytest.approx(cost["per_second_usd"] * 3600 * 8)
    # AND nothing changed
    assert stage_stacks("slsdry") == [] and buckets() == before

    # AND the text plan says the same to a person
    text = " ".join(
        cli(*args, "--repository", repo, "--package-dir", out, "--dry-run").stdout.split()
    )
    assert "hosting: serverless endpoint, 3072 MB per copy, up to 8 concurrent" in text
    assert "per second of inference at 3072 MB" in text and "$0 while idle" in text
    assert "dry run: nothing was changed" in text


def test_up_provisions_the_serverless_endpoint_smokes_through_the_router_and_publishes(
    aws: str, tmp_path: Path
) -> None:
    repo = make_repository(tmp_path)
    out = tmp_path / "package"
    # GIVEN a data plane serving the archive `deploy up` will build (reproducible bytes)
    staged = mode_named("serverless").layout.package(repo, tmp_path / "staged")
    assert staged.archive is not None
    args = (
        "up", "--stage", "slsup", "--hosting", "serverless", "--instance", CPU,
        "--repository", repo, "--package-dir", out, "--timeout", "120",
    )  # fmt: skip
    with DataPlane(staged.archive.path, tmp_path / "dp", "sls-data-plane") as url:
        # WHEN up runs, smoke calls going to the data plane
        document = json.loads(
            cli(
                *args, "--smoke-endpoint-url", url, "--smoke-endpoint-name", "sls-data-plane",
                "--json",
            ).stdout
        )  # fmt: skip

        # THEN the stacks were created (no network), the archive uploaded under its key
        assert stage_stacks("slsup") == [
            "deploy-triton-slsup-endpoint",
            "deploy-triton-slsup-model-store",
        ]
        key = staged.archive.key
        assert key.startswith("serverless/model-")
        assert [u["target_model"] for u in document["uploads"]] == [key]
        # AND every model answered through the router, addressed as the manifest says
        assert [(s["name"], s["ok"]) for s in document["smoke"]] == [(m, True) for m in MODELS]
        assert document["manifest_published"] is True

        # AND SageMaker runs a serverless variant on the CPU image, outside any VPC
        sagemaker = boto3.client("sagemaker")
        endpoint = sagemaker.describe_endpoint(EndpointName=document["endpoint"]["name"])
        assert endpoint["EndpointStatus"] == "InService"
        config = sagemaker.describe_endpoint_config(
            EndpointConfigName=endpoint["EndpointConfigName"]
        )
        (variant,) = config["ProductionVariants"]
        assert variant["ServerlessConfig"] == {"MemorySizeInMB": 3072, "MaxConcurrency": 8}
        assert "InstanceType" not in variant
        model = sagemaker.describe_model(ModelName=variant["ModelName"])
        assert model["PrimaryContainer"]["Image"] == CPU_IMAGE
        assert model["PrimaryContainer"]["Mode"] == "SingleModel"
        assert not model.get("VpcConfig")  # moto answers {} for none
        # AND the manifest was published next to the archive the Model reads
        store = model["PrimaryContainer"]["ModelDataUrl"].removeprefix("s3://")
        bucket, _, archive_key = store.partition("/")
        prefix = archive_key.removesuffix(key)
        s3 = boto3.client("s3")
        published = json.loads(
            s3.get_object(Bucket=bucket, Key=f"{prefix}serverless/manifest.json")["Body"].read()
        )
        assert published["hosting"] == "serverless"
        assert published["archive"]["key"] == key.removeprefix("serverless/")
        body = s3.get_object(Bucket=bucket, Key=archive_key)["Body"].read()
        assert body == staged.archive.path.read_bytes()

        # WHEN up runs again with nothing changed
        again = json.loads(
            cli(
                *args, "--smoke-endpoint-url", url, "--smoke-endpoint-name", "sls-data-plane",
                "--json",
            ).stdout
        )  # fmt: skip
    # THEN nothing is uploaded, provisioned or published (the capacity read back matches)
    assert again["plan"]["infra_action"] == "none", again["plan"]["infra"]
    assert again["uploads"] == [] and again["manifest_published"] is False

    # AND status (the stage's hosting from its settings) shows the serverless endpoint
    status = json.loads(
        cli("status", "--stage", "slsup", "--json", env={"DEPLOY_HOSTING": "serverless"}).stdout
    )
    assert status["hosting"] == "serverless"
    assert status["endpoint"]["serverless"] == {
        "memory_mb": 3072,
        "max_concurrency": 8,
        "provisioned_concurrency": None,
    }
    assert sorted(status["models"]) == MODELS


def test_a_gpu_instance_type_stops_before_anything_is_packaged(aws: str, tmp_path: Path) -> None:
    repo = make_repository(tmp_path)
    before = buckets()
    result = cli(
        "up", "--stage", "slsgpu", "--hosting", "serverless", "--instance", "ml.g5.xlarge",
        "--repository", repo, "--package-dir", tmp_path / "package", ok=False,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "instance_type (--instance)" in output and "CPU only" in output
    assert "Traceback" not in output
    assert not (tmp_path / "package").exists()
    assert stage_stacks("slsgpu") == [] and buckets() == before


def test_a_kind_gpu_model_stops_the_chain_naming_its_config(aws: str, tmp_path: Path) -> None:
    repo = make_repository(tmp_path)
    config = repo / "addsub" / "config.pbtxt"
    config.write_text(config.read_text() + "\ninstance_group [{ kind: KIND_GPU }]\n")
    result = cli(
        "up", "--stage", "slskind", "--hosting", "serverless", "--instance", CPU,
        "--repository", repo, "--package-dir", tmp_path / "package", "--dry-run", ok=False,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "KIND_GPU, but serverless endpoints have no GPU" in output
    # (the terminal wraps the long path: compare without white space)
    assert f"{config}:instance_group[1].kind" in "".join(output.split())  # after its CPU group
    assert not (tmp_path / "package").exists()
