"""TargetModel and CustomAttributes headers as SageMaker reads them, and names
the model server cannot serve.

botocore sends header values as UTF-8; SageMaker constrains TargetModel to
printable ASCII (`\\A\\S[\\p{Print}]*\\z`) and CustomAttributes to ASCII. A
TargetModel that passes those but holds characters the python backend's stub
command line cannot carry (a space, `$`) is refused before anything loads.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.functional.local_models import addsub_files, encode, runtime_client, write_archive

pytestmark = [pytest.mark.triton, pytest.mark.slow]

A = np.arange(8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def runtime(local_endpoint: Any) -> Any:
    return runtime_client(local_endpoint.url)


def call(runtime: Any, target: str, **extra: Any) -> Any:
    body, content_type = encode({"INPUT0": A, "INPUT1": A})
    return runtime.invoke_endpoint(
        EndpointName="local", TargetModel=target, Body=body, ContentType=content_type, **extra
    )


def test_target_model_with_a_space_is_refused(local_endpoint: Any, runtime: Any) -> None:
    # The archive exists and its model folder is fine: only the name is wrong (the
    # stub's command line would split at the space and fail to load the model).
    target = "tests/add sub.tar.gz"
    write_archive(local_endpoint.store_dir / target, addsub_files("names_space"))
    with pytest.raises(runtime.exceptions.ValidationError) as caught:
        call(runtime, target)
    message = caught.value.response["Error"]["Message"]
    assert "characters the model server cannot serve: ' '" in message
    assert "letters A-Z and a-z, digits" in message
    assert target not in [m["target_model"] for m in local_endpoint.endpoint.listing()["loaded"]]


def test_target_model_cannot_run_commands(
    local_endpoint: Any, runtime: Any, tmp_path: Path
) -> None:
    """The python backend runs `bash -c "exec stub ... <model name>"`; a TargetModel
    is the model's name on a multi-model endpoint."""
    marker = tmp_path / "ran"
    target = f"tests/x$(touch${{IFS}}{marker}).tar.gz"
    write_archive(local_endpoint.store_dir / target, addsub_files("names_shell"))
    with pytest.raises(runtime.exceptions.ValidationError) as caught:
        call(runtime, target)
    assert "cannot serve: '$', '(', '{', '}', ')'" in caught.value.response["Error"]["Message"]
    assert not marker.exists()


def test_non_ascii_target_model_is_read_as_utf8_and_refused(
    local_endpoint: Any, runtime: Any
) -> None:
    target = "tests/naïve.tar.gz"
    write_archive(local_endpoint.store_dir / target, addsub_files("names_utf8"))
    with pytest.raises(runtime.exceptions.ValidationError) as caught:
        call(runtime, target)
    message = caught.value.response["Error"]["Message"]
    assert "Value 'tests/naïve.tar.gz' at 'targetModel'" in message  # not 'naÃ¯ve'
    assert r"\A\S[\p{Print}]*\z" in message


def test_target_model_that_is_not_utf8_is_refused(local_endpoint: Any) -> None:
    body, content_type = encode({"INPUT0": A, "INPUT1": A})
    head = (
        "POST /endpoints/local/invocations HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    ).encode()
    head += b"X-Amzn-SageMaker-Target-Model: tests/\xff.tar.gz\r\n\r\n"
    with socket.create_connection(("127.0.0.1", local_endpoint.endpoint.port), timeout=10) as sock:
        sock.sendall(head + body)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"X-Amzn-SageMaker-Target-Model header is not UTF-8" in answer


def test_custom_attributes_must_be_ascii(local_endpoint: Any, runtime: Any) -> None:
    target = local_endpoint.target_model("addsub")
    assert (
        call(runtime, target, CustomAttributes="trace=abc")["ResponseMetadata"]["HTTPStatusCode"]
        == 200
    )
    with pytest.raises(runtime.exceptions.ValidationError) as caught:
        call(runtime, target, CustomAttributes="trace=é")
    message = caught.value.response["Error"]["Message"]
    assert "Value 'trace=é' at 'customAttributes'" in message
    with pytest.raises(runtime.exceptions.ValidationError, match="less than or equal to 1024"):
        call(runtime, target, CustomAttributes="a" * 1025)


def test_served_names_still_load(local_endpoint: Any, runtime: Any) -> None:
    target = "tests/names_ok-1.v2_x.tar.gz"
    write_archive(local_endpoint.store_dir / target, addsub_files("names_fine"))
    assert call(runtime, target)["ResponseMetadata"]["HTTPStatusCode"] == 200
