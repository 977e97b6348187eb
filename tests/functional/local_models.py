"""Small models and archives the local-endpoint tests build themselves.

Archives are written with `tarfile` (like `deploy package` lays them out:
the model folder at the archive root), so these tests do not depend on the
packaging code. The binary request/response codec is tritonclient's.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

ADDSUB_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }},
        {{ name: "INPUT1" data_type: TYPE_FP32 dims: [4] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }},
         {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [4] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

ADDSUB_MODEL = textwrap.dedent(
    """
    import time
    import triton_python_backend_utils as pb_utils

    DELAY = {delay}
    EXECUTE_DELAY = {execute_delay}
    FINALIZE_DELAY = {finalize_delay}

    class TritonPythonModel:
        def initialize(self, args):
            time.sleep(DELAY)

        def finalize(self):
            time.sleep(FINALIZE_DELAY)

        def execute(self, requests):
            time.sleep(EXECUTE_DELAY)
            responses = []
            for request in requests:
                a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]))
            return responses
    """
)


def add_file(tar: tarfile.TarFile, name: str, data: bytes, **fields: Any) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data))


def write_archive(path: Path, files: dict[str, bytes]) -> str:
    """A .tar.gz of `files` (archive name -> bytes); returns its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            add_file(tar, name, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def addsub_files(
    name: str, *, delay: float = 0.0, execute_delay: float = 0.0, finalize_delay: float = 0.0
) -> dict[str, bytes]:
    """An add/sub python model; `delay` slows its load, `execute_delay` each call,
    `finalize_delay` its unload."""
    model = ADDSUB_MODEL.format(
        delay=delay, execute_delay=execute_delay, finalize_delay=finalize_delay
    )
    return {
        f"{name}/config.pbtxt": ADDSUB_CONFIG.format(name=name).encode(),
        f"{name}/1/model.py": model.encode(),
    }


def write_folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def folder_files(folder: Path, prefix: str) -> dict[str, bytes]:
    return {
        f"{prefix}/{p.relative_to(folder).as_posix()}": p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def encode(inputs: dict[str, np.ndarray]) -> tuple[bytes, str]:
    import tritonclient.http as th
    from tritonclient.utils import np_to_triton_dtype

    tensors = []
    for name, array in inputs.items():
        tensor = th.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array, binary_data=True)
        tensors.append(tensor)
    body, header = th.InferenceServerClient.generate_request_body(tensors)
    if header is None:
        return body, "application/json"
    return body, f"application/vnd.sagemaker-triton.binary+json;json-header-size={header}"


def decode(body: bytes, content_type: str) -> dict[str, np.ndarray]:
    import tritonclient.http as th

    header = None
    if "json-header-size=" in content_type:
        header = int(content_type.rsplit("=", 1)[1])
    result = th.InferenceServerClient.parse_response_body(body, header_length=header)
    outputs = result.get_response()["outputs"]
    return {o["name"]: result.as_numpy(o["name"]) for o in outputs}


def runtime_client(url: str, *, retries: int = 1) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": retries, "mode": "standard"}),
    )


def invoke(client: Any, endpoint: str, target: str, inputs: dict[str, np.ndarray]) -> Any:
    body, content_type = encode(inputs)
    response = client.invoke_endpoint(
        EndpointName=endpoint, TargetModel=target, Body=body, ContentType=content_type
    )
    return response, decode(response["Body"].read(), response["ContentType"])


def manifest_entry(name: str, target: str, sha: str) -> dict[str, Any]:
    return {"name": name, "target_model": target, "sha256": sha}


def write_manifest(store: Path, entries: dict[str, dict[str, Any]]) -> None:
    path = store / "manifest.json"
    document = json.loads(path.read_text()) if path.is_file() else {"format": 1, "models": {}}
    document["models"].update(entries)
    path.write_text(json.dumps(document, indent=2))
