"""An SDK already in users' applications reads what this version publishes.

The SDK of release 040d6bc (the last to write format 1.0) is taken from this
repository's history with `git archive` and run in its own interpreter on
manifests this version writes: format 1.1, and a later 1.x with keys neither
knows. It must read each, route its models as before, and write each back
unchanged (unknown keys are kept in place). The reverse, this SDK reading what
040d6bc wrote, is tests/unit/test_manifest_versions.py.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from deploy.client import manifest as contract

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "manifests" / "040d6bc"
RELEASE = "040d6bc"

READER = """
import json, sys
from pathlib import Path
import numpy as np
import deploy.client.manifest as contract
from deploy.client import Manifest
from deploy.client._core import prepare, route

results = {"module": contract.__file__, "minor": hasattr(contract, "MANIFEST_MINOR")}
for path in sys.argv[1:]:
    raw = Path(path).read_bytes()
    manifest = Manifest.from_bytes(raw, path)
    chosen = route("bytestats", None, manifest, None)
    prepare(chosen, {"DATA": np.zeros(16, np.uint8)}, None, class_count=None,
            parameters=None, max_payload_bytes=None, endpoint="ep", manifest=manifest)
    results[Path(path).name] = {
        "hosting": manifest.hosting,
        "target_model": chosen.target_model,
        "parameters": chosen.parameters,
        "same_bytes": contract.dump(contract.loads(raw, path)) == raw,
    }
print(json.dumps(results))
"""


def release_sdk(into: Path) -> Path:
    """deploy/client of `RELEASE`, extracted under `into`."""
    archived = subprocess.run(
        ["git", "-C", str(ROOT), "archive", RELEASE, "deploy/__init__.py", "deploy/client"],
        capture_output=True,
        check=False,
    )
    if archived.returncode != 0:
        pytest.fail(
            f"`git archive {RELEASE}` failed ({archived.stderr.decode().strip()}): this test "
            f"needs the repository's history (a clone with commit {RELEASE})"
        )
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def written(name: str) -> contract.Manifest:
    return contract.written(contract.loads((GOLDEN / name).read_bytes(), name))


def later_minor() -> dict[str, Any]:
    document = written("multi-model.json").to_document()
    document["format_minor"] = 9
    document["models"]["bytestats"]["placement"] = {"copies": 2}
    document["invoke"]["compression"] = ["gzip"]
    document["release"] = {"canary": 10}
    return document


def with_canary() -> contract.Manifest:
    manifest = written("multi-model.json")
    info = manifest.models["bytestats"]
    canary = contract.Canary(target_model="bytestats-2.tar.gz", percent=50.0)
    models = {**manifest.models, "bytestats": dataclasses.replace(info, canary=canary)}
    return dataclasses.replace(manifest, models=models)


def test_the_previous_releases_sdk_reads_what_this_version_publishes(tmp_path: Path) -> None:
    old = release_sdk(tmp_path / "release")
    files = {
        "multi-model-1.1.json": contract.dump(written("multi-model.json")),
        "async-1.1.json": contract.dump(written("async-published.json")),
        "laned-1.1.json": contract.dump(
            contract.with_lane_archive(written("laned-published.json"), "async/model-1.tar.gz")
        ),
        "multi-model-1.9.json": (json.dumps(later_minor(), indent=2) + "\n").encode(),
        "multi-model-canary.json": contract.dump(with_canary()),
    }
    for name, raw in files.items():
        (tmp_path / name).write_bytes(raw)
    run = subprocess.run(
        [sys.executable, "-c", READER, *(str(tmp_path / name) for name in files)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(old)},
        cwd=tmp_path,  # not this checkout: `python -c` puts the working directory first
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    # It is the release's code that read them: no minor version there.
    assert results.pop("module").startswith(str(old)) and results.pop("minor") is False

    target = written("multi-model.json").models["bytestats"].target_model
    routed = {"target_model": None, "parameters": {"target_model": "bytestats"}}
    assert results["multi-model-1.1.json"] == {
        "hosting": "multi-model",
        "target_model": target,
        "parameters": {},
        "same_bytes": True,
    }
    assert results["multi-model-1.9.json"] == results["multi-model-1.1.json"]
    # A canary is invisible to it: every call goes to the version live before it.
    assert results["multi-model-canary.json"] == results["multi-model-1.1.json"]
    assert results["async-1.1.json"] == {"hosting": "async", **routed, "same_bytes": True}
    # The release drops the lane's keys it does not know when it writes the manifest
    # (it never does: `deploy up` of that release rebuilds it); it reads and routes it.
    assert results["laned-1.1.json"]["target_model"] == target


def test_packaging_what_the_release_packaged_writes_its_bytes_and_the_1_1_keys(
    tmp_path: Path,
) -> None:
    """The writers themselves (deploy package, the router layout): the same content
    is the same bytes, and format 1.1 on only appends `format_minor` and `invoke`
    (1.2 adds keys only to a model with a canary or an inference component)."""
    from deploy.hosting.router_archive import package_single_model
    from deploy.packaging import package_repository

    repository = ROOT / "tests" / "fixtures" / "async_repo"  # what the fixtures were made from
    package_repository(repository, tmp_path / "mme")
    package_single_model(repository, tmp_path / "async", hosting="async")
    for folder, name, invoke in (
        (
            "mme",
            "multi-model.json",
            {"addressing": "target-model-header", "max_request_bytes": 6 << 20},
        ),
        (
            "async",
            "async-package.json",
            {"addressing": "router-parameter", "max_request_bytes": 1 << 30},
        ),
    ):
        raw = (tmp_path / folder / "manifest.json").read_bytes()
        document = json.loads(raw)
        assert list(document)[-2:] == ["format_minor", "invoke"]
        assert (document.pop("format_minor"), document.pop("invoke")) == (2, invoke)
        assert (json.dumps(document, indent=2) + "\n").encode() == (GOLDEN / name).read_bytes()
