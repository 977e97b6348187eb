"""The router model: every model of a repository behind one generated Triton model.

The router layouts (`deploy.hosting.router`: single-model, async and serverless
endpoints, and ml.inf1, which runs no multi-model endpoints) serve it.

SageMaker's single-model mode serves one default model at `/invocations`
(SAGEMAKER_TRITON_DEFAULT_MODEL_NAME). The router generated here is that
model: it declares every input and output of the models it routes to (all
optional, any size), reads the request parameter `target_model` and forwards
the request with BLS. Same-named tensors of different models must agree in
datatype and rank, since the router declares each name once.

`single_model_manifest` describes the layout for the SDK (`"hosting":
"single-model"`: no TargetModel; the model travels as a request parameter).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from deploy._files import atomic_write_bytes, with_umask
from deploy.client.manifest import (
    SINGLE_MODEL,
    Manifest,
    ModelInfo,
    TensorSpec,
    dump,
    written,
)
from deploy.errors import RouterError
from deploy.repository import DEPENDENCIES_PARAMETER
from deploy.repository.bls import literal_callees

ROUTER_NAME = "router"
ROUTER_TEMPLATE = "router_model.py.tmpl"
DEFAULT_ROUTER_INSTANCES = 4
MODEL_VERSION = "1"


def template_text(name: str) -> str:
    return resources.files("deploy.hosting").joinpath("templates", name).read_text("utf-8")


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str  # v2 name: FP32, BYTES, ...
    shape: tuple[int, ...]  # without the batch dimension


@dataclass(frozen=True)
class RoutedModel:
    """What the router and the manifest need from one model's config.pbtxt."""

    name: str
    backend: str
    platform: str
    max_batch_size: int
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    callees: tuple[str, ...] = ()  # models it calls through BLS (declared or literal names)

    @property
    def kind(self) -> str:
        return "ensemble" if self.platform == "ensemble" else "model"

    def rank(self, tensor: Tensor) -> int:
        """Rank of the tensor as sent (the batch dimension included when batching)."""
        return len(tensor.shape) + (1 if self.max_batch_size > 0 else 0)


def _v2_datatype(data_type: int) -> str:
    from deploy.repository.schema import model_config_pb2 as pb

    name = str(pb.DataType.Name(data_type)).removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def read_models(repository: Path, *, exclude: Iterable[str] = ()) -> list[RoutedModel]:
    """Every model folder of `repository` (except `exclude`), from its config.pbtxt."""
    from google.protobuf import text_format

    from deploy.repository.schema import model_config_pb2 as pb

    if not repository.is_dir():
        raise RouterError("model repository not found", where=str(repository))
    skipped = set(exclude)
    models = []
    for config_path in sorted(repository.glob("*/config.pbtxt")):
        name = config_path.parent.name
        if name in skipped or name.startswith("."):
            continue
        config = pb.ModelConfig()
        try:
            text_format.Parse(config_path.read_text(encoding="utf-8"), config)
        except (OSError, text_format.ParseError) as exc:
            raise RouterError(
                f"cannot parse: {exc}", where=str(config_path), fix="fix the config"
            ) from exc

        def tensors(items: Any) -> tuple[Tensor, ...]:
            return tuple(Tensor(t.name, _v2_datatype(t.data_type), tuple(t.dims)) for t in items)

        declared = config.parameters[DEPENDENCIES_PARAMETER].string_value
        callees = {n.strip() for n in declared.split(",") if n.strip()}
        callees |= literal_callees(config_path.parent)
        models.append(
            RoutedModel(
                name=name,
                backend=config.backend,
                platform=config.platform,
                max_batch_size=config.max_batch_size,
                inputs=tensors(config.input),
                outputs=tensors(config.output),
                callees=tuple(sorted(callees - {name})),
            )
        )
    if not models:
        raise RouterError(
            "no model folders (<model>/config.pbtxt) to route to",
            where=str(repository),
            fix="generate models first (deploy neuron generate --model-dir REPO/<name>)",
        )
    return models


def _union(models: list[RoutedModel], *, outputs: bool) -> dict[str, tuple[str, int, str]]:
    """name → (datatype, rank, first model declaring it); conflicts are errors."""
    declared: dict[str, tuple[str, int, str]] = {}
    for model in models:
        for tensor in model.outputs if outputs else model.inputs:
            seen = declared.get(tensor.name)
            mine = (tensor.datatype, model.rank(tensor), model.name)
            if seen is None:
                declared[tensor.name] = mine
            elif seen[:2] != mine[:2]:
                kind = "output" if outputs else "input"
                raise RouterError(
                    f"{kind} {tensor.name} is {seen[0]} of rank {seen[1]} in {seen[2]} but "
                    f"{mine[0]} of rank {mine[1]} in {model.name}; the router declares "
                    "each tensor name once",
                    where=f"{seen[2]}, {model.name}",
                    fix="rename the tensor in one model (e.g. IMAGE__0 / TOKENS__0)",
                )
    return declared


def router_config_text(
    models: list[RoutedModel], *, name: str = ROUTER_NAME, instances: int = DEFAULT_ROUTER_INSTANCES
) -> str:
    """config.pbtxt of the router over `models`."""
    from google.protobuf import text_format

    from deploy.repository.schema import model_config_pb2 as pb

    if instances < 1:
        raise RouterError("the router needs at least one instance", where="--router-instances")
    if any(model.name == name for model in models):
        raise RouterError(
            f"a model is already named {name!r}",
            where=name,
            fix="rename that model or pick another router name",
        )

    def data_type(datatype: str) -> int:
        return int(pb.DataType.Value("TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"))

    # max_batch_size 0: the router passes the batch dimension through untouched.
    config = pb.ModelConfig(name=name, backend="python", max_batch_size=0)
    for tensor_name, (datatype, rank, _) in sorted(_union(models, outputs=False).items()):
        config.input.append(
            pb.ModelInput(
                name=tensor_name, data_type=data_type(datatype), dims=[-1] * rank, optional=True
            )
        )
    for tensor_name, (datatype, rank, _) in sorted(_union(models, outputs=True).items()):
        config.output.append(
            pb.ModelOutput(name=tensor_name, data_type=data_type(datatype), dims=[-1] * rank)
        )
    # Several instances so that requests for different models (and concurrent
    # requests that a model's dynamic batcher can join) do not queue behind one.
    config.instance_group.append(
        pb.ModelInstanceGroup(kind=pb.ModelInstanceGroup.KIND_CPU, count=instances)
    )
    routes = {model.name: [tensor.name for tensor in model.outputs] for model in models}
    config.parameters["MODELS"].string_value = json.dumps(routes, sort_keys=True)
    # BLS callees the router loads before the caller (only those the layout holds).
    known = {model.name for model in models}
    callees = {m.name: [c for c in m.callees if c in known] for m in models}
    config.parameters["CALLEES"].string_value = json.dumps(
        {name: names for name, names in callees.items() if names}, sort_keys=True
    )
    return str(text_format.MessageToString(config))


def write_router(
    repository: Path,
    *,
    name: str = ROUTER_NAME,
    instances: int = DEFAULT_ROUTER_INSTANCES,
    into: Path | None = None,
) -> Path:
    """Write the router for `repository`'s models to `into` (default: the repository)."""
    models = read_models(repository, exclude=[name])
    config_text = router_config_text(models, name=name, instances=instances)
    target = (into or repository) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    with_umask(staging)
    try:
        (staging / MODEL_VERSION).mkdir()
        (staging / "config.pbtxt").write_text(config_text, encoding="utf-8")
        (staging / MODEL_VERSION / "model.py").write_text(
            template_text(ROUTER_TEMPLATE), encoding="utf-8"
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def stage_layout(
    repository: Path,
    staging: Path,
    *,
    router: str = ROUTER_NAME,
    router_instances: int = DEFAULT_ROUTER_INSTANCES,
) -> list[RoutedModel]:
    """`staging` := links to `repository`'s model folders plus a fresh router."""
    models = read_models(repository, exclude=[router])
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for model in models:
        (staging / model.name).symlink_to((repository / model.name).resolve())
    write_router(staging, name=router, instances=router_instances)
    return models


def router_manifest(
    models: list[RoutedModel], *, router: str = ROUTER_NAME, hosting: str = SINGLE_MODEL
) -> Manifest:
    """The manifest for the SDK: one entry per routable model, hosting single-model
    (or another mode that serves the router layout)."""

    def tensors(items: tuple[Tensor, ...]) -> tuple[TensorSpec, ...]:
        return tuple(TensorSpec(t.name, t.datatype, t.shape) for t in items)

    manifest = Manifest(
        hosting,
        {
            model.name: ModelInfo(
                name=model.name,
                # No archive per model here: the name is what the router is sent.
                target_model=model.name,
                max_batch_size=model.max_batch_size,
                inputs=tensors(model.inputs),
                outputs=tensors(model.outputs),
                kind=model.kind,
                backend=model.backend,
                platform=model.platform,
                contains=(model.name,),
            )
            for model in models
            if model.name != router
        },
        router=router,
    )
    return written(manifest)


def single_model_manifest(
    models: list[RoutedModel], *, router: str = ROUTER_NAME
) -> dict[str, Any]:
    """`router_manifest` as a JSON document."""
    return router_manifest(models, router=router).to_document()


def write_manifest(repository: Path, path: Path, *, router: str = ROUTER_NAME) -> dict[str, Any]:
    """Write `single_model_manifest` for `repository` to `path` (atomically)."""
    manifest = router_manifest(read_models(repository, exclude=[router]), router=router)
    atomic_write_bytes(path, dump(manifest))
    return manifest.to_document()
