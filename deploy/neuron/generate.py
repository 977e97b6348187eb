"""`deploy neuron generate`: a Triton python-backend model over a NeuronCore range.

Layout written (the model folder is self-contained, so it survives SageMaker
extracting it anywhere):

    <model-dir>/config.pbtxt      parameters + one KIND_MODEL instance group
    <model-dir>/1/model.py        deploy/neuron/templates/neuron_model.py.tmpl
    <model-dir>/1/<compiled>.pt   the compiled TorchScript, found relative to model.py

The folder is assembled next to its destination and renamed into place, so a
failure never leaves a half-written model.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import resources
from pathlib import Path

from deploy._files import with_umask
from deploy.errors import NeuronError
from deploy.neuron.planning import (
    PARAM_BATCHING,
    PARAM_COMPILED_MODEL,
    PARAM_CORE_END,
    PARAM_CORE_START,
    PARAM_INSTANCE_CORES,
    PARAM_THREADS_PER_CORE,
    split_cores,
)
from deploy.neuron.spec import NeuronModelSpec, TensorSpec

MODEL_VERSION = "1"
NEURON_MODEL_TEMPLATE = "neuron_model.py.tmpl"


def template_text(name: str) -> str:
    return resources.files("deploy.neuron").joinpath("templates", name).read_text("utf-8")


def model_config_text(spec: NeuronModelSpec) -> str:
    """config.pbtxt for `spec`, built with Triton's own protobuf schema."""
    from google.protobuf import text_format

    from deploy.repository.schema import model_config_pb2 as pb

    config = pb.ModelConfig(name=spec.name, backend="python", max_batch_size=spec.max_batch_size)
    for tensor in spec.inputs:
        config.input.append(
            pb.ModelInput(name=tensor.name, data_type=_data_type(tensor), dims=tensor.dims)
        )
    for tensor in spec.outputs:
        config.output.append(
            pb.ModelOutput(name=tensor.name, data_type=_data_type(tensor), dims=tensor.dims)
        )
    # KIND_MODEL: the model places itself (on NeuronCores), not Triton on a CPU/GPU.
    config.instance_group.append(
        pb.ModelInstanceGroup(kind=pb.ModelInstanceGroup.KIND_MODEL, count=spec.instances)
    )
    if spec.dynamic_batching:
        config.dynamic_batching.SetInParent()
        config.dynamic_batching.preferred_batch_size.extend(spec.preferred_batch_sizes)
        config.dynamic_batching.max_queue_delay_microseconds = spec.max_queue_delay_us
    slices = split_cores(spec.cores, spec.instances)
    parameters = {
        PARAM_COMPILED_MODEL: spec.compiled_model.name,
        PARAM_CORE_START: str(spec.cores.start),
        PARAM_CORE_END: str(spec.cores.end),
        PARAM_THREADS_PER_CORE: str(spec.threads_per_core),
        PARAM_INSTANCE_CORES: ",".join(piece.visible_cores() for piece in slices),
        PARAM_BATCHING: spec.batching,
    }
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return str(text_format.MessageToString(config))


def _data_type(tensor: TensorSpec) -> int:
    from deploy.repository.schema import model_config_pb2 as pb

    return int(pb.DataType.Value(f"TYPE_{tensor.datatype}"))


def generate_model(spec: NeuronModelSpec, model_dir: Path, *, force: bool = False) -> Path:
    """Write the model folder for `spec` at `model_dir`; returns `model_dir`."""
    if model_dir.name != spec.name:
        raise NeuronError(
            f"model folder {model_dir.name!r} differs from model name {spec.name!r}",
            where=str(model_dir),
            fix="Triton names a model by its folder: use the same name for both",
        )
    if model_dir.exists() and (not model_dir.is_dir() or any(model_dir.iterdir())) and not force:
        raise NeuronError(
            "model folder already exists and is not empty",
            where=str(model_dir),
            fix="pass --force to replace it, or choose another --model-dir",
        )
    config_text = model_config_text(spec)
    model_py = template_text(NEURON_MODEL_TEMPLATE)
    parent = model_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}.", dir=parent))
        with_umask(staging)  # mkdtemp's 0700 would travel into archives
    except OSError as exc:
        raise NeuronError(f"cannot create the model folder: {exc}", where=str(model_dir)) from exc
    try:
        version = staging / MODEL_VERSION
        version.mkdir()
        (staging / "config.pbtxt").write_text(config_text, encoding="utf-8")
        (version / "model.py").write_text(model_py, encoding="utf-8")
        shutil.copyfile(spec.compiled_model, version / spec.compiled_model.name)
        _swap_into_place(staging, model_dir)
    except OSError as exc:
        raise NeuronError(f"cannot write the model: {exc}", where=str(model_dir)) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model_dir


def _swap_into_place(staging: Path, model_dir: Path) -> None:
    if not model_dir.exists():
        staging.rename(model_dir)
        return
    old = model_dir.with_name(f".{model_dir.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    model_dir.rename(old)
    staging.rename(model_dir)
    shutil.rmtree(old, ignore_errors=True)
