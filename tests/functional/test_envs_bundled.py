"""A python model bundled into a BLS archive gets its requirements.txt environment.

GIVEN a repository whose BLS `caller` bundles `callee`, a python model whose
      requirements.txt names `bundledmark` (a pure-Python wheel built here, served with
      numpy from a package index on a loopback port) and whose model.py imports it
WHEN `deploy package` builds the archive (real pip) and the local endpoint serves it
     (the real tritonserver in SageMaker MME mode)
THEN the bundle holds the environment and `deps/callee.json`, the config the caller
     hands `pb_utils.load_model`, names it relative to the bundle's folder; the
     caller's answer is the mark only the wheel's module holds: the callee imported it.
     Every copy gets it (an archive bundling `callee` twice, an ensemble holding it at
     its root and bundled in a step), and archives that bundle the same `callee` keep
     equal bundle digests.

On the old code only the first copy got the environment and the JSON config never
named it: the bundled callee failed to import `bundledmark`, and the caller to load.
"""

from __future__ import annotations

import http.server
import io
import json
import subprocess
import sys
import tarfile
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from deploy.catalogue.images import DEFAULT_TRITON_VERSION, image_python
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
from deploy.packaging import package_repository
from deploy.packaging.bundles import BUNDLES_KEY
from tests.conftest import EXAMPLES
from tests.functional.local_models import invoke, runtime_client
from tests.functional.test_envs_requirements import Index, wheel

ENV = "$$TRITON_MODEL_DIRECTORY/python-env.tar.gz"
# The bundled-dependency loader of the BLS example (everything above its class).
LOADER = (
    (EXAMPLES / "bls_addsub" / "1" / "model.py").read_text().split("class TritonPythonModel")[0]
)
TENSORS = (
    'input [{ name: "X", data_type: TYPE_FP32, dims: [1] }]\n'
    'output [{ name: "MARK", data_type: TYPE_STRING, dims: [1] }]\n'
)
CALLEE = textwrap.dedent(
    """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    import bundledmark  # from the environment deploy package built from requirements.txt


    class TritonPythonModel:
        def execute(self, requests):
            mark = np.array([bundledmark.MARK.encode()], dtype=object)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("MARK", mark)]) for _ in requests]
    """
)
CALLER = textwrap.dedent(
    """
    class TritonPythonModel:
        def initialize(self, args):
            load_bundled_dependencies(args)

        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X")
                call = pb_utils.InferenceRequest(
                    model_name="callee", requested_output_names=["MARK"], inputs=[x]
                )
                result = call.exec()
                if result.has_error():
                    raise pb_utils.TritonModelException(result.error().message())
                mark = pb_utils.get_output_tensor_by_name(result, "MARK")
                responses.append(pb_utils.InferenceResponse([mark]))
            return responses
    """
)


ENSEMBLE = """
name: "steps"
platform: "ensemble"
max_batch_size: 0
input [{ name: "X", data_type: TYPE_FP32, dims: [1] }]
output [{ name: "A", data_type: TYPE_STRING, dims: [1] },
        { name: "B", data_type: TYPE_STRING, dims: [1] }]
ensemble_scheduling { step [
  { model_name: "callee" model_version: -1
    input_map { key: "X" value: "X" } output_map { key: "MARK" value: "A" } },
  { model_name: "caller" model_version: -1
    input_map { key: "X" value: "X" } output_map { key: "MARK" value: "B" } } ] }
"""


def python_model(repository: Path, name: str, code: str, dependencies: str = "") -> Path:
    folder = repository / name
    (folder / "1").mkdir(parents=True)
    parameters = (
        f'parameters {{ key: "deploy.dependencies" value {{ string_value: "{dependencies}" }} }}\n'
        if dependencies
        else ""
    )
    (folder / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n' + TENSORS + parameters
    )
    (folder / "1" / "model.py").write_text(code)
    return folder


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A loopback package index with `bundledmark` (its MARK unique to this run) and
    numpy for the image's Python (every environment gets numpy; fetched from PyPI once)."""
    root = tmp_path_factory.mktemp("index")
    served = Index(root / "index")
    (served.root / "simple").mkdir(parents=True)
    mark = f"bundled-{uuid.uuid4().hex}"
    made = wheel(root, "bundledmark", "1.0", module=f"MARK = {mark!r}\n")
    python = image_python(DEFAULT_TRITON_VERSION).python
    target = ["--implementation", "cp", "--python-version", python]
    target += ["--platform", "manylinux2014_x86_64", "--only-binary=:all:", "numpy<2"]
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *target, "-d", root / "np"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert fetched.returncode == 0, fetched.stderr
    served.add(made, *sorted((root / "np").glob("numpy-*.whl")))

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(served.root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served.url, mark
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def package(index: tuple[str, str], root: Path, *, twice: bool = False) -> dict[str, str]:
    """`caller` bundles `callee`; with `twice`, `twice` bundles `caller` and `callee` (two
    copies of `callee` in one archive) and the ensemble `steps` runs `callee` and `caller`
    (a copy at its root, one bundled in `caller`). Returns each model's archive, packaged in
    root/store."""
    url, _ = index
    repo = root / "repo"
    callee = python_model(repo, "callee", CALLEE)
    (callee / "requirements.txt").write_text("bundledmark==1.0\n")
    python_model(repo, "caller", LOADER + CALLER, dependencies="callee")
    if twice:
        python_model(repo, "twice", LOADER + CALLER, dependencies="caller,callee")
        (repo / "steps" / "1").mkdir(parents=True)
        (repo / "steps" / "config.pbtxt").write_text(ENSEMBLE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_CACHE_DIR", str(root / "cache"))  # this run's index: its own cache
        result = package_repository(repo, root / "store", index_url=url)
    return {p.entry.name: p.entry.target_model for p in result.models}


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


@pytest.mark.slow
def test_every_bundled_copy_holds_the_environment_its_config_names(
    index: tuple[str, str], tmp_path: Path
) -> None:
    targets = package(index, tmp_path, twice=True)
    store = tmp_path / "store"
    twice, steps = members(store / targets["twice"]), members(store / targets["steps"])
    envs = set()
    for files, copy in [
        (twice, "twice/deps/callee"),
        (twice, "twice/deps/caller/deps/callee"),
        (steps, "caller/deps/callee"),
    ]:
        envs.add(files[f"{copy}/python-env.tar.gz"])
        config = json.loads(files[f"{copy}.json"])  # what the caller hands load_model
        assert config["parameters"]["EXECUTION_ENV_PATH"]["string_value"] == ENV
        assert ENV.encode() in files[f"{copy}/config.pbtxt"]
    # Where the model is not bundled (an ensemble's step, its own archive): its config.
    for files, arcname in [(steps, "callee"), (members(store / targets["callee"]), "callee")]:
        envs.add(files[f"{arcname}/python-env.tar.gz"])
        assert ENV.encode() in files[f"{arcname}/config.pbtxt"]
    assert len(envs) == 1  # one environment, the same bytes in each copy
    with tarfile.open(fileobj=io.BytesIO(envs.pop())) as env:
        assert any(n.endswith("site-packages/bundledmark/__init__.py") for n in env.getnames())
    # Identical bundles keep equal digests, within an archive and across archives.
    manifest = json.loads((store / "manifest.json").read_text())["models"]
    digests = {manifest[name][BUNDLES_KEY]["callee"] for name in ("caller", "twice", "steps")}
    assert len(digests) == 1 and "|" not in digests.pop()


@pytest.mark.slow
@pytest.mark.triton
def test_the_bundled_callee_imports_what_its_environment_ships(
    index: tuple[str, str], tmp_path: Path
) -> None:
    _, mark = index
    targets = package(index, tmp_path)
    store = tmp_path / "store"
    x = {"X": np.zeros((1,), np.float32)}
    with LocalEndpoint(store, work_dir=tmp_path / "work", options=EndpointOptions()) as endpoint:
        _, outputs = invoke(runtime_client(endpoint.url), "local", targets["caller"], x)
    assert outputs["MARK"][0].decode() == mark
