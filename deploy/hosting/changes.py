"""What a plan says changes in the model store: per model, and the one archive of a
router layout. Plain data, computed by a hosting mode's layout and shown by the plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# "unknown": planned without the published manifest (no AWS credentials).
ModelAction = Literal["new", "changed", "unchanged", "removed", "unknown"]


@dataclass(frozen=True)
class ModelChange:
    name: str
    action: ModelAction
    target_model: str
    previous_target_model: str | None
    bytes: int
    sha256: str
    upload: bool  # the store lacks these bytes under target_model

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "target_model": self.target_model,
            "previous_target_model": self.previous_target_model,
            "bytes": self.bytes,
            "sha256": self.sha256,
            "upload": self.upload,
        }


@dataclass(frozen=True)
class ArchiveChange:
    """The one archive of a router layout (single-model, async, serverless endpoints).

    `key` is relative to the model-store prefix and derived from the archive's
    content (`<folder>model-<first 16 hex of sha256>.tar.gz`), so new bytes give
    a new key, hence a new SageMaker Model.
    """

    key: str
    previous_key: str | None  # what the published manifest names (None: nothing)
    sha256: str
    bytes: int
    upload: bool  # the store lacks these bytes under key

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "previous_key": self.previous_key,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "upload": self.upload,
        }
