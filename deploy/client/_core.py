"""What the sync and async endpoints share: routing a model name, building
and checking the request, and turning a response body into an `InferResult`.

No I/O happens here except reading the manifest through `ManifestSource`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.client._codec import EncodedRequest, decode_response, encode_input, encode_request
from deploy.client._errors import (
    ManifestError,
    ModelNotFoundError,
    ResponseFormatError,
)
from deploy.client._manifest import (
    Manifest,
    ModelInfo,
    manifest_url_for,
    split_s3_url,
)
from deploy.client._result import InferResult
from deploy.client._validate import check_input_names, check_outputs, check_payload, check_shape
from deploy.client.manifest import ASYNC, ROUTER, ROUTER_PARAMETER, SERVERLESS

# SageMaker real-time InvokeEndpoint accepts at most 6 MB of payload.
DEFAULT_MAX_PAYLOAD = 6 * 1024 * 1024
# Serverless endpoints take at most 4 MB per request (and response); asynchronous
# endpoints take request bodies of up to 1 GB through S3.
SERVERLESS_MAX_PAYLOAD = 4 * 1024 * 1024
ASYNC_MAX_PAYLOAD = 1024**3
_ARCHIVE_SUFFIX = ".tar.gz"
# Where the local endpoint (`deploy serve`) serves its store's manifest; SageMaker's
# runtime has no such path, so elsewhere the GET simply fails and names stay unresolved.
ENDPOINT_MANIFEST_PATH = "/deploy/manifest.json"
_ENDPOINT_MANIFEST_TIMEOUT = 10.0

ManifestLocation = str | Path | Manifest | None


class ManifestSource:
    """Finds and caches the manifest: a path, an s3:// URL, or discovered.

    Discovery follows the endpoint to its model data URL (DescribeEndpoint →
    DescribeEndpointConfig → DescribeModel → ModelDataUrl) and reads
    `manifest.json` there; with an `endpoint_url` it then asks that URL for
    `/deploy/manifest.json` (what the local endpoint serves). A failed
    discovery is not an error by itself: names that are already TargetModels
    still work; `reason` says what went wrong.
    """

    def __init__(
        self,
        location: ManifestLocation,
        *,
        endpoint: str,
        client_factory: Callable[[str], Any],
        discover: bool = True,
        endpoint_url: str | None = None,
    ) -> None:
        self._location = location
        self._discover_allowed = discover
        self._endpoint_url = endpoint_url
        self._endpoint = endpoint
        self._client = client_factory
        self._cached: Manifest | None = location if isinstance(location, Manifest) else None
        self._loaded = self._cached is not None
        self.reason: str | None = None

    @property
    def loaded(self) -> bool:
        return self._loaded

    def get(self) -> Manifest | None:
        if not self._loaded:
            self._cached = self._load()
            self._loaded = True
        return self._cached

    def refresh(self) -> Manifest | None:
        """Read the manifest again (after the endpoint said a model is missing)."""
        if isinstance(self._location, Manifest):
            return self._location
        self._loaded = False
        return self.get()

    def _load(self) -> Manifest | None:
        location = self._location
        if isinstance(location, Manifest):
            return location
        if location is None:
            return self._discover()
        text = str(location)
        if text.startswith("s3://"):
            return self._read_s3(text)
        return Manifest.from_path(location)

    def _read_s3(self, url: str) -> Manifest:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3_url(url)
        try:
            response = self._client("s3").get_object(Bucket=bucket, Key=key)
            raw = response["Body"].read()
        except (BotoCoreError, ClientError) as exc:
            raise ManifestError(
                f"cannot be read: {exc}",
                where=url,
                fix="check the URL and that these credentials may read it",
            ) from exc
        return Manifest.from_bytes(raw, url)

    def _discover(self) -> Manifest | None:
        reasons = []
        if self._discover_allowed:
            manifest, reason = self._from_control_plane()
            if manifest is not None:
                return manifest
            reasons.append(reason)
        if self._endpoint_url is not None:
            manifest, reason = self._from_endpoint_url(self._endpoint_url)
            if manifest is not None:
                return manifest
            reasons.append(reason)
        if not reasons:
            reasons.append("no manifest was given")
        self.reason = "; ".join(reasons)
        return None

    def _from_control_plane(self) -> tuple[Manifest | None, str]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            sagemaker = self._client("sagemaker")
            endpoint = sagemaker.describe_endpoint(EndpointName=self._endpoint)
            config = sagemaker.describe_endpoint_config(
                EndpointConfigName=endpoint["EndpointConfigName"]
            )
            model = sagemaker.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
            container = model.get("PrimaryContainer") or model["Containers"][0]
            url = manifest_url_for(container["ModelDataUrl"])
            return self._read_s3(url), ""
        except (BotoCoreError, ClientError, ManifestError, KeyError, IndexError) as exc:
            return None, f"could not find the manifest of endpoint {self._endpoint!r}: {exc}"

    def _from_endpoint_url(self, endpoint_url: str) -> tuple[Manifest | None, str]:
        """The manifest a local endpoint serves (standard library HTTP: no dependency)."""
        import urllib.error
        import urllib.request

        url = endpoint_url.rstrip("/") + ENDPOINT_MANIFEST_PATH
        try:  # a malformed URL fails already here (ValueError)
            request = urllib.request.Request(url, headers={"Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=_ENDPOINT_MANIFEST_TIMEOUT) as response:
                raw = response.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return None, f"{url} gave no manifest ({exc})"
        try:
            return Manifest.from_bytes(raw, url), ""
        except ManifestError as exc:
            return None, str(exc)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request goes: the TargetModel header (or None) and extra parameters."""

    model: str
    target_model: str | None
    info: ModelInfo | None
    parameters: dict[str, Any] = field(default_factory=dict)
    from_manifest: bool = False


@dataclass(frozen=True, slots=True)
class Prepared:
    route: Route
    request: EncodedRequest
    outputs: tuple[str, ...]


def route(
    model: str, target_model: str | None, manifest: Manifest | None, reason: str | None
) -> Route:
    """Resolve a logical model name (or accept an explicit TargetModel)."""
    info = manifest.find(model) if manifest is not None else None
    if manifest is not None and manifest.addressing == ROUTER:
        # One router model behind the endpoint: it picks the model by request parameter.
        name = target_model or (info.name if info is not None else model)
        return Route(model, None, info, {ROUTER_PARAMETER: name}, info is not None)
    if target_model is not None:
        return Route(model, target_model, info)
    if info is not None:
        return Route(model, info.target_model, info, from_manifest=True)
    if model.endswith(_ARCHIVE_SUFFIX):
        return Route(model, model, None)
    if manifest is not None:
        known = ", ".join(sorted(manifest.models)) or "none"
        raise ModelNotFoundError(
            f"model {model!r} is not in the manifest {manifest.source}",
            where=f"model {model!r}",
            fix=f"known models: {known}; or pass target_model=",
        )
    raise ModelNotFoundError(
        f"{model!r} is not a TargetModel (*.tar.gz) and no manifest resolves it"
        + (f" ({reason})" if reason else ""),
        where=f"model {model!r}",
        fix="pass manifest=<path or s3://.../manifest.json> to the endpoint, or target_model=",
    )


def prepare(
    chosen: Route,
    inputs: Mapping[str, Any],
    outputs: Sequence[str] | None,
    *,
    class_count: int | None,
    parameters: Mapping[str, Any] | None,
    max_payload_bytes: int,
    endpoint: str,
    hosting: str | None = None,
) -> Prepared:
    """Encode and check one request against the endpoint's limit (`max_payload_bytes`,
    lowered to 4 MB when the manifest's `hosting` is serverless)."""
    info = chosen.info
    if info is not None:
        check_input_names(info, inputs.keys())
    encoded = []
    for name, value in inputs.items():
        spec = info.input(name) if info is not None else None
        item = encode_input(name, value, spec.datatype if spec is not None else None)
        if info is not None and spec is not None:
            check_shape(info, spec, item)
        encoded.append(item)
    wanted = tuple(outputs) if outputs is not None else ()
    if info is not None:
        check_outputs(info, wanted)
        if class_count is not None and not wanted:
            wanted = tuple(spec.name for spec in info.outputs)
    merged = {**(parameters or {}), **chosen.parameters}
    request = encode_request(encoded, wanted, class_count=class_count, parameters=merged)
    where = f"endpoint {endpoint!r}, model {chosen.model!r}"
    if hosting == SERVERLESS:
        limit = min(max_payload_bytes, SERVERLESS_MAX_PAYLOAD)
        check_payload(
            len(request.body),
            limit,
            where,
            hosting=SERVERLESS,
            alternative=ASYNC,
            alternative_limit=ASYNC_MAX_PAYLOAD,
        )
    else:
        check_payload(len(request.body), max_payload_bytes, where)
    return Prepared(chosen, request, wanted)


def finish(prepared: Prepared, body: bytes, content_type: str | None) -> InferResult:
    """Decode a response and check that it holds what was asked for."""
    decoded = decode_response(body, content_type)
    chosen = prepared.route
    expected = prepared.outputs or (
        tuple(spec.name for spec in chosen.info.outputs) if chosen.info is not None else ()
    )
    missing = [name for name in expected if name not in decoded.outputs]
    if missing:
        raise ResponseFormatError(
            f"response lacks output {missing[0]!r} "
            f"(it has: {', '.join(decoded.outputs) or 'none'})",
            where=f"model {chosen.model!r}",
        )
    return InferResult(
        decoded.outputs,
        datatypes=decoded.datatypes,
        model=chosen.model,
        target_model=chosen.target_model,
        parameters=decoded.parameters,
    )
