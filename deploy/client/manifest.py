"""The model store's manifest.json: the one definition of its contract.

Packaging writes it, the local endpoint serves it, `deploy up` diffs and
publishes it, the SDK resolves model names with it and the Lambda front door
maps URLs with it. All of them parse and write it here. This module imports
the standard library only: the SDK depends on nothing else of the project,
and the Lambda bundle (deploy_handlers/) carries a byte-for-byte copy of this file
(deploy_handlers/front_door/manifest_format.py; a test compares the two).

    {"format": 1, "hosting": "multi-model" | "single-model" | "async" | "serverless",
     "router": "router",                        (router layouts)
     "models": {NAME: {"name", "target_model", "max_batch_size", "inputs", "outputs",
                       "kind", "sha256", "bytes", "source_digest", "backend",
                       "platform", "contains",
                       "inference_component",    (1.2 on, hosting components: the
                                                  model's InferenceComponentName)
                       "canary": {"target_model", "percent", "sha256", "bytes",
                                  "source_digest"},
                                                 (1.2 on: a second version taking
                                                  `percent` of the calls; see `split`)
                       ...}},
     "archive": {"key", "sha256", "bytes"},     (router layouts: the one archive)
     "async_inference": {"input_prefix", "output_prefix", "failure_prefix"},
                                                (async: s3:// URLs ending in "/"; the
                                                 published manifest has them, a package
                                                 before `deploy up` binds it to a stage not)
     "async_lane": {"endpoint_name", "input_prefix", "output_prefix", "failure_prefix",
                    "archive"},
                                                (a real-time endpoint's asynchronous
                                                 partner for requests over 6 MB; `archive`:
                                                 its router archive's key, for `deploy up`)
     "format_minor": 2,                         (1.1 on: see Versions)
     "invoke": {"addressing", "max_request_bytes"},
                                                (1.1 on: how a client calls the endpoint)
     ...}                                       (keys a reader does not know: kept as they are)

`target_model` is what a client names the model with: the TargetModel of a
multi-model endpoint (the archive's key), or the request parameter
`target_model` that the router of a single-model endpoint reads. Which of
the two a hosting uses, and the largest request body it takes, the manifest
publishes in `invoke` (`addressing`: `TARGET_MODEL_HEADER`, `ROUTER`, or
`INFERENCE_COMPONENT_HEADER`: each model's `inference_component` in the
InferenceComponentName header, no TargetModel; `max_request_bytes`). A manifest without it
(format 1.0) gets them from `ADDRESSING[hosting]` and `MAX_REQUEST_BYTES[hosting]`.
An async lane is an endpoint of hosting async: it takes `MAX_REQUEST_BYTES[ASYNC]`.

Versions. The version is `format` (the major, an integer) and `format_minor`
(absent: 0), written 1.2 today (1.1: `invoke`; 1.2: a model's
`inference_component` and `canary`). SDKs already in users' applications read the
manifests that a newer `deploy` publishes, and the reverse, by one rule:
- A minor only adds: new optional keys or sections, appended after the keys
  an older reader knows. It never changes what a key already means.
- A reader accepts every minor of its own major. It keeps the keys it does
  not know (`extra`) and writes them back unchanged and in place, so a
  manifest an older version re-writes keeps a newer one's additions (the
  1.0 reader did so everywhere but inside `async_lane`).
- A value a reader would have to act on and cannot (a hosting or addressing
  it does not know) is refused with an error naming it, rather than guessed.
  A hosting it does not know is read when `invoke` names an addressing it does.
- Anything else is a new major. A reader refuses another major with an error
  naming both versions and the fix: upgrade deploy (the SDK) where the major
  is newer, re-package with this version where it is older.
Writers write the newest minor; a manifest read and written again (`dump`)
keeps its own version and bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1  # the major: readers refuse any other
MANIFEST_MINOR = 2  # the newest minor, which writers write; readers accept any
# The largest manifest any reader accepts. A model's entry is about 1 KB, so this
# holds thousands of models; readers check it before reading (a file's size, an
# object's or a response's length) so that a manifest from someone else cannot
# fill memory.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024

MULTI_MODEL = "multi-model"
SINGLE_MODEL = "single-model"
ASYNC = "async"
SERVERLESS = "serverless"
COMPONENTS = "components"
HOSTINGS = (MULTI_MODEL, SINGLE_MODEL, ASYNC, SERVERLESS, COMPONENTS)

# How a request names its model: SageMaker's TargetModel (multi-model endpoints), or
# the request parameter ROUTER_PARAMETER read by the router model of the one-archive
# layout (single-model endpoints, asynchronous and serverless ones alike).
TARGET_MODEL_HEADER = "target-model-header"
ROUTER = "router-parameter"
ROUTER_PARAMETER = "target_model"
# An inference component's name in the X-Amzn-SageMaker-Inference-Component header
# (InferenceComponentName): the model's `inference_component`, and no TargetModel.
INFERENCE_COMPONENT_HEADER = "inference-component-header"
ADDRESSINGS = frozenset({TARGET_MODEL_HEADER, ROUTER, INFERENCE_COMPONENT_HEADER})
ADDRESSING: Mapping[str, str] = {
    MULTI_MODEL: TARGET_MODEL_HEADER,
    SINGLE_MODEL: ROUTER,
    ASYNC: ROUTER,
    SERVERLESS: ROUTER,
    COMPONENTS: INFERENCE_COMPONENT_HEADER,
}

# The largest request body each hosting's endpoint takes: InvokeEndpoint 6 MB
# (real-time), 4 MB (serverless); InvokeEndpointAsync 1 GB (the body goes through S3).
MIB = 1024 * 1024
REALTIME_MAX_REQUEST = 6 * MIB
SERVERLESS_MAX_REQUEST = 4 * MIB
ASYNC_MAX_REQUEST = 1024 * MIB
MAX_REQUEST_BYTES: Mapping[str, int] = {
    MULTI_MODEL: REALTIME_MAX_REQUEST,
    SINGLE_MODEL: REALTIME_MAX_REQUEST,
    ASYNC: ASYNC_MAX_REQUEST,
    SERVERLESS: SERVERLESS_MAX_REQUEST,
    COMPONENTS: REALTIME_MAX_REQUEST,
}

# The KServe v2 datatype names a tensor may declare.
DATATYPES = frozenset(
    {
        "BOOL",
        "INT8",
        "INT16",
        "INT32",
        "INT64",
        "UINT8",
        "UINT16",
        "UINT32",
        "UINT64",
        "FP16",
        "FP32",
        "FP64",
        "BF16",
        "BYTES",
    }
)
KINDS = frozenset({"model", "ensemble", "bls"})
_UPGRADE = (
    "a newer deploy wrote it: upgrade deploy where it is read "
    "(pip install -U triton-sagemaker-deploy)"
)

_MODEL_KEYS = (
    "name",
    "target_model",
    "sha256",
    "bytes",
    "source_digest",
    "kind",
    "backend",
    "platform",
    "max_batch_size",
    "inputs",
    "outputs",
    "contains",
    "inference_component",
    "canary",
)
_CANARY_KEYS = ("target_model", "percent", "sha256", "bytes", "source_digest")

# A caller-chosen key (a session or user id) that keeps a caller on one version
# while a model has a canary: the SDK's `sticky_key=` and the front door's header.
# `Inference-Id` changes with every request, so it cannot be the key.
STICKY_KEY_HEADER = "X-Deploy-Sticky-Key"


class ManifestFormatError(ValueError):
    """A manifest that breaks the contract; `where` names the file and field."""

    def __init__(self, message: str, *, where: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.fix = fix

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text} ({self.fix})" if self.fix else text


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A declared tensor; `shape` excludes the batch dimension, -1 means any size.

    `optional` inputs (`optional: true` in config.pbtxt) may be left out of a request;
    `optional` outputs (those of a model with optional inputs) may be missing from a response.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    optional: bool = False

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.name,
            "datatype": self.datatype,
            "shape": list(self.shape),
        }
        if self.optional:  # written only when true: older manifests stay as they were
            document["optional"] = True
        return document


@dataclass(frozen=True, slots=True)
class Canary:
    """A second version of a model (its own TargetModel) that takes `percent` of
    the calls the SDK and the front door split (`split`); format 1.2 on. A reader
    older than 1.2 keeps it as an extra and sends every call to the model's
    `target_model`: the version that was live before the canary."""

    target_model: str
    percent: float  # 0 < percent < 100
    sha256: str | None = None
    bytes: int | None = None
    source_digest: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_document(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "target_model": self.target_model,
            "percent": self.percent,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "source_digest": self.source_digest,
        }
        return {key: value for key, value in values.items() if value is not None} | dict(self.extra)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the manifest says about one model.

    `sha256` and `bytes` describe the model's own archive (multi-model), or its
    share of the one archive (router layouts: `bytes` only); None when absent.
    """

    name: str
    target_model: str
    max_batch_size: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    kind: str = "model"
    sha256: str | None = None
    bytes: int | None = None
    source_digest: str | None = None
    backend: str | None = None
    platform: str | None = None
    contains: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    inference_component: str | None = None  # 1.2 on, hosting components
    canary: Canary | None = None  # 1.2 on

    def input(self, name: str) -> TensorSpec | None:
        return next((spec for spec in self.inputs if spec.name == name), None)

    def to_document(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "name": self.name,
            "target_model": self.target_model,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "source_digest": self.source_digest,
            "kind": self.kind,
            "backend": self.backend,
            "platform": self.platform,
            "max_batch_size": self.max_batch_size,
            "inputs": [spec.to_document() for spec in self.inputs],
            "outputs": [spec.to_document() for spec in self.outputs],
            "contains": list(self.contains),
            # 1.2 on, written only when set: other manifests keep their bytes.
            "inference_component": self.inference_component,
            "canary": None if self.canary is None else self.canary.to_document(),
        }
        return {key: value for key, value in values.items() if value is not None} | dict(self.extra)


@dataclass(frozen=True, slots=True)
class ArchiveRef:
    """The one archive of a router layout: its key next to the manifest, digest, size."""

    key: str
    sha256: str
    bytes: int

    def to_document(self) -> dict[str, Any]:
        return {"key": self.key, "sha256": self.sha256, "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class AsyncLocations:
    """Where an asynchronous endpoint's requests, answers and errors live (s3:// URLs)."""

    input_prefix: str
    output_prefix: str
    failure_prefix: str

    def to_document(self) -> dict[str, Any]:
        return {
            "input_prefix": self.input_prefix,
            "output_prefix": self.output_prefix,
            "failure_prefix": self.failure_prefix,
        }


@dataclass(frozen=True, slots=True)
class AsyncLane:
    """The asynchronous endpoint paired with a real-time one for large requests."""

    endpoint_name: str
    locations: AsyncLocations
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def request_limit(self) -> int:
        """The largest request body the lane takes: an async endpoint's."""
        return MAX_REQUEST_BYTES[ASYNC]

    def to_document(self) -> dict[str, Any]:
        document = {"endpoint_name": self.endpoint_name, **self.locations.to_document()}
        return document | dict(self.extra)


@dataclass(frozen=True, slots=True)
class Invoke:
    """How a client calls the endpoint (format 1.1 on): how a request names its
    model (`addressing`) and the largest request body it takes."""

    addressing: str
    max_request_bytes: int
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, hosting: str) -> Invoke:
        """What a hosting mode of this version publishes."""
        return cls(ADDRESSING[hosting], MAX_REQUEST_BYTES[hosting])

    def to_document(self) -> dict[str, Any]:
        document = {"addressing": self.addressing, "max_request_bytes": self.max_request_bytes}
        return document | dict(self.extra)


@dataclass(frozen=True, slots=True)
class Manifest:
    """Logical model names → `ModelInfo`, plus how the endpoint hosts them.

    `async_inference` is set for hosting async; `async_lane` when a real-time
    endpoint is paired with an asynchronous one for requests over 6 MB.
    `format_minor` is the minor read (0 when built here, until `written` sets
    `MANIFEST_MINOR`); `invoke` is None in a format 1.0 manifest. Change one
    with `replace` or the `with_*` functions below, which return a new manifest.
    """

    hosting: str
    models: Mapping[str, ModelInfo]
    source: str = "manifest"
    router: str | None = None
    archive: ArchiveRef | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    async_inference: AsyncLocations | None = None
    async_lane: AsyncLane | None = None
    format_minor: int = 0
    invoke: Invoke | None = None

    @property
    def version(self) -> str:
        """`major.minor`, as errors name it."""
        return f"{MANIFEST_FORMAT}.{self.format_minor}"

    @property
    def addressing(self) -> str:
        """`TARGET_MODEL_HEADER`, `ROUTER` or `INFERENCE_COMPONENT_HEADER`: how a
        request names its model (as published, else as this version's hosting table says)."""
        return self.invoke.addressing if self.invoke is not None else ADDRESSING[self.hosting]

    @property
    def max_request_bytes(self) -> int:
        """The largest request body the endpoint takes (as published, else as this
        version's table says for the hosting)."""
        if self.invoke is not None:
            return self.invoke.max_request_bytes
        return MAX_REQUEST_BYTES[self.hosting]

    def find(self, name: str) -> ModelInfo | None:
        """A model by logical name, or by its current TargetModel or inference component."""
        info = self.models.get(name)
        if info is not None:
            return info
        return next(
            (
                item
                for item in self.models.values()
                if name in (item.target_model, item.inference_component)
            ),
            None,
        )

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {"format": MANIFEST_FORMAT, "hosting": self.hosting}
        if self.router is not None:
            document["router"] = self.router
        document["models"] = {name: info.to_document() for name, info in self.models.items()}
        if self.archive is not None:
            document["archive"] = self.archive.to_document()
        if self.async_inference is not None:
            document["async_inference"] = self.async_inference.to_document()
        if self.async_lane is not None:
            document["async_lane"] = self.async_lane.to_document()
        # 1.1 on, after what a 1.0 reader knows (it keeps these as extras, at the end).
        if self.format_minor:
            document["format_minor"] = self.format_minor
        if self.invoke is not None:
            document["invoke"] = self.invoke.to_document()
        return document | dict(self.extra)

    @classmethod
    def parse(cls, document: Any, source: str) -> Manifest:
        return parse(document, source)

    @classmethod
    def from_bytes(cls, raw: bytes, source: str) -> Manifest:
        return loads(raw, source)

    @classmethod
    def from_path(cls, path: str | Path) -> Manifest:
        return read(path)


def written(manifest: Manifest) -> Manifest:
    """`manifest` as this version writes it: the newest minor, with `invoke`."""
    return replace(manifest, format_minor=MANIFEST_MINOR, invoke=Invoke.of(manifest.hosting))


def with_async_inference(manifest: Manifest, locations: AsyncLocations) -> Manifest:
    """An asynchronous endpoint's manifest: hosting async, its S3 prefixes."""
    invoke = Invoke.of(ASYNC) if manifest.invoke is not None else None
    return replace(manifest, hosting=ASYNC, async_inference=locations, invoke=invoke)


def with_archive_key(manifest: Manifest, key: str) -> Manifest:
    """A router layout's manifest whose archive is stored under `key` (as published)."""
    if manifest.archive is None:
        raise ManifestFormatError("names no archive", where=manifest.source)
    return replace(manifest, archive=replace(manifest.archive, key=key))


def with_lane_archive(manifest: Manifest, key: str) -> Manifest:
    """A manifest whose async lane names its router archive's `key` (for `deploy up`)."""
    lane = manifest.async_lane
    if lane is None:
        return manifest
    return replace(manifest, async_lane=replace(lane, extra={**lane.extra, "archive": key}))


def parse(document: Any, source: str) -> Manifest:
    """A decoded manifest, checked; `source` names the file in errors."""
    if not isinstance(document, dict):
        raise ManifestFormatError("is not a JSON object", where=source)
    minor = _version(document, source)
    invoke = None
    if document.get("invoke") is not None:
        invoke = _invoke(document["invoke"], f"{source}: invoke")
    hosting = document.get("hosting", MULTI_MODEL)
    if not isinstance(hosting, str) or (hosting not in HOSTINGS and invoke is None):
        raise ManifestFormatError(
            f"has unknown hosting {hosting!r} (known: {', '.join(HOSTINGS)})",
            where=source,
            fix=_UPGRADE,
        )
    models = document.get("models")
    if not isinstance(models, dict):
        raise ManifestFormatError("has no 'models' object", where=source)
    parsed = {
        str(name): _model(str(name), entry, f"{source}: models.{name}")
        for name, entry in models.items()
    }
    router = document.get("router")
    if router is not None and (not isinstance(router, str) or not router):
        raise ManifestFormatError(f"has invalid router {router!r}", where=source)
    archive = _archive(document.get("archive"), f"{source}: archive")
    locations = None
    if document.get("async_inference") is not None:
        locations = _locations(document["async_inference"], f"{source}: async_inference")
    lane = None
    if document.get("async_lane") is not None:
        lane = _lane(document["async_lane"], f"{source}: async_lane")
    known = {
        "format",
        "hosting",
        "router",
        "models",
        "archive",
        "async_inference",
        "async_lane",
        "format_minor",
        "invoke",
    }
    extra = {key: value for key, value in document.items() if key not in known}
    return Manifest(hosting, parsed, source, router, archive, extra, locations, lane, minor, invoke)


def _version(document: Mapping[str, Any], source: str) -> int:
    """The minor of a manifest of this major (see Versions in the module docstring)."""
    major, minor = document.get("format"), document.get("format_minor", 0)
    if type(minor) is not int or minor < 0:
        raise ManifestFormatError(f"has invalid format_minor {minor!r}", where=source)
    if major == MANIFEST_FORMAT and type(major) is int:
        return minor
    if type(major) is not int:
        raise ManifestFormatError(
            f"has format {major!r}, not a major version number; this version reads "
            f"format {MANIFEST_FORMAT}.x",
            where=source,
            fix="this is not a manifest `deploy package` wrote: check where it comes from",
        )
    if major > MANIFEST_FORMAT:
        fix = f"{_UPGRADE}, or publish it with the deploy version of the SDK that reads it"
    else:
        fix = "an older deploy wrote it: re-run `deploy package` (or `deploy up`) with this version"
    raise ManifestFormatError(
        f"has format {major}.{minor}; this version reads format {MANIFEST_FORMAT}.x "
        f"(written {MANIFEST_FORMAT}.{MANIFEST_MINOR})",
        where=source,
        fix=fix,
    )


def _invoke(entry: Any, where: str) -> Invoke:
    if not isinstance(entry, dict):
        raise ManifestFormatError("is not an object", where=where)
    addressing, limit = entry.get("addressing"), entry.get("max_request_bytes")
    if addressing not in ADDRESSINGS:
        raise ManifestFormatError(
            f"has addressing {addressing!r}, which this version cannot send "
            f"(it sends: {', '.join(sorted(ADDRESSINGS))})",
            where=where,
            fix=_UPGRADE,
        )
    if type(limit) is not int or limit <= 0:
        raise ManifestFormatError(f"has invalid max_request_bytes {limit!r}", where=where)
    extra = {k: v for k, v in entry.items() if k not in {"addressing", "max_request_bytes"}}
    return Invoke(addressing, limit, extra)


def check_size(size: int, source: str, *, at_least: bool = False) -> None:
    """Refuse a manifest of `size` bytes (`at_least`: read so far) over `MAX_MANIFEST_BYTES`."""
    if size > MAX_MANIFEST_BYTES:
        count = f"at least {size}" if at_least else str(size)
        raise ManifestFormatError(
            f"has {count} bytes, over the {MAX_MANIFEST_BYTES}-byte limit of a manifest",
            where=source,
            fix="this is not a manifest `deploy package` wrote: check where it comes from",
        )


def loads(raw: bytes, source: str) -> Manifest:
    """Parse manifest bytes (UTF-8 JSON, at most `MAX_MANIFEST_BYTES`)."""
    check_size(len(raw), source)
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestFormatError(f"is not valid JSON: {exc}", where=source) from exc
    except (RecursionError, MemoryError) as exc:  # nesting deeper than the parser's stack
        raise ManifestFormatError(
            f"is JSON nested too deeply or too large to parse ({type(exc).__name__})",
            where=source,
            fix="this is not a manifest `deploy package` wrote: check where it comes from",
        ) from exc
    return parse(document, source)


def read(path: str | Path) -> Manifest:
    """A manifest file, or the manifest.json inside a folder."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    try:
        with path.open("rb") as stream:
            check_size(os.fstat(stream.fileno()).st_size, str(path))
            raw = stream.read(MAX_MANIFEST_BYTES + 1)  # a file that grows meanwhile
            check_size(len(raw), str(path), at_least=True)
    except OSError as exc:
        raise ManifestFormatError(
            f"cannot be read: {exc.strerror or exc}",
            where=str(path),
            fix="run `deploy package` first, or pass the right manifest path",
        ) from exc
    return loads(raw, str(path))


def dump(manifest: Manifest) -> bytes:
    """The manifest as written: indented JSON, keys in contract order, a final newline."""
    return (json.dumps(manifest.to_document(), indent=2) + "\n").encode("utf-8")


def manifest_url_for(model_data_url: str) -> str:
    """The manifest next to a multi-model endpoint's ModelDataUrl prefix, or next to
    a single-model endpoint's archive (`.../model.tar.gz`)."""
    if model_data_url.endswith(".tar.gz"):
        model_data_url = model_data_url.rsplit("/", 1)[0]
    prefix = model_data_url if model_data_url.endswith("/") else model_data_url + "/"
    if not prefix.startswith("s3://"):
        raise ManifestFormatError(f"model data URL {model_data_url!r} is not on S3")
    return prefix + MANIFEST_NAME


def _model(name: str, entry: Any, where: str) -> ModelInfo:
    if not isinstance(entry, dict):
        raise ManifestFormatError("is not an object", where=where)
    target = entry.get("target_model")
    if not isinstance(target, str) or not target:
        raise ManifestFormatError("has no target_model", where=where)
    batch = entry.get("max_batch_size", 0)
    if type(batch) is not int or batch < 0:
        raise ManifestFormatError(f"has invalid max_batch_size {batch!r}", where=where)
    kind = entry.get("kind", "model")
    if kind not in KINDS:
        raise ManifestFormatError(f"has unknown kind {kind!r}", where=where)
    size = entry.get("bytes")
    if size is not None and (type(size) is not int or size < 0):
        raise ManifestFormatError(f"has invalid bytes {size!r}", where=where)
    contains = entry.get("contains", [])
    if not isinstance(contains, list) or not all(isinstance(item, str) for item in contains):
        raise ManifestFormatError(f"has invalid contains {contains!r}", where=where)
    return ModelInfo(
        name=str(entry.get("name", name)),
        target_model=target,
        max_batch_size=batch,
        inputs=_tensors(entry.get("inputs", []), f"{where}.inputs"),
        outputs=_tensors(entry.get("outputs", []), f"{where}.outputs"),
        kind=kind,
        sha256=_text(entry, "sha256", where),
        bytes=size,
        source_digest=_text(entry, "source_digest", where),
        backend=_text(entry, "backend", where),
        platform=_text(entry, "platform", where),
        contains=tuple(contains),
        extra={key: value for key, value in entry.items() if key not in _MODEL_KEYS},
        inference_component=_text(entry, "inference_component", where),
        canary=_canary(entry.get("canary"), f"{where}.canary"),
    )


def _canary(entry: Any, where: str) -> Canary | None:
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise ManifestFormatError("is not an object", where=where)
    target = entry.get("target_model")
    if not isinstance(target, str) or not target:
        raise ManifestFormatError("has no target_model", where=where)
    percent = entry.get("percent")
    if isinstance(percent, bool) or not isinstance(percent, (int, float)):
        percent = None
    if percent is None or not 0 < percent < 100:
        raise ManifestFormatError(
            f"has invalid percent {entry.get('percent')!r} (a number above 0 and below 100)",
            where=where,
        )
    size = entry.get("bytes")
    if size is not None and (type(size) is not int or size < 0):
        raise ManifestFormatError(f"has invalid bytes {size!r}", where=where)
    return Canary(
        target_model=target,
        percent=percent,  # as written (10 stays 10): the bytes read are the bytes written
        sha256=_text(entry, "sha256", where),
        bytes=size,
        source_digest=_text(entry, "source_digest", where),
        extra={key: value for key, value in entry.items() if key not in _CANARY_KEYS},
    )


def split(info: ModelInfo, sticky_key: str | None = None, draw: float | None = None) -> str:
    """The TargetModel one call goes to: the canary's for `percent` of calls, else
    the model's. With a `sticky_key` the choice is a hash of the model's name and
    the key (the same key always reaches the same version while the canary's
    percent stays); without one, `draw` (uniform in [0, 1), `random.random()` when
    None) decides. The SDK and the front door both split here."""
    canary = info.canary
    if canary is None:
        return info.target_model
    if sticky_key is not None:
        digest = hashlib.sha256(f"{info.name}\0{sticky_key}".encode()).digest()
        point = int.from_bytes(digest[:8], "big") / 2.0**64
    else:
        point = random.random() if draw is None else draw
    return canary.target_model if point * 100.0 < canary.percent else info.target_model


def _text(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise ManifestFormatError(f"has invalid {key} {value!r}", where=where)
    return value


def _archive(entry: Any, where: str) -> ArchiveRef | None:
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise ManifestFormatError("is not an object", where=where)
    key, sha256, size = entry.get("key"), entry.get("sha256"), entry.get("bytes")
    if not isinstance(key, str) or not key.endswith(".tar.gz"):
        raise ManifestFormatError(f"has invalid key {key!r}", where=where)
    if not isinstance(sha256, str) or type(size) is not int or size < 0:
        raise ManifestFormatError("needs sha256 (text) and bytes (a count)", where=where)
    return ArchiveRef(key, sha256, size)


def _locations(entry: Any, where: str) -> AsyncLocations:
    if not isinstance(entry, dict):
        raise ManifestFormatError(
            "is not an object naming the input, output and failure prefixes", where=where
        )
    urls = []
    for key in ("input_prefix", "output_prefix", "failure_prefix"):
        url = entry.get(key)
        bucket = url.removeprefix("s3://").partition("/")[0] if isinstance(url, str) else ""
        if not isinstance(url, str) or not url.startswith("s3://") or not url.endswith("/"):
            raise ManifestFormatError(
                f"{key} {url!r} is not an s3://bucket/prefix/ URL", where=where
            )
        if not bucket:
            raise ManifestFormatError(f"{key} {url!r} names no bucket", where=where)
        urls.append(url)
    return AsyncLocations(*urls)


def _lane(entry: Any, where: str) -> AsyncLane:
    if not isinstance(entry, dict):
        raise ManifestFormatError("is not an object", where=where)
    name = entry.get("endpoint_name")
    if not isinstance(name, str) or not name:
        raise ManifestFormatError("has no endpoint_name", where=where)
    known = {"endpoint_name", "input_prefix", "output_prefix", "failure_prefix"}
    extra = {key: value for key, value in entry.items() if key not in known}
    return AsyncLane(name, _locations(entry, where), extra)


def _tensors(entries: Any, where: str) -> tuple[TensorSpec, ...]:
    if not isinstance(entries, list):
        raise ManifestFormatError("is not a list", where=where)
    specs = []
    for index, entry in enumerate(entries):
        here = f"{where}[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ManifestFormatError("has no name", where=here)
        datatype = entry.get("datatype")
        if datatype not in DATATYPES:
            raise ManifestFormatError(f"has unknown datatype {datatype!r}", where=here)
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(type(d) is int and d >= -1 for d in shape):
            raise ManifestFormatError(f"has invalid shape {shape!r}", where=here)
        optional = entry.get("optional", False)  # absent in older manifests
        if type(optional) is not bool:
            raise ManifestFormatError(f"has invalid optional {optional!r}", where=here)
        specs.append(TensorSpec(entry["name"], datatype, tuple(shape), optional))
    return tuple(specs)
