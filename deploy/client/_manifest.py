"""The manifest as the SDK reads it: `deploy.client.manifest`, with the SDK's errors.

The contract (fields, hosting values, how each hosting addresses a model) is
defined once in `deploy.client.manifest`; this module gives the SDK's public
`Manifest` the same data and raises `ManifestError` (a `ClientError`) where
the contract module raises `ManifestFormatError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

from deploy.client import manifest as _format
from deploy.client._errors import ManifestError
from deploy.client.manifest import (
    ASYNC,
    MANIFEST_NAME,
    MULTI_MODEL,
    ROUTER,
    SINGLE_MODEL,
    AsyncLane,
    AsyncLocations,
    ModelInfo,
    TensorSpec,
)

__all__ = [
    "ASYNC",
    "MANIFEST_NAME",
    "MULTI_MODEL",
    "ROUTER",
    "SINGLE_MODEL",
    "AsyncLane",
    "AsyncLocations",
    "Manifest",
    "ModelInfo",
    "TensorSpec",
    "check_size",
    "manifest_url_for",
    "split_s3_url",
]


@contextlib.contextmanager
def _as_client_error() -> Iterator[None]:
    try:
        yield
    except _format.ManifestFormatError as exc:
        raise ManifestError(exc.message, where=exc.where, fix=exc.fix) from exc


class Manifest(_format.Manifest):
    """Logical model names → `ModelInfo`, plus how the endpoint hosts them."""

    __slots__ = ()

    @classmethod
    def _of(cls, parsed: _format.Manifest) -> Manifest:
        return cls(**{item.name: getattr(parsed, item.name) for item in fields(parsed)})

    @classmethod
    def parse(cls, document: Any, source: str) -> Manifest:
        """Build from the decoded JSON; `source` names the file in errors."""
        with _as_client_error():
            return cls._of(_format.parse(document, source))

    @classmethod
    def from_bytes(cls, raw: bytes, source: str) -> Manifest:
        with _as_client_error():
            return cls._of(_format.loads(raw, source))

    @classmethod
    def from_path(cls, path: str | Path) -> Manifest:
        """Read a local manifest file (or the manifest.json inside a directory)."""
        with _as_client_error():
            return cls._of(_format.read(path))


def check_size(size: int, source: str, *, at_least: bool = False) -> None:
    """Refuse a manifest of `size` bytes over the contract's limit (before reading it)."""
    with _as_client_error():
        _format.check_size(size, source, at_least=at_least)


def split_s3_url(url: str) -> tuple[str, str]:
    """`s3://bucket/key` → (bucket, key)."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        raise ManifestError(f"{url!r} is not an s3://bucket/key URL")
    return bucket, key


def manifest_url_for(model_data_url: str) -> str:
    """The manifest next to a multi-model endpoint's ModelDataUrl prefix, or next to
    a single-model endpoint's archive (`.../model.tar.gz`)."""
    with _as_client_error():
        return _format.manifest_url_for(model_data_url)
