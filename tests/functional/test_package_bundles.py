"""`deploy package` records each BLS archive's bundles; `deploy up` refuses to publish a
bundle that differs from the one an earlier run published under the same name.

GIVEN a repository whose BLS caller bundles `preprocess`, deployed once (its manifest
published to the local provider's store, the endpoint running)
WHEN `preprocess` changes and `deploy up --local --dry-run` plans again
THEN the plan stops before anything is uploaded, naming both archives, the model and
the fix (an endpoint that loaded the earlier `preprocess` keeps it under that name);
once the endpoint is stopped, the same plan goes through (a new one holds nothing).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from deploy.config import load_settings
from deploy.errors import PackagingError
from deploy.lifecycle.local_provider import LocalProvider
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.up import UpOptions, up
from deploy.packaging import package_repository, read_manifest
from deploy.packaging.bundles import BUNDLES_KEY, folder_bundles
from tests.functional.test_local_bundles import caller, preprocess


def repository(root: Path, answer: float) -> Path:
    preprocess(root, answer)
    caller(root, "caller_a")
    return root


def test_the_manifest_records_the_bundles_the_extracted_archive_holds(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo", 1.0)
    out = tmp_path / "out"
    package_repository(repo, out)
    entry = read_manifest(out).models["caller_a"]
    recorded = entry.extra[BUNDLES_KEY]
    assert set(recorded) == {"preprocess"}
    assert BUNDLES_KEY not in read_manifest(out).models["preprocess"].extra
    with tarfile.open(out / entry.target_model) as tar:
        tar.extractall(tmp_path / "extracted", filter="data")
    assert folder_bundles(tmp_path / "extracted") == recorded
    # An unchanged re-run reuses the archive and records the same bundles.
    again = package_repository(repo, out)
    assert all(model.reused for model in again.models)
    assert read_manifest(out).models["caller_a"].extra[BUNDLES_KEY] == recorded


@pytest.mark.slow
@pytest.mark.triton
def test_up_refuses_a_bundle_that_differs_from_the_one_a_running_endpoint_may_hold(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path / "repo", 1.0)
    provider = LocalProvider("bundles", state_dir=tmp_path / "state")
    earlier = tmp_path / "earlier"
    package_repository(repo, earlier)
    provider.store_dir.mkdir(parents=True)
    provider.publish_manifest((earlier / "manifest.json").read_bytes())
    old_target = read_manifest(earlier).models["caller_a"].target_model
    source = repo / "preprocess" / "1" / "model.py"
    source.write_text(source.read_text().replace("[1.0]", "[2.0]"))

    def plan_again() -> None:
        up(
            load_settings(),
            provider,
            repository=repo,
            package_dir=tmp_path / "package",
            options=UpOptions(dry_run=True),
            reporter=SilentReporter(),
        )

    provider.start()
    try:
        with pytest.raises(PackagingError) as caught:
            plan_again()
    finally:
        provider.stop()
    error = caught.value
    new_target = read_manifest(tmp_path / "package").models["caller_a"].target_model
    assert new_target != old_target
    assert old_target in error.message and new_target in error.message
    assert "'preprocess'" in error.message and "Nothing was uploaded" in error.message
    assert error.fix and "another name" in error.fix and "deploy down" in error.fix
    assert not (provider.store_dir / new_target).exists()
    plan_again()  # no endpoint runs: nothing holds the earlier preprocess
