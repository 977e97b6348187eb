"""What the sync and async endpoints share: routing a model name, building
and checking the request, and turning a response body into an `InferResult`.

No I/O happens here except reading the manifest through `ManifestSource`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.client._codec import EncodedRequest, decode_response, encode_input, encode_request
from deploy.client._errors import (
    ManifestError,
    ModelNotFoundError,
    PayloadTooLargeError,
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
from deploy.client.manifest import (
    ASYNC,
    MULTI_MODEL,
    ROUTER,
    ROUTER_PARAMETER,
    SERVERLESS,
    AsyncLocations,
)

# SageMaker real-time InvokeEndpoint accepts at most 6 MB of payload,
# InvokeEndpointAsync 1 GB (the request body travels through S3).
DEFAULT_MAX_PAYLOAD = 6 * 1024 * 1024
# Serverless endpoints take at most 4 MB per request (and response); asynchronous
# endpoints take request bodies of up to 1 GB through S3.
SERVERLESS_MAX_PAYLOAD = 4 * 1024 * 1024
ASYNC_MAX_PAYLOAD = 1024**3
log = logging.getLogger("deploy.client")
_ARCHIVE_SUFFIX = ".tar.gz"
# Where the local endpoint (`deploy serve`) serves its store's manifest; SageMaker's
# runtime has no such path, so elsewhere the GET simply fails and names stay unresolved.
ENDPOINT_MANIFEST_PATH = "/deploy/manifest.json"
# ...and names itself in this header of that answer.
ENDPOINT_NAME_HEADER = "X-Deploy-Endpoint-Name"
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
class AsyncTarget:
    """An asynchronous endpoint to send through S3: `endpoint` None is the endpoint
    itself (hosting async), else the async lane paired with it."""

    endpoint: str | None
    locations: AsyncLocations


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request goes: the TargetModel header (or None), extra parameters,
    and the asynchronous endpoint when it goes through S3."""

    model: str
    target_model: str | None
    info: ModelInfo | None
    parameters: dict[str, Any] = field(default_factory=dict)
    from_manifest: bool = False
    asynchronous: AsyncTarget | None = None


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
        through_s3 = None
        if manifest.async_inference is not None:
            through_s3 = AsyncTarget(None, manifest.async_inference)
        elif manifest.hosting == ASYNC:
            raise ManifestError(
                "has hosting async but names no S3 prefixes (async_inference): it is a "
                "package manifest, not the one `deploy up` published",
                where=manifest.source,
                fix="use the manifest the endpoint's stage published (found from the "
                "endpoint when manifest= is left out)",
            )
        return Route(model, None, info, {ROUTER_PARAMETER: name}, info is not None, through_s3)
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
    max_payload_bytes: int | None,
    endpoint: str,
    manifest: Manifest | None = None,
) -> Prepared:
    """Encode and check one request against its hosting mode's limit.

    `max_payload_bytes` None is the mode's own limit (6 MB real-time, 4 MB
    serverless, 1 GB asynchronous); a smaller one given applies too. A
    real-time request over it goes to the stage's async lane when the
    manifest names one, and is refused otherwise."""
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
    hosting = manifest.hosting if manifest is not None else None
    size = len(request.body)
    if chosen.asynchronous is not None:
        check_payload(size, max_payload_bytes or ASYNC_MAX_PAYLOAD, where, hosting=ASYNC)
        return Prepared(chosen, request, wanted)
    if hosting == SERVERLESS:
        limit = min(max_payload_bytes or SERVERLESS_MAX_PAYLOAD, SERVERLESS_MAX_PAYLOAD)
    else:
        limit = max_payload_bytes or DEFAULT_MAX_PAYLOAD
    if size <= limit:
        return Prepared(chosen, request, wanted)
    lane = manifest.async_lane if manifest is not None else None
    if lane is None or size > ASYNC_MAX_PAYLOAD:
        raise PayloadTooLargeError(
            size,
            limit,
            where=where,
            hosting=hosting or (MULTI_MODEL if chosen.target_model else None),
            alternative=ASYNC if size <= ASYNC_MAX_PAYLOAD else None,
            alternative_limit=ASYNC_MAX_PAYLOAD,
        )
    name = chosen.info.name if chosen.info is not None else chosen.model
    laned = Route(
        chosen.model,
        None,
        chosen.info,
        {ROUTER_PARAMETER: name},
        chosen.from_manifest,
        AsyncTarget(lane.endpoint_name, lane.locations),
    )
    log.debug(
        "model %r: the request is %d bytes, over the real-time limit of %d bytes; sending it "
        "to the async lane, endpoint %r, through %s",
        chosen.model,
        size,
        limit,
        lane.endpoint_name,
        lane.locations.input_prefix,
    )
    del request  # the router needs the model named in the request: encode again
    merged = {**(parameters or {}), **laned.parameters}
    request = encode_request(encoded, wanted, class_count=class_count, parameters=merged)
    check_payload(len(request.body), ASYNC_MAX_PAYLOAD, where, hosting=ASYNC)
    return Prepared(laned, request, wanted)


def finish(prepared: Prepared, body: bytes, content_type: str | None) -> InferResult:
    """Decode a response and check that it holds what was asked for."""
    decoded = decode_response(body, content_type)
    chosen = prepared.route
    # Asked for by name: each must come back. Otherwise every output the model always
    # answers (an output marked optional may be left out, with the inputs it depends on).
    expected = prepared.outputs or (
        tuple(spec.name for spec in chosen.info.outputs if not spec.optional)
        if chosen.info is not None
        else ()
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


def endpoint_name_at(
    endpoint_url: str, *, timeout: float = _ENDPOINT_MANIFEST_TIMEOUT
) -> str | None:
    """The name the local endpoint (`deploy serve`) at `endpoint_url` gives itself.

    None when the URL does not answer as a local endpoint does (SageMaker's
    runtime, a proxy to it, nothing listening)."""
    import urllib.error
    import urllib.request

    url = endpoint_url.rstrip("/") + ENDPOINT_MANIFEST_PATH
    try:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            name = response.headers.get(ENDPOINT_NAME_HEADER)
    except urllib.error.HTTPError as exc:  # a store without a manifest still names itself
        name = exc.headers.get(ENDPOINT_NAME_HEADER)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return str(name) if name else None
