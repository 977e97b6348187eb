"""The SDK's public surface is pinned, and importing it stays light."""

from __future__ import annotations

import subprocess
import sys

import deploy.client

PUBLIC = {
    "DEFAULT_MAX_PAYLOAD",
    "AsyncEndpoint",
    "AsyncInferenceOptions",
    "AsyncLane",
    "AsyncLocations",
    "AsyncPendingInference",
    "Classification",
    "ClientError",
    "DecodedResponse",
    "EncodedRequest",
    "Endpoint",
    "EndpointError",
    "InferResult",
    "InferenceTimeoutError",
    "InvalidInputError",
    "Manifest",
    "ManifestError",
    "ModelError",
    "ModelInfo",
    "ModelNotFoundError",
    "PayloadTooLargeError",
    "PendingInference",
    "ResponseFormatError",
    "RetriesExhaustedError",
    "RetryPolicy",
    "Tensor",
    "TensorSpec",
    "decode",
    "encode",
    "endpoint_name_at",
    "from_bfloat16",
    "to_bfloat16",
}


def test_public_names_are_pinned() -> None:
    assert set(deploy.client.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(deploy.client, name) is not None


def test_every_error_is_a_client_error() -> None:
    errors = [name for name in PUBLIC if name.endswith("Error") and name != "ClientError"]
    for name in errors:
        assert issubclass(getattr(deploy.client, name), deploy.client.ClientError), name


def test_infer_signatures_match_between_sync_and_async() -> None:
    import inspect

    for method in ("infer", "submit"):
        sync = inspect.signature(getattr(deploy.client.Endpoint, method))
        async_ = inspect.signature(getattr(deploy.client.AsyncEndpoint, method))
        assert list(sync.parameters) == list(async_.parameters), method


def test_import_pulls_in_no_cli_or_heavy_modules() -> None:
    code = (
        "import sys, deploy.client; "
        "bad = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'typer', 'rich', 'torch', 'tritonclient', 'aws_cdk', 'pydantic', 'boto3', 'aiohttp'}); "
        "other = sorted(m for m in sys.modules if m.startswith('deploy.') "
        "and not m.startswith('deploy.client')); "
        "print(bad, other)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"
