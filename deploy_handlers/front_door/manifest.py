"""The model store's manifest.json, read with boto3 and cached per Lambda instance.

It is parsed by `manifest_format.py`, a byte-for-byte copy of the project's one
manifest module (`deploy/client/manifest.py`; a test compares the two), since
the Lambda bundle holds `deploy_handlers/` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .manifest_format import Manifest, ManifestFormatError, ModelInfo, loads


class ManifestError(Exception):
    """The manifest could not be read (HTTP 503: the store is not ready)."""


class ManifestCache:
    """Fetches `s3://bucket/key` at most once per `ttl_s` (re-reads on an unknown model)."""

    def __init__(
        self,
        s3: Any,
        bucket: str,
        key: str,
        *,
        ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._s3, self._bucket, self._key = s3, bucket, key
        self._ttl_s, self._clock = ttl_s, clock
        self._manifest: Manifest | None = None
        self._fetched_at = 0.0

    def model(self, name: str) -> ModelInfo | None:
        found = self.lookup(name)
        return found[1] if found is not None else None

    def lookup(self, name: str) -> tuple[Manifest, ModelInfo] | None:
        """The manifest naming model `name`, and its entry (None: no such model)."""
        manifest = self._load(force=False)
        if name not in manifest.models and self._clock() - self._fetched_at > 1.0:
            # A model published since the last read: look once more, not on every miss.
            manifest = self._load(force=True)
        entry = manifest.models.get(name)
        return (manifest, entry) if entry is not None else None

    def _load(self, *, force: bool) -> Manifest:
        now = self._clock()
        if self._manifest is not None and not force and now - self._fetched_at < self._ttl_s:
            return self._manifest
        where = f"s3://{self._bucket}/{self._key}"
        try:
            raw = self._s3.get_object(Bucket=self._bucket, Key=self._key)["Body"].read()
        except Exception as exc:  # botocore errors and transport errors alike
            raise ManifestError(f"cannot read {where}: {exc}") from exc
        try:
            manifest = loads(raw, where)
        except ManifestFormatError as exc:
            raise ManifestError(str(exc)) from exc
        self._manifest, self._fetched_at = manifest, now
        return manifest
