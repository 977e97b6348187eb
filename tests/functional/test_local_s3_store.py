"""A model store under s3:// (the moto server), read through AWS_ENDPOINT_URL."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import numpy as np
import pytest

from deploy.local.modes.endpoint import LocalEndpoint
from tests.functional.local_models import addsub_files, invoke, runtime_client, write_archive

pytestmark = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]

A = np.arange(4, dtype=np.float32).reshape(1, 4)


def test_s3_store_loads_lazily_and_checks_the_manifest_sha(
    moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="local-store")
    good = write_archive(tmp_path / "good.tar.gz", addsub_files("good"))
    write_archive(tmp_path / "tampered.tar.gz", addsub_files("tampered"))
    for name in ("good.tar.gz", "tampered.tar.gz"):
        s3.upload_file(str(tmp_path / name), "local-store", f"models/{name}")
    manifest = {
        "format": 1,
        "models": {
            "good": {"name": "good", "target_model": "good.tar.gz", "sha256": good},
            "tampered": {"name": "tampered", "target_model": "tampered.tar.gz", "sha256": "0" * 64},
        },
    }
    s3.put_object(
        Bucket="local-store", Key="models/manifest.json", Body=json.dumps(manifest).encode()
    )

    with LocalEndpoint("s3://local-store/models/", work_dir=tmp_path / "work") as endpoint:
        runtime = runtime_client(endpoint.url)
        _, outputs = invoke(runtime, "local", "good.tar.gz", {"INPUT0": A, "INPUT1": A})
        np.testing.assert_array_equal(outputs["OUTPUT0"], A + A)
        with pytest.raises(runtime.exceptions.ValidationError, match="does not match the manifest"):
            invoke(runtime, "local", "tampered.tar.gz", {"INPUT0": A, "INPUT1": A})
        with pytest.raises(runtime.exceptions.ValidationError, match="cannot download"):
            invoke(runtime, "local", "absent.tar.gz", {"INPUT0": A, "INPUT1": A})
        listing = endpoint.listing()
        assert [m["target_model"] for m in listing["loaded"]] == ["good.tar.gz"]
        assert listing["available"] == ["good.tar.gz", "tampered.tar.gz"]
        # Downloads do not pile up: the archive is removed once extracted.
        assert not list((tmp_path / "work" / "models" / ".downloads").glob("*"))
