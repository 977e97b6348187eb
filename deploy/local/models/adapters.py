"""Rewrites models this Triton build cannot run into python-backend models.

The local tritonserver ships only the python backend. TorchScript
(`pytorch_libtorch`) and ONNX (`onnxruntime_onnx`) models are served by a
generated python-backend adapter (`adapter_model.py.tmpl`) that keeps their
names, datatypes, shapes and batching. Models of any other backend (TensorRT,
TensorFlow, DALI, FIL, vLLM, ...) cannot run here and are refused by the
backend's name, before anything else is said about them. `KIND_GPU` instance
groups stay on the GPU where a CUDA device is visible and become `KIND_CPU`
(with a warning) where none is.
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

from deploy import box
from deploy.checkout import make_hint
from deploy.errors import LocalEndpointError
from deploy.repository.model import COMPLETED_CONFIG_HEADER
from deploy.repository.schema import model_config_pb2 as mc

log = logging.getLogger(__name__)

ADAPTED = {
    "pytorch_libtorch": ("pytorch", "model.pt"),
    "onnxruntime_onnx": ("onnxruntime", "model.onnx"),
}
_BACKEND_TO_PLATFORM = {backend: platform for platform, (backend, _) in ADAPTED.items()}
NATIVE = frozenset({"python", "ensemble"})  # what this tritonserver runs itself
REFUSED = {  # backend or platform -> the name people know it by
    "tensorrt_plan": "TensorRT",
    "tensorflow_graphdef": "TensorFlow",
    "tensorflow_savedmodel": "TensorFlow",
    "tensorrt": "TensorRT",
    "tensorflow": "TensorFlow",
    "openvino": "OpenVINO",
    "fil": "FIL",
    "dali": "DALI",
    "vllm": "vLLM",
    "tensorrtllm": "TensorRT-LLM",
}
# Triton picks the platform from the model file when a config names none (auto-complete).
_DEFAULT_FILES = {
    "model.py": "python",
    "model.onnx": "onnxruntime_onnx",
    "model.pt": "pytorch_libtorch",
    "model.plan": "tensorrt_plan",
    "model.savedmodel": "tensorflow_savedmodel",
    "model.graphdef": "tensorflow_graphdef",
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
        config = read_config(path)
        _require_backend(path, config)
        _check_completion(path, config, auto_complete)
        _announce_code(path, config)
        _adapt_model(path, config, devices, report)
    return report


def _announce_code(path: Path, config: mc.ModelConfig) -> None:
    """A python model's code runs in tritonserver's boxed stub: say so, or refuse it."""
    kind = backend_of(path, config)
    if kind not in ("python", "pytorch", "pytorch_libtorch"):
        return
    versions = sorted(
        (p for p in path.parent.iterdir() if p.is_dir() and p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    name = config.default_model_filename or ("model.py" if kind == "python" else "model.pt")
    code = versions[-1] / name if versions else path.parent
    purpose = "python model" if kind == "python" else "TorchScript model, through its adapter"
    if box.skip_reason() is not None:
        refusal = box.refused(
            str(code),
            f"serving {purpose} {config.name or path.parent.name}",
            fix="serve a repository without it",
        )
        raise LocalEndpointError(refusal.message, where=refusal.where, fix=refusal.fix)
    box.announce(code, f"{purpose}, served by tritonserver")


def backend_of(path: Path, config: mc.ModelConfig) -> str:
    """The config's platform or backend; from the model file when it names neither."""
    kind = config.platform or config.backend
    if kind:
        return str(kind)
    for version in sorted(p for p in path.parent.iterdir() if p.is_dir() and p.name.isdigit()):
        for filename, platform in _DEFAULT_FILES.items():
            if (version / filename).exists():
                return platform
    return ""


def _require_backend(path: Path, config: mc.ModelConfig) -> None:
    name = config.name or path.parent.name
    kind = backend_of(path, config)
    if kind in NATIVE or kind in ADAPTED or kind in _BACKEND_TO_PLATFORM:
        return
    where = f"model {name} ({path})"
    if not kind:
        raise LocalEndpointError(
            "config.pbtxt names no backend or platform and no version folder holds a model "
            f"file Triton recognises ({', '.join(_DEFAULT_FILES)})",
            where=where,
            fix='set `backend` (e.g. backend: "python") in config.pbtxt',
        )
    known = f" ({REFUSED[kind]})" if kind in REFUSED else ""
    field = "platform" if config.platform else "backend"
    raise LocalEndpointError(
        f"{field} {kind!r}{known} is not available on the local endpoint: its tritonserver "
        "has only the python backend, and serves TorchScript and ONNX models through "
        "adapters",
        where=where,
        fix="test this model on a SageMaker endpoint (`deploy up`), or export it to "
        "TorchScript or ONNX for local runs",
    )


def _check_completion(path: Path, config: mc.ModelConfig, auto_complete: bool) -> None:
    """Refuse a config that only Triton's auto-completion would make loadable.

    A complete config loads whether or not its model.py defines
    `auto_complete_config`; without --auto-complete-config the hook is not run,
    which the log says.
    """
    if auto_complete:
        return
    name = config.name or path.parent.name
    defines_hook = any(
        "def auto_complete_config" in script.read_text(encoding="utf-8", errors="replace")
        for script in path.parent.glob("*/model.py")
    )
    incomplete = config.platform != "ensemble" and not (config.input and config.output)
    if incomplete:
        raise LocalEndpointError(
            "config.pbtxt declares no "
            + ("inputs" if not config.input else "outputs")
            + " and relies on Triton's config auto-completion"
            + (" (model.py defines auto_complete_config)" if defines_hook else ""),
            where=f"model {name} ({path})",
            fix="complete its config.pbtxt (inputs, outputs; `deploy validate --show-config` "
            "prints the completed config), or run the endpoint with --auto-complete-config",
        )
    if defines_hook and not _completed_by_package(path):
        log.warning(
            "model %r: model.py defines auto_complete_config, which this endpoint does not "
            "run (tritonserver runs with --disable-auto-complete-config); config.pbtxt is "
            "served as written. Run the endpoint with --auto-complete-config to apply the hook.",
            name,
        )


def _completed_by_package(path: Path) -> bool:
    """Whether `deploy package` wrote this config.pbtxt from auto_complete_config's result."""
    with path.open(encoding="utf-8", errors="replace") as file:
        return file.readline().rstrip("\n") == COMPLETED_CONFIG_HEADER


def _adapt_model(
    path: Path, config: mc.ModelConfig, cuda_devices: int, report: AdaptReport
) -> None:
    folder = path.parent
    name = config.name or folder.name
    kind = backend_of(path, config)
    changed = False
    if not (config.platform or config.backend):
        # What auto-completion would fill in; this tritonserver runs without it.
        if kind == "python":
            config.backend = kind
        else:
            config.platform = kind
        changed = True
    if kind == "python" and "EXECUTION_ENV_PATH" in config.parameters:
        from deploy.local.triton.envs import prepare_environment_model
        from deploy.local.triton.install import find_triton

        env_path = config.parameters["EXECUTION_ENV_PATH"].string_value
        prepare_environment_model(folder, env_path, find_triton())
    platform = kind if kind in ADAPTED else _BACKEND_TO_PLATFORM.get(kind, "")
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
        header = COMPLETED_CONFIG_HEADER + "\n" if _completed_by_package(path) else ""
        partial = path.with_suffix(".pbtxt.partial")
        partial.write_text(header + text_format.MessageToString(config), encoding="utf-8")
        partial.replace(path)


def _write_adapter(folder: Path, config: mc.ModelConfig, platform: str) -> None:
    filename = config.default_model_filename or ADAPTED[platform][1]
    versions = [p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()]
    if not any((version / filename).exists() for version in versions):
        raise LocalEndpointError(
            f"no version folder holds {filename!r}",
            where=f"model {config.name or folder.name} ({folder})",
            fix=f"put the model's weights ({filename}) in a version folder and re-package"
            + make_hint("; for the examples, run `make models` (weights are generated)"),
        )
    template = resources.files("deploy.local.models").joinpath("adapter_model.py.tmpl")
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
