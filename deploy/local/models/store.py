"""Model stores: where the platform fetches a TargetModel's archive from.

A store is the folder `deploy package` writes (archives + `manifest.json`),
either on disk or under an `s3://bucket/prefix/`. S3 is read with boto3,
which honours `AWS_ENDPOINT_URL` (a moto server in tests).
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

from deploy.client import manifest as contract
from deploy.errors import LocalEndpointError
from deploy.hosting.limits import MAX_TARGET_MODEL
from deploy.repository.names import TARGET_MODEL_CHARACTERS, target_model_problem

MANIFEST = contract.MANIFEST_NAME


class ModelNotInStoreError(LocalEndpointError):
    """The TargetModel names no archive in the store."""


class Store(Protocol):
    location: str

    def manifest(self) -> contract.Manifest | None:
        """The parsed manifest.json, or None when the store has none."""

    def fetch(self, target_model: str, cache: Path) -> Path:
        """A local path of the archive (downloaded under `cache` if remote)."""


def check_target_model(target_model: str) -> str:
    """A TargetModel is a relative path inside the store, in characters that serve."""
    normal = posixpath.normpath(target_model)
    if (
        not target_model
        or target_model.startswith("/")
        or normal.startswith("..")
        or normal != target_model
        or "\\" in target_model
        or len(target_model) > MAX_TARGET_MODEL
    ):
        raise LocalEndpointError(
            f"TargetModel {target_model!r} is not a relative path inside the model store",
            where="X-Amzn-SageMaker-Target-Model",
            fix="send the target_model that manifest.json lists",
        )
    problem = target_model_problem(target_model)
    if problem is not None:
        raise LocalEndpointError(
            problem,
            where="X-Amzn-SageMaker-Target-Model",
            fix=f"name archives and models with {TARGET_MODEL_CHARACTERS} "
            "(`deploy validate` checks model names)",
        )
    return target_model


def _parse_manifest(text: str, where: str) -> contract.Manifest:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LocalEndpointError(
            f"manifest is not JSON: {exc}", where=where, fix="re-run `deploy package`"
        ) from exc
    try:
        return contract.parse(document, where)  # the one check of the contract
    except contract.ManifestFormatError as exc:
        raise LocalEndpointError(
            f"manifest breaks the contract: {exc.message}",
            where=exc.where or where,
            fix="re-run `deploy package`",
        ) from exc


class DirectoryStore:
    """Archives in a local folder."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise LocalEndpointError(
                "model store folder does not exist",
                where=str(root),
                fix="run `deploy package REPO --out DIR` and pass DIR",
            )
        self.root = root.resolve()
        self.location = str(self.root)

    def manifest(self) -> contract.Manifest | None:
        path = self.root / MANIFEST
        if not path.is_file():
            return None
        return _parse_manifest(path.read_text(encoding="utf-8"), str(path))

    def fetch(self, target_model: str, cache: Path) -> Path:
        path = self.root / check_target_model(target_model)
        try:
            found = path.is_file()
        except OSError:  # e.g. a name longer than the file system allows: not stored here
            found = False
        if not found:
            raise ModelNotInStoreError(
                f"no archive {target_model!r} in the model store {self.location}",
                where=f"TargetModel {target_model}",
                fix="send a target_model listed in manifest.json (`deploy status --local`)",
            )
        return path


class S3Store:
    """Archives under `s3://bucket/prefix/`, downloaded on first use."""

    def __init__(self, url: str, client: Any | None = None) -> None:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise LocalEndpointError(
                "S3 store URL has no bucket", where=url, fix="use s3://BUCKET/PREFIX/"
            )
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.location = f"s3://{bucket}/{self.prefix}"
        if client is None:
            import boto3

            with _s3_call("opening an S3 client", self.location):
                client = boto3.client("s3")
        self._client = client

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def manifest(self) -> contract.Manifest | None:
        from deploy.aws.session import AwsCallError

        key = self._key(MANIFEST)
        try:
            with _s3_call("s3:GetObject", f"s3://{self.bucket}/{key}"):
                body = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except AwsCallError as exc:
            if exc.code in {"NoSuchKey", "404"}:
                return None
            raise LocalEndpointError(
                f"cannot read the manifest: {exc.message}",
                where=f"s3://{self.bucket}/{key}",
                fix=exc.fix or "check the bucket, the credentials and AWS_ENDPOINT_URL",
            ) from exc
        return _parse_manifest(body.decode("utf-8"), f"s3://{self.bucket}/{key}")

    def fetch(self, target_model: str, cache: Path) -> Path:
        from deploy.aws.session import AwsCallError

        key = self._key(check_target_model(target_model))
        cache.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=cache, suffix=".partial")
        os.close(handle)
        try:
            with (
                Path(partial).open("wb") as out,
                _s3_call("s3:GetObject", f"s3://{self.bucket}/{key}"),
            ):
                body = self._client.get_object(Bucket=self.bucket, Key=key)["Body"]
                shutil.copyfileobj(body, out, 1 << 20)
        except AwsCallError as exc:
            Path(partial).unlink(missing_ok=True)
            missing = exc.code in {"NoSuchKey", "404"}
            error = ModelNotInStoreError if missing else LocalEndpointError
            raise error(
                f"cannot download s3://{self.bucket}/{key}: {exc.message}",
                where=f"TargetModel {target_model}",
                fix="send a target_model listed in the store's manifest.json"
                if missing
                else exc.fix,
            ) from exc
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
        return Path(partial)


def _s3_call(action: str, where: str) -> Any:
    """botocore's failures as the AWS boundary maps them (`AwsCallError`)."""
    from deploy.aws.session import aws_call

    return aws_call(action, where=where)


def open_store(location: str | Path) -> DirectoryStore | S3Store:
    text = str(location)
    if text.startswith("s3://"):
        return S3Store(text)
    return DirectoryStore(Path(text))
