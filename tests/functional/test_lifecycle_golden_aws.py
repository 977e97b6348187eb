"""Golden requests gate `deploy up` on AWS (the moto server), before the manifest names a model.

The control plane is moto's; the data plane the golden cases reach is a local
SageMaker endpoint (real tritonserver) reading the stage's S3 model store, as
SageMaker's multi-model endpoint would.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.repository.golden import write_case
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
STAGE = "golden"
BUCKET = "deploy-golden-model-store"
DATA_PLANE = "golden-data-plane"
X = np.arange(4, dtype=np.float32).reshape(1, 4)


@pytest.fixture(scope="module")
def data_plane(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint

    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_INFRA__API", "false")
        patch.setenv("DEPLOY_INFRA__MODEL_BUCKET_NAME", BUCKET)
        endpoint = LocalEndpoint(
            f"s3://{BUCKET}/models/",
            work_dir=tmp_path_factory.mktemp("golden-data-plane"),
            options=EndpointOptions(endpoint_name=DATA_PLANE),
        ).start()
        try:
            yield endpoint.url
        finally:
            endpoint.stop()


def up(repo: Path, url: str, *extra: str) -> Any:
    args = ["up", "--stage", STAGE, "--repository", str(repo), "--package-dir"]
    args += [str(repo.parent / "package"), "--smoke-endpoint-url", url]
    args += ["--smoke-endpoint-name", DATA_PLANE, "--instance", "ml.m5.xlarge"]
    args += ["--timeout", "120", *extra]
    return CliRunner().invoke(app, args, catch_exceptions=False)


def published() -> dict[str, str]:
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key="models/manifest.json")["Body"]
    manifest = json.loads(body.read())
    return {name: model["target_model"] for name, model in manifest["models"].items()}


def test_golden_mismatch_stops_up_with_the_manifest_unchanged(
    data_plane: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES / "addsub", repo / "addsub")
    model = repo / "addsub"
    write_case(model, "basic", {"INPUT0": X, "INPUT1": X}, {"OUTPUT0": X + X, "OUTPUT1": X - X})

    # GIVEN a new model whose golden case matches, THEN it is sent there and published
    first = up(repo, data_plane, "--json")
    assert first.exit_code == 0, first.output
    (smoked,) = json.loads(first.stdout)["smoke"]
    assert (smoked["golden"], smoked["ok"]) == (["basic"], True)
    before = published()
    assert before == {"addsub": smoked["target_model"]}

    # WHEN a changed version answers differently from the golden case
    source = model / "1" / "model.py"
    source.write_text(source.read_text().replace("(a - b)", "(a - b + 0.5)"))
    failed = up(repo, data_plane)

    # THEN up exits 1 naming the output and the difference, and the manifest stays
    assert failed.exit_code == 1, failed.output
    text = " ".join(failed.output.split())
    assert "case basic, OUTPUT1: 4 of 4 values differ" in text
    assert "max abs diff 0.5; first at [0, 0]: expected 0.0, got 0.5" in text
    assert "--record-golden" in text and "Traceback" not in failed.output
    assert published() == before
