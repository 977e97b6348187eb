"""What Triton knows about platforms, backends, default model files and datatypes.

Tables follow triton-inference-server/core (`model_config_utils.cc`) and the
backends' documentation: which `platform` goes with which `backend`, and which
file (or folder) each loads from a version directory when the config sets no
`default_model_filename`.
"""

from __future__ import annotations

# platform -> the backend that serves it
PLATFORM_BACKENDS: dict[str, str] = {
    "tensorrt_plan": "tensorrt",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
}
ENSEMBLE_PLATFORM = "ensemble"

# backend -> default model file; None: the backend has no single default file.
BACKEND_DEFAULT_FILES: dict[str, str | None] = {
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "python": "model.py",
    "openvino": "model.xml",
    "dali": "model.dali",
    "fil": "xgboost.model",  # with model_type "xgboost"; see FIL_MODEL_FILES
    "tensorflow": None,  # model.graphdef or model.savedmodel, by platform
    "identity": None,
    "repeat": None,
    "square": None,
    "vllm": None,
    "tensorrtllm": None,
}
PLATFORM_DEFAULT_FILES: dict[str, str] = {
    "tensorrt_plan": "model.plan",
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
    "onnxruntime_onnx": "model.onnx",
    "pytorch_libtorch": "model.pt",
}
# Model files whose format lets Triton fill in a missing config.pbtxt
# (`--strict-model-config=false`): file name -> (platform, backend).
AUTOCOMPLETE_FILES: dict[str, tuple[str, str]] = {
    "model.onnx": ("onnxruntime_onnx", "onnxruntime"),
    "model.plan": ("tensorrt_plan", "tensorrt"),
    "model.savedmodel": ("tensorflow_savedmodel", "tensorflow"),
}


# Default model files from which Triton fills in a missing backend field.
FILE_BACKENDS: dict[str, str] = {
    "model.py": "python",
    "model.onnx": "onnxruntime",
    "model.pt": "pytorch",
    "model.plan": "tensorrt",
    "model.savedmodel": "tensorflow",
    "model.graphdef": "tensorflow",
    "model.xml": "openvino",
}


# FIL backend: the file it loads depends on the `model_type` parameter
# (triton-inference-server/fil_backend, docs/model_config.md "Model Filenames",
# src/model.h); "xgboost" is the default when the parameter is absent.
FIL_MODEL_TYPE_PARAMETER = "model_type"
FIL_MODEL_FILES: dict[str, str] = {
    "xgboost": "xgboost.model",
    "xgboost_json": "xgboost.json",
    "xgboost_ubj": "xgboost.ubj",
    "lightgbm": "model.txt",
    "treelite_checkpoint": "checkpoint.tl",
}

# Backends whose default file may legitimately be absent: DALI serializes a
# pipeline found in the version folder when model.dali is missing
# ("autoserialization", triton-inference-server/dali_backend README).
OPTIONAL_DEFAULT_FILES: frozenset[str] = frozenset({"dali"})

# Backends Triton's core checks `platform` against (core `GetBackendType`);
# any other backend (python, fil, custom ones) accepts any platform value.
TYPED_BACKENDS: dict[str, str] = {
    "tensorflow": "tensorflow",
    "tensorrt": "tensorrt",
    "onnxruntime": "onnxruntime",
    "pytorch": "pytorch",
}


def backend_of(platform: str, backend: str, files: frozenset[str] = frozenset()) -> str:
    """The backend that serves a model: `backend`, else from `platform`, else from its files.

    `files` are the names found directly in the version folders.
    """
    if backend:
        return backend
    if platform:
        return PLATFORM_BACKENDS.get(platform, "")
    for filename, inferred in FILE_BACKENDS.items():
        if filename in files:
            return inferred
    return ""


def default_model_file(
    platform: str,
    backend: str,
    default_model_filename: str,
    parameters: dict[str, str] | None = None,
) -> str | None:
    """The file a version folder must hold, or None when it cannot be told offline.

    `parameters` are the config's string parameters (FIL picks its file by
    `model_type`). None also for backends this table does not know: their
    file is the backend's own business.
    """
    if default_model_filename:
        return default_model_filename
    if backend == "fil":
        model_type = (parameters or {}).get(FIL_MODEL_TYPE_PARAMETER, "xgboost")
        return FIL_MODEL_FILES.get(model_type)
    # A named backend picks its own file whatever `platform` says (core
    # `AutoCompleteBackendFields`); only TensorFlow's depends on the platform.
    if backend and BACKEND_DEFAULT_FILES.get(backend) is not None:
        return BACKEND_DEFAULT_FILES[backend]
    if platform in PLATFORM_DEFAULT_FILES:
        return PLATFORM_DEFAULT_FILES[platform]
    return BACKEND_DEFAULT_FILES.get(backend)


def is_known_backend(backend: str) -> bool:
    return backend in BACKEND_DEFAULT_FILES


def v2_datatype(config_type_name: str) -> str:
    """`TYPE_FP32` -> `FP32`; `TYPE_STRING` -> `BYTES` (the KServe v2 protocol names)."""
    name = config_type_name.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name
