"""The model store's manifest.json, as far as a client needs it.

`deploy package` writes it next to the archives (see docs/architecture.md);
the SDK reads it with `json` alone so that it does not depend on the
packaging code. A manifest maps logical model names to the TargetModel to
send and to the tensors the model declares (used to validate inputs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.client._dtypes import DATATYPES
from deploy.client._errors import ManifestError

MULTI_MODEL = "multi-model"
SINGLE_MODEL = "single-model"
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A declared tensor; `shape` excludes the batch dimension, -1 means any size.

    `optional` inputs (`optional: true` in config.pbtxt) may be left out of a request.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    optional: bool = False


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the manifest says about one model."""

    name: str
    target_model: str
    max_batch_size: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    kind: str = "model"

    def input(self, name: str) -> TensorSpec | None:
        return next((spec for spec in self.inputs if spec.name == name), None)


@dataclass(frozen=True, slots=True)
class Manifest:
    """Logical model names → `ModelInfo`, plus how the endpoint hosts them."""

    hosting: str
    models: Mapping[str, ModelInfo]
    source: str

    def find(self, name: str) -> ModelInfo | None:
        """A model by logical name, or by its current TargetModel."""
        info = self.models.get(name)
        if info is not None:
            return info
        return next((item for item in self.models.values() if item.target_model == name), None)

    @classmethod
    def parse(cls, document: Any, source: str) -> Manifest:
        """Build from the decoded JSON; `source` names the file in errors."""
        if not isinstance(document, dict):
            raise ManifestError("is not a JSON object", where=source)
        if document.get("format") != 1:
            raise ManifestError(
                f"has format {document.get('format')!r}; this SDK reads format 1",
                where=source,
                fix="upgrade deploy, or re-run `deploy package` with this version",
            )
        hosting = document.get("hosting", MULTI_MODEL)
        if hosting not in (MULTI_MODEL, SINGLE_MODEL):
            raise ManifestError(f"has unknown hosting {hosting!r}", where=source)
        models = document.get("models")
        if not isinstance(models, dict):
            raise ManifestError("has no 'models' object", where=source)
        parsed = {
            str(name): _model(str(name), entry, f"{source}: models.{name}")
            for name, entry in models.items()
        }
        return cls(hosting, parsed, source)

    @classmethod
    def from_bytes(cls, raw: bytes, source: str) -> Manifest:
        try:
            document = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ManifestError(f"is not valid JSON: {exc}", where=source) from exc
        return cls.parse(document, source)

    @classmethod
    def from_path(cls, path: str | Path) -> Manifest:
        """Read a local manifest file (or the manifest.json inside a directory)."""
        path = Path(path)
        if path.is_dir():
            path = path / MANIFEST_NAME
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ManifestError(
                f"cannot be read: {exc.strerror or exc}",
                where=str(path),
                fix="run `deploy package` first, or pass the right manifest path",
            ) from exc
        return cls.from_bytes(raw, str(path))


def split_s3_url(url: str) -> tuple[str, str]:
    """`s3://bucket/key` → (bucket, key)."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        raise ManifestError(f"{url!r} is not an s3://bucket/key URL")
    return bucket, key


def manifest_url_for(model_data_url: str) -> str:
    """The manifest next to a multi-model endpoint's ModelDataUrl prefix, or next to
    a single-model endpoint's archive (`.../model.tar.gz`, the inf1 layout)."""
    if model_data_url.endswith(".tar.gz"):
        model_data_url = model_data_url.rsplit("/", 1)[0]
    prefix = model_data_url if model_data_url.endswith("/") else model_data_url + "/"
    if not prefix.startswith("s3://"):
        raise ManifestError(f"model data URL {model_data_url!r} is not on S3")
    return prefix + MANIFEST_NAME


def _model(name: str, entry: Any, where: str) -> ModelInfo:
    if not isinstance(entry, dict):
        raise ManifestError("is not an object", where=where)
    target = entry.get("target_model")
    if not isinstance(target, str) or not target:
        raise ManifestError("has no target_model", where=where)
    batch = entry.get("max_batch_size", 0)
    if type(batch) is not int or batch < 0:
        raise ManifestError(f"has invalid max_batch_size {batch!r}", where=where)
    return ModelInfo(
        name=name,
        target_model=target,
        max_batch_size=batch,
        inputs=_tensors(entry.get("inputs", []), f"{where}.inputs"),
        outputs=_tensors(entry.get("outputs", []), f"{where}.outputs"),
        kind=str(entry.get("kind", "model")),
    )


def _tensors(entries: Any, where: str) -> tuple[TensorSpec, ...]:
    if not isinstance(entries, list):
        raise ManifestError("is not a list", where=where)
    specs = []
    for index, entry in enumerate(entries):
        here = f"{where}[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ManifestError("has no name", where=here)
        datatype = entry.get("datatype")
        if datatype not in DATATYPES:
            raise ManifestError(f"has unknown datatype {datatype!r}", where=here)
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(type(d) is int and d >= -1 for d in shape):
            raise ManifestError(f"has invalid shape {shape!r}", where=here)
        optional = entry.get("optional", False)  # absent in older manifests
        if type(optional) is not bool:
            raise ManifestError(f"has invalid optional {optional!r}", where=here)
        specs.append(TensorSpec(entry["name"], datatype, tuple(shape), optional))
    return tuple(specs)
