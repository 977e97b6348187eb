"""What the sync and async endpoints share: routing a model name, building
and checking the request, and turning a response body into an `InferResult`.

No I/O happens here (the manifest is found by `deploy.client._discovery`).
This runs on every call, so what follows from a model's manifest entry alone
(its input names, each input's dtype and shape rule, the outputs a response
must hold) is worked out once per `ModelInfo` (`_Plan`), and an array that
already has the declared dtype and layout is taken as it is; anything else
goes through the general checks, which raise the errors.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from deploy.client._discovery import ENDPOINT_MANIFEST_PATH as ENDPOINT_MANIFEST_PATH
from deploy.client._errors import (
    ManifestError,
    ModelNotFoundError,
    PayloadTooLargeError,
    ResponseFormatError,
)
from deploy.client._manifest import Manifest, ModelInfo, TensorSpec
from deploy.client._ownership import Origin, S3Scope
from deploy.client._result import InferResult
from deploy.client._validate import check_input_names, check_outputs, check_payload, check_shape
from deploy.client.codec import (
    BINARY_CONTENT_TYPE,
    Buffer,
    EncodedInput,
    EncodedRequest,
    decode_response,
    encode_input,
    encode_parts,
)
from deploy.client.dtypes import FIXED_DTYPES
from deploy.client.manifest import (
    ASYNC,
    ASYNC_MAX_REQUEST,
    INFERENCE_COMPONENT_HEADER,
    MULTI_MODEL,
    REALTIME_MAX_REQUEST,
    ROUTER,
    ROUTER_PARAMETER,
    SERVERLESS,
    AsyncLocations,
    split,
)

# The limits of a request without a manifest (the manifest publishes its endpoint's):
# SageMaker real-time InvokeEndpoint accepts at most 6 MB of payload, serverless
# endpoints 4 MB, InvokeEndpointAsync 1 GB (the request body travels through S3).
DEFAULT_MAX_PAYLOAD = REALTIME_MAX_REQUEST
log = logging.getLogger("deploy.client")
_ARCHIVE_SUFFIX = ".tar.gz"


@dataclass(frozen=True, slots=True)
class AsyncTarget:
    """An asynchronous endpoint to send through S3: `endpoint` None is the endpoint
    itself (hosting async), else the async lane paired with it; `scope` the S3
    objects its manifest section owns (all the SDK may touch)."""

    endpoint: str | None
    scope: S3Scope

    @property
    def locations(self) -> AsyncLocations:
        """The three prefixes as s3:// URLs."""
        scope = self.scope
        return AsyncLocations(
            scope.url(scope.input_prefix),
            scope.url(scope.output_prefix),
            scope.url(scope.failure_prefix),
        )


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request goes: the TargetModel header (or None), extra parameters,
    the asynchronous endpoint when it goes through S3, and the InferenceComponentName
    header (an endpoint of inference components: then no TargetModel)."""

    model: str
    target_model: str | None
    info: ModelInfo | None
    parameters: dict[str, Any] = field(default_factory=dict)
    from_manifest: bool = False
    asynchronous: AsyncTarget | None = None
    inference_component: str | None = None


class Prepared:
    """A request ready to send: the body's pieces (`parts`: the JSON header, then
    views of the input arrays), joined into `request` only where a whole body
    is needed (signing, boto3, S3)."""

    __slots__ = ("_request", "header_size", "outputs", "parts", "route", "size")

    def __init__(
        self,
        route: Route,
        parts: list[Buffer],
        header_size: int,
        size: int,
        outputs: tuple[str, ...],
    ) -> None:
        self.route = route
        self.parts = parts
        self.header_size = header_size
        self.size = size
        self.outputs = outputs
        self._request: EncodedRequest | None = None

    @property
    def request(self) -> EncodedRequest:
        """The body as one `bytes` (joined on first use)."""
        if self._request is None:
            self._request = EncodedRequest(b"".join(self.parts), self.header_size)
        return self._request

    @property
    def content_type(self) -> str:
        return f"{BINARY_CONTENT_TYPE};json-header-size={self.header_size}"


@dataclass(frozen=True, slots=True)
class _InputRule:
    """One declared input: the dtype an array may be sent as unchanged, and its shape rule."""

    spec: TensorSpec
    dtype: np.dtype[Any] | None  # None: BYTES and BF16 always take the general path
    ndim: int
    fixed: tuple[tuple[int, int], ...]  # (axis, size) for every axis not -1
    max_batch: int  # 0: no batch dimension


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a model's manifest entry says about every request, worked out once."""

    info: ModelInfo
    declared: frozenset[str]
    required: frozenset[str]
    rules: dict[str, _InputRule]
    answered: tuple[str, ...]  # outputs every response holds (not optional)
    outputs: tuple[str, ...]


def _plan_of(info: ModelInfo) -> _Plan:
    rules = {}
    batch = info.max_batch_size
    for spec in info.inputs:
        declared = ((-1,) if batch > 0 else ()) + tuple(spec.shape)
        fixed = tuple((axis, size) for axis, size in enumerate(declared) if size != -1)
        dtype = FIXED_DTYPES.get(spec.datatype) if spec.datatype != "BF16" else None
        rules[spec.name] = _InputRule(spec, dtype, len(declared), fixed, max(batch, 0))
    return _Plan(
        info,
        frozenset(spec.name for spec in info.inputs),
        frozenset(spec.name for spec in info.inputs if not spec.optional),
        rules,
        tuple(spec.name for spec in info.outputs if not spec.optional),
        tuple(spec.name for spec in info.outputs),
    )


# By the ModelInfo's identity (it is frozen); the entry keeps it alive, so an id is
# never reused while it is here. A re-read manifest brings new ModelInfos: the
# cache is emptied when it grows past this.
_PLANS: dict[int, _Plan] = {}
_MAX_PLANS = 256


def plan(info: ModelInfo) -> _Plan:
    """The worked-out checks for `info` (cached)."""
    found = _PLANS.get(id(info))
    if found is not None and found.info is info:
        return found
    made = _plan_of(info)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(info)] = made
    return made


def _as_declared(rule: _InputRule, name: str, value: Any) -> EncodedInput | None:
    """`value` as it is, when it is an array of the declared dtype, contiguous and
    shaped as declared; None sends it through the general checks."""
    if type(value) is not np.ndarray or value.dtype != rule.dtype:
        return None
    shape = value.shape
    if len(shape) != rule.ndim or not value.flags.c_contiguous or not value.size:
        return None
    if rule.max_batch and not 1 <= shape[0] <= rule.max_batch:
        return None
    for axis, size in rule.fixed:
        if shape[axis] != size:
            return None
    view = value.data.cast("B") if value.ndim else value.reshape(-1).data.cast("B")
    return EncodedInput(name, rule.spec.datatype, shape, [view], view.nbytes)


def route(
    model: str,
    target_model: str | None,
    manifest: Manifest | None,
    reason: str | None,
    origin: Origin | None = None,
    sticky_key: str | None = None,
) -> Route:
    """Resolve a logical model name (or accept an explicit TargetModel); `origin`
    says where the manifest came from (its async prefixes are checked against it).

    A model with a canary goes to the TargetModel `split` picks for this call:
    sticky on `sticky_key`, uniform without one. An explicit `target_model`
    bypasses the split."""
    return with_split(_route(model, target_model, manifest, reason, origin), sticky_key)


def with_split(chosen: Route, sticky_key: str | None) -> Route:
    """`chosen`, sent to its canary's TargetModel when `split` says so this call."""
    info = chosen.info
    if info is None or info.canary is None or not chosen.from_manifest:
        return chosen
    if chosen.target_model is None:  # the router parameter: no canary in these layouts
        return chosen
    picked = split(info, sticky_key)
    return chosen if picked == chosen.target_model else replace(chosen, target_model=picked)


def _route(
    model: str,
    target_model: str | None,
    manifest: Manifest | None,
    reason: str | None,
    origin: Origin | None,
) -> Route:
    info = manifest.find(model) if manifest is not None else None
    if manifest is not None and manifest.addressing == ROUTER:
        # One router model behind the endpoint: it picks the model by request parameter.
        name = target_model or (info.name if info is not None else model)
        through_s3 = None
        if manifest.async_inference is not None:
            scope = S3Scope.of(
                manifest.async_inference, origin or Origin(manifest.source), "async_inference"
            )
            through_s3 = AsyncTarget(None, scope)
        elif manifest.hosting == ASYNC:
            raise ManifestError(
                "has hosting async but names no S3 prefixes (async_inference): it is a "
                "package manifest, not the one `deploy up` published",
                where=manifest.source,
                fix="use the manifest the endpoint's stage published (found from the "
                "endpoint when manifest= is left out)",
            )
        return Route(model, None, info, {ROUTER_PARAMETER: name}, info is not None, through_s3)
    if manifest is not None and manifest.addressing == INFERENCE_COMPONENT_HEADER:
        return _component_route(model, target_model, info, manifest)
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


def _component_route(
    model: str, target_model: str | None, info: ModelInfo | None, manifest: Manifest
) -> Route:
    """An endpoint of inference components: the model's component, named in the
    InferenceComponentName header; SageMaker takes no TargetModel there."""
    where = f"model {model!r}"
    if info is None:
        known = ", ".join(sorted(manifest.models)) or "none"
        raise ModelNotFoundError(
            f"model {model!r} is not in the manifest {manifest.source}",
            where=where,
            fix=f"known models: {known}",
        )
    if info.inference_component is None:
        raise ManifestError(
            f"models.{info.name} names no inference_component, which hosting "
            f"{manifest.hosting!r} needs",
            where=manifest.source,
            fix="use the manifest the endpoint's stage published (`deploy up` names each "
            "model's component)",
        )
    if target_model is not None and target_model != info.target_model:
        # The component serves the model's archive only (a smoke test may name it).
        raise ModelNotFoundError(
            f"target_model={target_model!r}: the endpoint hosts inference components, "
            f"whose {info.inference_component!r} serves {info.target_model!r} only",
            where=where,
            fix="leave out target_model=; the manifest names each model's component",
        )
    return Route(
        model, None, info, from_manifest=True, inference_component=info.inference_component
    )


class Routes:
    """`route`'s answers for one endpoint, each kept with the manifest (and the
    origin) it came from: a re-read manifest is routed afresh. A model's canary
    split is made for every call."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[tuple[str, str | None], tuple[Manifest, Origin | None, Route]] = {}

    def get(
        self,
        model: str,
        target_model: str | None,
        manifest: Manifest | None,
        reason: str | None,
        origin: Origin | None = None,
        sticky_key: str | None = None,
    ) -> Route:
        key = (model, target_model)
        found = self._known.get(key)
        if found is not None and found[0] is manifest and found[1] is origin:
            return with_split(found[2], sticky_key)
        chosen = _route(model, target_model, manifest, reason, origin)
        if manifest is not None:  # without one, a later manifest may resolve it
            if len(self._known) >= 256:
                self._known.clear()
            self._known[key] = (manifest, origin, chosen)
        return with_split(chosen, sticky_key)


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
    origin: Origin | None = None,
) -> Prepared:
    """Encode and check one request against its hosting mode's limit.

    `max_payload_bytes` None is the limit the manifest publishes for its
    endpoint (6 MB real-time, 4 MB serverless, 1 GB asynchronous; 6 MB without
    a manifest); a smaller one given applies too. A real-time request over it
    goes to the stage's async lane when the manifest names one, and is refused
    otherwise."""
    info = chosen.info
    rules = plan(info) if info is not None else None
    if rules is not None:
        keys = inputs.keys()
        if not (keys <= rules.declared and rules.required <= keys):
            check_input_names(rules.info, keys)
    encoded = []
    for name, value in inputs.items():
        rule = rules.rules.get(name) if rules is not None else None
        item = _as_declared(rule, name, value) if rule is not None else None
        if item is None:
            spec = rule.spec if rule is not None else None
            item = encode_input(name, value, spec.datatype if spec is not None else None)
            if rules is not None and spec is not None:
                check_shape(rules.info, spec, item)
        encoded.append(item)
    wanted = tuple(outputs) if outputs is not None else ()
    if rules is not None:
        if wanted:
            check_outputs(rules.info, wanted)
        if class_count is not None and not wanted:
            wanted = rules.outputs
    merged = {**parameters, **chosen.parameters} if parameters else chosen.parameters
    parts, header_size, size = encode_parts(
        encoded, wanted, class_count=class_count, parameters=merged
    )
    where = f"endpoint {endpoint!r}, model {chosen.model!r}"
    published = manifest.max_request_bytes if manifest is not None else DEFAULT_MAX_PAYLOAD
    if chosen.asynchronous is not None:
        check_payload(size, max_payload_bytes or published, where, hosting=ASYNC)
        return Prepared(chosen, parts, header_size, size, wanted)
    hosting = manifest.hosting if manifest is not None else None
    if hosting == SERVERLESS:
        limit = min(max_payload_bytes or published, published)
    else:
        limit = max_payload_bytes or published
    if size <= limit:
        return Prepared(chosen, parts, header_size, size, wanted)
    lane = manifest.async_lane if manifest is not None else None
    if manifest is None or lane is None or size > lane.request_limit:
        alternative_limit = lane.request_limit if lane is not None else ASYNC_MAX_REQUEST
        raise PayloadTooLargeError(
            size,
            limit,
            where=where,
            hosting=hosting or (MULTI_MODEL if chosen.target_model else None),
            alternative=ASYNC if size <= alternative_limit else None,
            alternative_limit=alternative_limit,
        )
    # Checked before anything is uploaded: the lane's prefixes must be the manifest's own.
    scope = S3Scope.of(lane.locations, origin or Origin(manifest.source), "async_lane")
    name = chosen.info.name if chosen.info is not None else chosen.model
    laned = Route(
        chosen.model,
        None,
        chosen.info,
        {ROUTER_PARAMETER: name},
        chosen.from_manifest,
        AsyncTarget(lane.endpoint_name, scope),
    )
    log.debug(
        "model %r: the request is %d bytes, over the real-time limit of %d bytes; sending it "
        "to the async lane, endpoint %r, through %s",
        chosen.model,
        size,
        limit,
        lane.endpoint_name,
        scope.url(scope.input_prefix),
    )
    del parts  # the router needs the model named in the request: encode again
    merged = {**(parameters or {}), **laned.parameters}
    parts, header_size, size = encode_parts(
        encoded, wanted, class_count=class_count, parameters=merged
    )
    check_payload(size, lane.request_limit, where, hosting=ASYNC)
    return Prepared(laned, parts, header_size, size, wanted)


def finish(prepared: Prepared, body: bytes, content_type: str | None) -> InferResult:
    """Decode a response and check that it holds what was asked for."""
    decoded = decode_response(body, content_type)
    chosen = prepared.route
    # Asked for by name: each must come back. Otherwise every output the model always
    # answers (an output marked optional may be left out, with the inputs it depends on).
    expected = prepared.outputs or (plan(chosen.info).answered if chosen.info is not None else ())
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
