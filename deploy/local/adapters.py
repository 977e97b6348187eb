"""Rewrites models this Triton build cannot run into python-backend models.

The local tritonserver ships only the python backend. TorchScript
(`pytorch_libtorch`) and ONNX (`onnxruntime_onnx`) models are served by a
generated python-backend adapter (`adapter_model.py.tmpl`) that keeps their
names, datatypes, shapes and batching. TensorRT and TensorFlow models cannot
be emulated and are refused by name. `KIND_GPU` instance groups stay on the
GPU where a CUDA device is visible and become `KIND_CPU` (with a warning)
where none is.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2 as mc

from deploy.errors import LocalEndpointError

log = logging.getLogger(__name__)

ADAPTED = {
    "pytorch_libtorch": ("pytorch", "model.pt"),
    "onnxruntime_onnx": ("onnxruntime", "model.onnx"),
}
_BACKEND_TO_PLATFORM = {backend: platform for platform, (backend, _) in ADAPTED.items()}
REFUSED = {
    "tensorrt_plan": "TensorRT",
    "tensorflow_graphdef": "TensorFlow",
    "tensorflow_savedmodel": "TensorFlow",
    "tensorrt": "TensorRT",
    "tensorflow": "TensorFlow",
    "openvino": "OpenVINO",
    "fil": "FIL",
}


@dataclass
class AdaptReport:
    """What was changed, for the log and for status."""

    adapted: dict[str, str] = field(default_factory=dict)  # model -> platform
    moved_to_cpu: list[str] = field(default_factory=list)


@functools.cache
def cuda_device_count() -> int:
    """CUDA devices this process can see (0 without a driver), without importing torch."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def read_config(path: Path) -> mc.ModelConfig:
    config = mc.ModelConfig()
    try:
        text_format.Parse(path.read_text(encoding="utf-8"), config)
    except (text_format.ParseError, DecodeError, UnicodeDecodeError) as exc:
        raise LocalEndpointError(
            f"config.pbtxt cannot be parsed: {exc}",
            where=str(path),
            fix="run `deploy validate` on the repository",
        ) from exc
    return config


def adapt_folder(
    root: Path, *, cuda_devices: int | None = None, auto_complete: bool = True
) -> AdaptReport:
    """Adapt every model folder (`*/config.pbtxt`, or `root` itself) under `root`.

    With `auto_complete=False` (tritonserver started with
    --disable-auto-complete-config) a model that relies on auto-completion is
    refused by name instead of failing inside Triton.
    """
    devices = cuda_device_count() if cuda_devices is None else cuda_devices
    report = AdaptReport()
    configs = [root / "config.pbtxt"] if (root / "config.pbtxt").is_file() else []
    configs += sorted(root.glob("*/config.pbtxt"))
    for path in configs:
        if not auto_complete:
            _require_complete(path)
        _adapt_model(path, devices, report)
    return report


def _require_complete(path: Path) -> None:
    config = read_config(path)
    name = config.name or path.parent.name
    defines_hook = any(
        "def auto_complete_config" in script.read_text(encoding="utf-8", errors="replace")
        for script in path.parent.glob("*/model.py")
    )
    incomplete = config.platform != "ensemble" and not (config.input and config.output)
    if defines_hook or incomplete:
        raise LocalEndpointError(
            "the model relies on Triton's config auto-completion"
            + (" (model.py defines auto_complete_config)" if defines_hook else ""),
            where=f"model {name} ({path})",
            fix="complete its config.pbtxt (inputs, outputs), or run the endpoint with "
            "--auto-complete-config",
        )


def _adapt_model(path: Path, cuda_devices: int, report: AdaptReport) -> None:
    folder = path.parent
    config = read_config(path)
    name = config.name or folder.name
    kind = config.platform or config.backend
    if kind in REFUSED:
        raise LocalEndpointError(
            f"model {name!r} needs the {REFUSED[kind]} backend ({kind}), which the local "
            "tritonserver does not have and cannot emulate",
            where=f"model {name} ({path})",
            fix="test this model on a SageMaker endpoint (`deploy up`), or export it to "
            "TorchScript or ONNX for local runs",
        )
    changed = False
    platform = config.platform or _BACKEND_TO_PLATFORM.get(config.backend, "")
    if platform in ADAPTED:
        _write_adapter(folder, config, platform)
        report.adapted[name] = platform
        log.info("model %r (%s) will be served by the python-backend adapter", name, platform)
        changed = True
    if cuda_devices == 0:
        for group in config.instance_group:
            if group.kind == mc.ModelInstanceGroup.KIND_GPU:
                group.kind = mc.ModelInstanceGroup.KIND_CPU
                del group.gpus[:]
                changed = True
                if name not in report.moved_to_cpu:
                    report.moved_to_cpu.append(name)
                    log.warning(
                        "model %r asks for KIND_GPU but no CUDA device is visible; "
                        "running it on CPU",
                        name,
                    )
    if changed:
        partial = path.with_suffix(".pbtxt.partial")
        partial.write_text(text_format.MessageToString(config), encoding="utf-8")
        partial.replace(path)


def _write_adapter(folder: Path, config: mc.ModelConfig, platform: str) -> None:
    filename = config.default_model_filename or ADAPTED[platform][1]
    versions = [p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()]
    if not any((version / filename).exists() for version in versions):
        raise LocalEndpointError(
            f"no version folder holds {filename!r}",
            where=f"model {config.name or folder.name} ({folder})",
            fix="run `make models` (weights are generated) and re-package",
        )
    template = resources.files("deploy.local").joinpath("adapter_model.py.tmpl")
    for version in versions:
        if (version / filename).exists():
            with resources.as_file(template) as source:
                shutil.copyfile(source, version / "model.py")
    config.platform = ""
    config.backend = "python"
    # For the python backend this field names the .py file; the weights file
    # travels in a parameter instead.
    config.default_model_filename = ""
    config.parameters["DEPLOY_ADAPTER_FRAMEWORK"].string_value = platform
    config.parameters["DEPLOY_ADAPTER_MODEL_FILE"].string_value = filename
