"""`deploy neuron package`: one deterministic single-model archive plus its manifest."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client import Manifest
from deploy.hosting.router_archive import package_single_model


def _model(repository: Path, name: str, start: int, end: int) -> None:
    folder = repository / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("# model\n")
    (folder / "1" / "model.pt").write_bytes(bytes(range(256)) * 4)
    (folder / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 4\n'
        'input { name: "INPUT__0" data_type: TYPE_FP32 dims: [3] }\n'
        'output { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [2] }\n'
        f'parameters {{ key: "NEURON_CORE_START_INDEX" value {{ string_value: "{start}" }} }}\n'
        f'parameters {{ key: "NEURON_CORE_END_INDEX" value {{ string_value: "{end}" }} }}\n'
    )


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    _model(root, "a", 0, 1)
    _model(root, "b", 2, 3)
    return root


def test_archive_holds_every_model_and_the_router_at_its_root(
    repository: Path, tmp_path: Path
) -> None:
    manifest = package_single_model(repository, tmp_path / "out")
    archive = tmp_path / "out" / "model.tar.gz"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        members = tar.getmembers()
    assert {name.split("/")[0] for name in names} == {"a", "b", "router"}
    assert "router/1/model.py" in names and "a/1/model.pt" in names
    assert all(m.mtime == 0 and m.uid == 0 and not m.issym() for m in members)
    # The user's repository is untouched (the router lives only in the archive).
    assert sorted(p.name for p in repository.iterdir()) == ["a", "b"]
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert manifest["archive"] == {
        "key": "model.tar.gz",
        "sha256": digest,
        "bytes": archive.stat().st_size,
    }
    sdk = Manifest.from_path(tmp_path / "out")
    assert sdk.hosting == "single-model" and sorted(sdk.models) == ["a", "b"]


def test_same_repository_same_bytes(repository: Path, tmp_path: Path) -> None:
    first = package_single_model(repository, tmp_path / "one")
    second = package_single_model(repository, tmp_path / "two")
    assert first["archive"]["sha256"] == second["archive"]["sha256"]
    (repository / "a" / "1" / "model.pt").write_bytes(b"changed")
    third = package_single_model(repository, tmp_path / "three")
    assert third["archive"]["sha256"] != first["archive"]["sha256"]


def test_cli_checks_the_core_plan_before_writing(repository: Path, tmp_path: Path) -> None:
    _model(repository, "c", 3, 4)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["neuron", "package", str(repository), "--out", str(out), "--instance", "ml.inf1.xlarge"],
    )
    assert result.exit_code == 1
    assert "out of range" in result.output or "overlap" in result.output
    assert not out.exists()
    ok = CliRunner().invoke(
        app, ["neuron", "package", str(repository), "--out", str(out), "--json"]
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["hosting"] == "single-model"


def test_sdk_finds_the_manifest_next_to_the_single_model_archive() -> None:
    from deploy.client._manifest import manifest_url_for
    from deploy.hosting.router_archive import ARCHIVE_NAME, MANIFEST_NAME

    # The inf1 stage's ModelDataUrl is the archive itself; the manifest sits beside it.
    url = f"s3://store/models/inf1/{ARCHIVE_NAME}"
    assert manifest_url_for(url) == f"s3://store/models/inf1/{MANIFEST_NAME}"
    assert manifest_url_for("s3://store/models/") == "s3://store/models/manifest.json"
