"""The model store's manifest.json, read with boto3 and cached per Lambda instance."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any


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
        self._models: dict[str, dict[str, Any]] | None = None
        self._fetched_at = 0.0

    def model(self, name: str) -> dict[str, Any] | None:
        models = self._load(force=False)
        if name not in models and self._clock() - self._fetched_at > 1.0:
            # A model published since the last read: look once more, not on every miss.
            models = self._load(force=True)
        return models.get(name)

    def _load(self, *, force: bool) -> dict[str, dict[str, Any]]:
        now = self._clock()
        if self._models is not None and not force and now - self._fetched_at < self._ttl_s:
            return self._models
        try:
            obj = self._s3.get_object(Bucket=self._bucket, Key=self._key)
            document = json.loads(obj["Body"].read())
        except Exception as exc:  # botocore errors and malformed JSON alike
            raise ManifestError(f"cannot read s3://{self._bucket}/{self._key}: {exc}") from exc
        models = document.get("models") if isinstance(document, dict) else None
        if not isinstance(models, dict):
            raise ManifestError(f"s3://{self._bucket}/{self._key} has no 'models' table")
        self._models, self._fetched_at = models, now
        return models
