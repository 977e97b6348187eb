"""Execution environments: built for the image's Python, packaged from requirements.txt, served.

GIVEN a requirements file (a small pure-Python package; numpy comes with it)
WHEN `deploy env build` / `deploy package` build its environment
THEN the archive has the layout the python backend activates, is reused from
     the cache when unchanged, and a model that imports the package loads on
     the local endpoint (with the wheel's stub for the environment's Python),
     while a model without one sees the image's packages only.

Wheels come from PyPI (or the index `pip_index_url` names); built environments
stay in the cache (`DEPLOY_CACHE_DIR`, default ~/.cache/deploy/envs), so a
second run builds nothing.
"""

from __future__ import annotations

import json
import sys
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.envs import build_environment, image_python, read_metadata
from deploy.errors import ConfigError, EnvBuildError
from deploy.repository import parse_config
from tests.functional.local_models import invoke, runtime_client

PACKAGE = "six==1.17.0"  # pure Python, one module
LOCAL_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

MODEL_PY = textwrap.dedent(
    """
    import json
    import sys

    import numpy as np
    import triton_python_backend_utils as pb_utils

    try:
        import six
        SIX = six.__version__
    except ImportError as exc:
        SIX = f"missing: {exc}"


    class TritonPythonModel:
        def execute(self, requests):
            info = json.dumps({"six": SIX, "python": sys.version.split()[0],
                               "prefix": sys.prefix, "path": sys.path,
                               "numpy": np.__version__})
            out = np.array([info.encode()], dtype=object)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
    """
)
CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [1] }} ]
output [ {{ name: "INFO" data_type: TYPE_STRING dims: [1] }} ]
{extra}
"""


def model(repo: Path, name: str, *, requirements: str | None = None, extra: str = "") -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL_PY)
    (folder / "config.pbtxt").write_text(CONFIG.format(name=name, extra=extra))
    if requirements is not None:
        (folder / "requirements.txt").write_text(requirements)
    return folder


def test_the_image_table_gives_each_tag_its_python() -> None:
    assert image_python("24.09").python == "3.10"
    assert image_python("24.10").glibc == (2, 35)
    assert image_python("24.11").python == "3.12"
    assert image_python("26.05-py3").glibc == (2, 39)
    with pytest.raises(ConfigError, match=r"23\.05"):
        image_python("22.12")


def test_an_environment_has_the_backend_layout_and_is_reused(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"# for the test\n{PACKAGE}\n")
    out = tmp_path / "env.tar.gz"
    built = build_environment(requirements, out, python="3.10")
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin/activate"].isfile()
    assert members["bin/python3"].mode & 0o111
    assert "lib/python3.10/site-packages/six.py" in members
    assert any(n.startswith("lib/python3.10/site-packages/numpy/") for n in members)
    assert not any(m.issym() or m.islnk() for m in members.values())
    assert {m.mtime for m in members.values()} == {0}
    metadata = read_metadata(out)
    assert "six==1.17.0" in metadata["installed"]
    assert any(p.startswith("numpy==1.") for p in metadata["installed"])  # held below 2
    assert metadata["platforms"][0] == "manylinux_2_35_x86_64"
    again = build_environment(requirements, tmp_path / "again.tar.gz", python="3.10")
    assert again.reused and again.key == built.key
    assert (tmp_path / "again.tar.gz").read_bytes() == out.read_bytes()
    requirements.write_text(f"{PACKAGE}\n# another comment\n")  # same specifiers
    assert build_environment(requirements, out, python="3.10").key == built.key


def test_a_package_without_a_wheel_for_the_platform_is_named(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pywin32==306\n")  # Windows wheels only
    with pytest.raises(EnvBuildError) as caught:
        build_environment(requirements, tmp_path / "env.tar.gz", python="3.10")
    text = str(caught.value)
    assert "pywin32" in text and "manylinux_2_35_x86_64" in text and "3.10" in text
    assert not (tmp_path / "env.tar.gz").exists()


def test_pip_options_are_refused(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("-r other.txt\n")
    result = CliRunner().invoke(
        app, ["env", "build", str(requirements), "--out", str(tmp_path / "e.tar.gz")]
    )
    assert result.exit_code == 1
    assert "line 1: '-r other.txt': -r is a pip option" in result.output
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any], Path]]:
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint

    root = tmp_path_factory.mktemp("envs")
    repo = root / "repo"
    # requirements.txt, packaged for the 24.09 image (Python 3.10).
    model(repo, "packaged", requirements=f"{PACKAGE}\n")
    # An environment built by hand for this machine's Python, named in the config.
    explicit = model(
        repo,
        "explicit",
        extra='parameters { key: "EXECUTION_ENV_PATH" '
        'value { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }',
    )
    (root / "req.txt").write_text(f"{PACKAGE}\n")
    built = CliRunner().invoke(
        app,
        [
            "env",
            "build",
            str(root / "req.txt"),
            "--python",
            LOCAL_PYTHON,
            "--out",
            str(explicit / "env.tar.gz"),
        ],
    )
    assert built.exit_code == 0, built.output
    model(repo, "bare")  # no environment: the image's packages only
    store = root / "store"
    packaged = CliRunner().invoke(app, ["package", str(repo), "--out", str(store), "--json"])
    assert packaged.exit_code == 0, packaged.output
    manifest = json.loads((store / "manifest.json").read_text())
    endpoint = LocalEndpoint(
        store, work_dir=root / "work", options=EndpointOptions(endpoint_name="local")
    ).start()
    try:
        yield endpoint.url, manifest, store
    finally:
        endpoint.stop()


def info(served: tuple[str, dict[str, Any], Path], name: str) -> dict[str, Any]:
    url, manifest, _ = served
    target = manifest["models"][name]["target_model"]
    _, outputs = invoke(runtime_client(url), "local", target, {"X": np.zeros((1,), np.float32)})
    document: dict[str, Any] = json.loads(outputs["INFO"][0])
    return document


@pytest.mark.triton
@pytest.mark.slow
def test_package_bundles_requirements_as_the_environment(
    served: tuple[str, dict[str, Any], Path],
) -> None:
    _, manifest, store = served
    with tarfile.open(store / manifest["models"]["packaged"]["target_model"]) as tar:
        names = tar.getnames()
        config = parse_config(tar.extractfile("packaged/config.pbtxt").read().decode())  # type: ignore[union-attr]
        env = tar.extractfile("packaged/python-env.tar.gz").read()  # type: ignore[union-attr]
    assert "packaged/requirements.txt" in names
    value = config.parameters["EXECUTION_ENV_PATH"].string_value
    assert value == "$$TRITON_MODEL_DIRECTORY/python-env.tar.gz"
    assert b"lib/python3.10/site-packages/six.py" in __import__("gzip").decompress(env)


@pytest.mark.triton
@pytest.mark.slow
def test_models_import_what_their_environment_ships(
    served: tuple[str, dict[str, Any], Path],
) -> None:
    packaged = info(served, "packaged")  # 24.09's Python 3.10, through the wheel's 3.10 stub
    assert packaged["six"] == "1.17.0"
    assert packaged["python"].startswith("3.10.")
    assert packaged["numpy"].startswith("1.")
    explicit = info(served, "explicit")
    assert explicit["six"] == "1.17.0"
    assert explicit["python"].startswith(LOCAL_PYTHON + ".")


@pytest.mark.triton
@pytest.mark.slow
def test_a_model_without_an_environment_sees_only_the_image_packages(
    served: tuple[str, dict[str, Any], Path],
) -> None:
    bare = info(served, "bare")
    assert bare["six"].startswith("missing")
    site_dirs = [p for p in bare["path"] if p.endswith("-packages")]
    # The image's Python: one site-packages, holding numpy and nothing of this machine.
    assert len(site_dirs) == 1 and "image-python" in site_dirs[0], bare["path"]
    assert bare["prefix"] != sys.base_prefix
    assert bare["numpy"].startswith("1.")


def test_deploy_up_packages_environments_for_the_stage_image(tmp_path: Path) -> None:
    """`deploy up`'s package stage builds environments for the stage's image, not the default."""
    from deploy.config import load_settings
    from deploy.hosting import mode_named
    from deploy.lifecycle import stages

    repo = tmp_path / "repo"
    model(repo, "packaged", requirements=f"{PACKAGE}\n")
    settings = load_settings(infra={"triton_version": "24.11"})
    assert image_python(settings.infra.triton_version).python == "3.12"

    store = tmp_path / "out"
    stages.package(
        mode_named("multi-model"), repo, store, triton_version=settings.infra.triton_version
    )

    manifest = json.loads((store / "manifest.json").read_text())
    with tarfile.open(store / manifest["models"]["packaged"]["target_model"]) as tar:
        env = tar.extractfile("packaged/python-env.tar.gz").read()  # type: ignore[union-attr]
    assert b"lib/python3.12/site-packages/six.py" in __import__("gzip").decompress(env)
