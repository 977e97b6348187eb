"""The generated router and the single-model manifest (no server)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from google.protobuf import text_format

from deploy.client import Manifest
from deploy.errors import RouterError
from deploy.hosting.router_model import (
    read_models,
    router_config_text,
    single_model_manifest,
    write_manifest,
    write_router,
)
from deploy.repository.schema import model_config_pb2


def _model(repository: Path, name: str, body: str) -> None:
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(f'name: "{name}"\n{body}\n')


IMAGE = """backend: "python"
max_batch_size: 8
input { name: "INPUT__0" data_type: TYPE_FP32 dims: [3, 32, 32] }
output { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [10] }"""
TEXT = """backend: "python"
max_batch_size: 0
input { name: "TOKENS__0" data_type: TYPE_INT64 dims: [1, -1] }
input { name: "NAMES__1" data_type: TYPE_STRING dims: [1] }
output { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [1, 10] }"""


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    _model(tmp_path, "image", IMAGE)
    _model(tmp_path, "text", TEXT)
    return tmp_path


def test_router_declares_every_tensor_once_optional_any_size(repository: Path) -> None:
    config = model_config_pb2.ModelConfig()
    text_format.Parse(router_config_text(read_models(repository), instances=3), config)
    assert (config.name, config.backend, config.max_batch_size) == ("router", "python", 0)
    inputs = {t.name: (t.data_type, list(t.dims), t.optional) for t in config.input}
    assert inputs == {
        # rank counts the batch dimension of batching models
        "INPUT__0": (model_config_pb2.TYPE_FP32, [-1, -1, -1, -1], True),
        "TOKENS__0": (model_config_pb2.TYPE_INT64, [-1, -1], True),
        "NAMES__1": (model_config_pb2.TYPE_STRING, [-1], True),
    }
    # OUTPUT__0 is FP32 of rank 2 in both models: declared once.
    assert [(t.name, list(t.dims)) for t in config.output] == [("OUTPUT__0", [-1, -1])]
    assert config.instance_group[0].count == 3
    routes = json.loads(config.parameters["MODELS"].string_value)
    assert routes == {"image": ["OUTPUT__0"], "text": ["OUTPUT__0"]}


def test_conflicting_tensor_names_the_two_models(repository: Path) -> None:
    _model(repository, "vector", IMAGE.replace("dims: [3, 32, 32]", "dims: [4]"))
    with pytest.raises(RouterError, match="input INPUT__0 is FP32 of rank 4 in image") as raised:
        router_config_text(read_models(repository))
    assert raised.value.where == "image, vector"
    assert "rename" in (raised.value.fix or "")


def test_router_name_must_be_free(repository: Path) -> None:
    with pytest.raises(RouterError, match="already named 'image'"):
        router_config_text(read_models(repository), name="image")


def test_write_router_replaces_an_old_router_and_is_python(repository: Path) -> None:
    write_router(repository)
    (repository / "router" / "stale.txt").write_text("old")
    folder = write_router(repository)  # the router itself is not routed to
    assert sorted(p.name for p in folder.iterdir()) == ["1", "config.pbtxt"]
    ast.parse((folder / "1" / "model.py").read_text())
    routes = (folder / "config.pbtxt").read_text()
    assert '\\"router\\"' not in routes
    assert not [p for p in repository.iterdir() if p.name.startswith(".")]


def test_manifest_is_read_by_the_sdk_as_single_model(repository: Path, tmp_path: Path) -> None:
    path = tmp_path / "out" / "manifest.json"
    document = write_manifest(repository, path)
    manifest = Manifest.from_path(path)
    assert manifest.hosting == "single-model"
    assert sorted(manifest.models) == ["image", "text"]
    text = manifest.models["text"]
    assert [(t.name, t.datatype, t.shape) for t in text.inputs] == [
        ("TOKENS__0", "INT64", (1, -1)),
        ("NAMES__1", "BYTES", (1,)),
    ]
    assert document["router"] == "router"
    assert single_model_manifest(read_models(repository))["models"]["image"]["max_batch_size"] == 8


def test_empty_repository_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RouterError, match="no model folders"):
        read_models(tmp_path)
    with pytest.raises(RouterError, match="not found"):
        read_models(tmp_path / "missing")
