"""The front door's Lambda asset is built with real pip from hash-pinned wheels, offline too.

The first test fills the wheel cache from the package index if it is empty
(as the first synth on a machine does); the others build from a wheel folder
(`DEPLOY_LAMBDA_WHEELS`) with pip's index pointed at a closed loopback port,
so any download would fail.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deploy_infra import lambda_bundle
from deploy_infra.errors import InfraConfigError
from deploy_infra.lambda_bundle import WHEELS, WHEELS_ENV

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheels() -> Path:
    """The pinned wheel files, from the user's cache (fetched once with pip if missing)."""
    folder = lambda_bundle.wheels_folder()
    assert all((folder / w.filename).is_file() for w in WHEELS)
    return folder


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache, and a package index that cannot be reached."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    return tmp_path


def test_asset_is_built_offline_from_a_wheel_folder(
    wheels: Path, offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WHEELS_ENV, str(wheels))

    asset = lambda_bundle.front_door_asset()

    assert asset.is_relative_to(offline / "cache" / "deploy" / "lambda-assets")
    assert (asset / "front_door" / "app.py").is_file()
    for wheel in WHEELS:
        assert (asset / f"{wheel.project}-{wheel.version}.dist-info").is_dir()
        assert list((asset / wheel.project).glob("*.cpython-312-x86_64-linux-gnu.so"))
    # Built once: the same folder again, not rebuilt.
    stamp = (asset / "front_door" / "app.py").stat().st_mtime_ns
    assert lambda_bundle.front_door_asset() == asset
    assert (asset / "front_door" / "app.py").stat().st_mtime_ns == stamp
    assert [p.name for p in asset.parent.iterdir() if p.name.startswith(".") and p.is_dir()] == []


def test_a_wheel_that_is_not_the_pinned_file_is_refused(
    wheels: Path, offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = offline / "wheels"
    shutil.copytree(wheels, folder)
    tampered = folder / WHEELS[0].filename
    tampered.write_bytes(tampered.read_bytes() + b"\0")
    monkeypatch.setenv(WHEELS_ENV, str(folder))

    with pytest.raises(InfraConfigError, match="sha256 is not the one pinned"):
        lambda_bundle.front_door_asset()
    # Nothing half-built is left where a later synth would take it.
    assert not [p for p in (offline / "cache" / "deploy" / "lambda-assets").iterdir() if p.is_dir()]


def test_a_wheel_folder_missing_a_file_names_it_and_the_download_command(
    wheels: Path, offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = offline / "wheels"
    folder.mkdir()
    shutil.copy(wheels / WHEELS[0].filename, folder)
    monkeypatch.setenv(WHEELS_ENV, str(folder))

    with pytest.raises(InfraConfigError) as caught:
        lambda_bundle.front_door_asset()
    message = str(caught.value)
    assert WHEELS[1].filename in message and WHEELS_ENV in message
    assert "pip download" in message and "--platform manylinux2014_x86_64" in message


def test_the_handler_runs_here_with_the_versions_the_lambda_gets() -> None:
    from importlib.metadata import version

    assert {w.project: version(w.project) for w in WHEELS} == {w.project: w.version for w in WHEELS}
