"""Models that load or fail to load on the local endpoint, and what callers are told.

A complete config loads even when model.py defines `auto_complete_config`;
a model that cannot load says why (the missing backend, the missing Python
package and how to ship it) to boto3 and to the SDK; TargetModels up to
InvokeEndpoint's 1024 characters get a 4xx or an answer, never a 500.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest

from deploy.client import Endpoint, ModelError
from tests.functional.local_models import addsub_files, invoke, runtime_client, write_archive

pytestmark = [pytest.mark.triton, pytest.mark.slow]

A = np.arange(4, dtype=np.float32).reshape(1, 4)
INPUTS = {"INPUT0": A, "INPUT1": A}

AUTO_COMPLETE_HOOK = b"""
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.set_max_batch_size(8)
        return auto_complete_model_config
"""


def publish(endpoint: Any, target: str, files: dict[str, bytes]) -> str:
    write_archive(endpoint.store_dir / target, files)
    return target


def test_complete_config_loads_although_model_py_defines_auto_complete_config(
    local_endpoint: Any,
) -> None:
    files = addsub_files("hooked")
    files["hooked/1/model.py"] += AUTO_COMPLETE_HOOK
    target = publish(local_endpoint, "load/hooked.tar.gz", files)

    _, outputs = invoke(runtime_client(local_endpoint.url), "local", target, INPUTS)

    np.testing.assert_array_equal(outputs["OUTPUT0"], A + A)


VLLM_FILES = {
    "vllm_model/config.pbtxt": b'backend: "vllm"\ninstance_group [ { kind: KIND_MODEL } ]\n',
    "vllm_model/1/model.json": json.dumps({"model": "facebook/opt-125m"}).encode(),
}


def test_a_backend_this_endpoint_lacks_is_named_to_boto3_and_the_sdk(
    local_endpoint: Any,
) -> None:
    target = publish(local_endpoint, "load/vllm.tar.gz", VLLM_FILES)
    runtime = runtime_client(local_endpoint.url)

    with pytest.raises(runtime.exceptions.ModelError) as caught:
        invoke(runtime, "local", target, INPUTS)
    original = caught.value.response["OriginalMessage"]
    assert "backend 'vllm' (vLLM) is not available on the local endpoint" in original
    assert "auto-completion" not in original
    assert "deploy up" in caught.value.response["Error"]["Message"]  # the fix

    with (
        Endpoint("local", endpoint_url=local_endpoint.url, retries=1) as endpoint,
        pytest.raises(ModelError) as sdk_error,
    ):
        endpoint.infer("vllm", INPUTS, target_model=target)
    assert "backend 'vllm' (vLLM) is not available" in str(sdk_error.value)
    assert sdk_error.value.fix is not None
    assert sdk_error.value.fix.startswith("the model failed to load: ")
    assert "check the endpoint name" not in str(sdk_error.value)


def test_a_python_import_the_image_lacks_names_the_package_and_the_fix(
    local_endpoint: Any,
) -> None:
    files = addsub_files("imports")
    files["imports/1/model.py"] = b"import transformers\n" + files["imports/1/model.py"]
    target = publish(local_endpoint, "load/imports.tar.gz", files)
    runtime = runtime_client(local_endpoint.url)

    with pytest.raises(runtime.exceptions.ModelError) as caught:
        invoke(runtime, "local", target, INPUTS)
    assert "No module named 'transformers'" in caught.value.response["OriginalMessage"]
    message = caught.value.response["Error"]["Message"]
    assert "imports 'transformers'" in message
    assert "execution environment" in message

    with (
        Endpoint("local", endpoint_url=local_endpoint.url, retries=1) as endpoint,
        pytest.raises(ModelError) as sdk_error,
    ):
        endpoint.infer("imports", INPUTS, target_model=target)
    text = str(sdk_error.value)
    assert "No module named 'transformers'" in text
    assert "imports 'transformers'" in text
    assert "EXECUTION_ENV_PATH" in text
    assert "check the inputs" not in text


def test_a_long_target_model_is_a_client_error_or_answers(local_endpoint: Any) -> None:
    runtime = runtime_client(local_endpoint.url)
    # One path component longer than any file name the store's file system allows.
    with pytest.raises(runtime.exceptions.ValidationError, match="no archive"):
        invoke(runtime, "local", "m" * 300 + ".tar.gz", INPUTS)
    # 1024 characters (InvokeEndpoint's limit) in folders the file system does allow.
    folders = "/".join(["d" * 200] * 4)
    target = f"{folders}/{'m' * (1024 - len(folders) - 8)}.tar.gz"
    assert len(target) == 1024
    publish(local_endpoint, target, addsub_files("long"))
    _, outputs = invoke(runtime, "local", target, INPUTS)
    np.testing.assert_array_equal(outputs["OUTPUT1"], A - A)


@pytest.mark.moto
def test_a_long_target_model_loads_from_s3(
    moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deploy.local.modes.endpoint import LocalEndpoint

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="long-names")
    target = "m" * 1017 + ".tar.gz"  # one key component of 1024 characters
    write_archive(tmp_path / "long.tar.gz", addsub_files("long"))
    s3.upload_file(str(tmp_path / "long.tar.gz"), "long-names", target)

    with LocalEndpoint("s3://long-names/", work_dir=tmp_path / "work") as endpoint:
        _, outputs = invoke(runtime_client(endpoint.url), "local", target, INPUTS)
    np.testing.assert_array_equal(outputs["OUTPUT0"], A + A)
