"""Lambda entry point for the HTTP API (payload format 2.0).

Routes: `POST /v2/models/{model}/infer`, `GET /v2/models/{model}`,
`GET /v2/health/ready`. The model name is looked up in the model store's
manifest, which also says how the endpoint is addressed (its `TargetModel`,
the router's `target_model` parameter, or the model's inference component:
`InferenceComponentName`) and the largest request it takes;
the request goes to the endpoint in Triton's binary protocol and comes back
as KServe v2 JSON.

A model with a canary is split as the SDK splits it (`manifest_format.split`):
sticky on the caller's `X-Deploy-Sticky-Key` header, uniform without one. The
answer names the TargetModel that answered in `x-deploy-target-model`. The
manifest is read again once its lifetime (`MANIFEST_TTL_S`, 60 s) has passed,
so a rollback reaches the front door within that time.

Each inference request's log line is also a CloudWatch embedded-metric record
(`model_metrics.py`, a byte-for-byte copy of `deploy/client/model_metrics.py`):
CloudWatch Logs turns it into the per-model metrics of namespace
`Deploy/Models` (calls, latency, errors by class, payload bytes) under the
logical model name and the TargetModel called, which SageMaker does not
publish for a multi-model endpoint. Health and metadata requests call no
model and carry no metrics.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import pybase64

from . import fast_json, model_metrics, passthrough
from .binary import decode_response, encode_request
from .logs import get_logger
from .manifest import ManifestCache, ManifestError
from .manifest_format import (
    INFERENCE_COMPONENT_HEADER,
    ROUTER_PARAMETER,
    STICKY_KEY_HEADER,
    TARGET_MODEL_HEADER,
    TensorSpec,
    split,
)
from .request import Body, RequestError, parse_body, read_body

log = get_logger()
JSON_CONTENT_TYPE = "application/json"
# The answer's header naming the TargetModel that answered (multi-model endpoints).
TARGET_MODEL_RESPONSE_HEADER = "x-deploy-target-model"
INFER_ROUTE = "POST /v2/models/{model}/infer"


@dataclass(slots=True)
class Call:
    """What an inference request did, for its metrics: the logical model (None: not in
    the manifest), the TargetModel called, the bytes sent and answered, and the service's
    error code when the endpoint refused the call."""

    model: str | None = None
    target_model: str | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    code: str | None = None


@dataclass
class Response:
    """An answer: a JSON document, or bytes of `content_type` (base64 for API Gateway)."""

    status: int
    body: dict[str, Any] | None = None
    raw: bytes | None = None
    content_type: str = JSON_CONTENT_TYPE
    target_model: str | None = None  # the TargetModel that answered

    def to_api_gateway(self) -> dict[str, Any]:
        binary = self.raw is not None and self.content_type != JSON_CONTENT_TYPE
        payload = self.raw if self.raw is not None else fast_json.dumps(self.body)
        headers = {"content-type": self.content_type}
        if self.target_model is not None:
            headers[TARGET_MODEL_RESPONSE_HEADER] = self.target_model
        return {
            "statusCode": self.status,
            "headers": headers,
            "body": pybase64.b64encode_as_string(payload) if binary else payload.decode("utf-8"),
            "isBase64Encoded": binary,
        }


def _error(status: int, message: str) -> Response:
    return Response(status, {"error": message})


class FrontDoor:
    """Routes v2 requests to one SageMaker endpoint. Clients are injected (boto3 or stand-ins)."""

    def __init__(
        self, *, runtime: Any, sagemaker: Any, manifest: ManifestCache, endpoint_name: str
    ) -> None:
        self._runtime = runtime
        self._sagemaker = sagemaker
        self._manifest = manifest
        self._endpoint_name = endpoint_name

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        route = str(event.get("routeKey", ""))
        path = event.get("pathParameters")
        model = str(path.get("model", "")) if isinstance(path, dict) else ""
        call = Call() if route == INFER_ROUTE else None
        try:
            response = self._route(route, model, event, call)
        except RequestError as exc:
            response = _error(exc.status, str(exc))
        except ManifestError as exc:
            log.error("manifest unavailable", extra={"route": route, "error": str(exc)})
            response = _error(503, "the model store's manifest cannot be read")
        except Exception:  # a bug of ours: answer, and log it whole (never a bare 500)
            log.exception("unexpected error", extra={"route": route, "model": model or None})
            response = _error(500, "the front door failed on this request; see its logs")
        answer = response.to_api_gateway()
        latency_ms = (time.perf_counter() - started) * 1000
        fields = {
            "route": route,
            "model": model or None,
            "status": response.status,
            "latency_ms": round(latency_ms, 3),
            "request_id": (event.get("requestContext") or {}).get("requestId"),
        }
        if call is not None:
            if not call.request_bytes:  # refused before a payload was built: what came in
                call.request_bytes = _body_size(event)
            fields.update(
                model_metrics.record(
                    endpoint=self._endpoint_name,
                    model=call.model,
                    target_model=call.target_model,
                    latency_ms=latency_ms,
                    request_bytes=call.request_bytes,
                    response_bytes=call.response_bytes,
                    error=model_metrics.error_class(response.status, call.code),
                )
            )
        log.info("request", extra=fields)
        return answer

    def _route(self, route: str, model: str, event: dict[str, Any], call: Call | None) -> Response:
        if route == "GET /v2/health/ready":
            return self.ready()
        if route == "GET /v2/models/{model}":
            return self.metadata(model)
        if route == INFER_ROUTE:
            return self.infer(model, read_body(event), sticky_key=_sticky_key(event), call=call)
        return _error(404, f"no route {route!r}")

    def ready(self) -> Response:
        try:
            status = self._sagemaker.describe_endpoint(EndpointName=self._endpoint_name)
        except Exception as exc:  # any botocore failure means "not ready"
            log.warning("describe_endpoint failed", extra={"error": str(exc)})
            return _error(503, f"endpoint {self._endpoint_name} cannot be described")
        state = status.get("EndpointStatus")
        if state != "InService":
            return _error(503, f"endpoint {self._endpoint_name} is {state}")
        return Response(200, {})

    def metadata(self, model: str) -> Response:
        entry = self._manifest.model(model)
        if entry is None:
            return _error(404, f"unknown model {model!r}")
        batch = [-1] if entry.max_batch_size > 0 else []

        def tensors(specs: tuple[TensorSpec, ...]) -> list[dict[str, Any]]:
            return [
                {"name": t.name, "datatype": t.datatype, "shape": batch + list(t.shape)}
                for t in specs
            ]

        return Response(
            200,
            {
                "name": model,
                "versions": [],
                "platform": entry.platform or entry.backend or "",
                "inputs": tensors(entry.inputs),
                "outputs": tensors(entry.outputs),
            },
        )

    def infer(
        self,
        model: str,
        body: Body | str | bytes,
        *,
        sticky_key: str | None = None,
        call: Call | None = None,
    ) -> Response:
        """Answer one request: v2 JSON (`str`/`bytes` or a JSON `Body`) or the binary
        protocol; a model with a canary goes where `split` says for `sticky_key`.

        `call`, if given, is filled in with what the request did (for its metrics)."""
        if call is None:
            call = Call()
        if not isinstance(body, Body):
            body = Body(body)
        found = self._manifest.lookup(model)
        if found is None:
            return _error(404, f"unknown model {model!r}")
        manifest, entry = found
        target = entry.target_model
        call.model, call.target_model = model, target
        # How the endpoint is addressed, as the manifest publishes it.
        addressed: dict[str, Any] = {}
        routed: dict[str, Any] = {}
        target_model = None
        if manifest.addressing == TARGET_MODEL_HEADER:
            target_model = call.target_model = split(entry, sticky_key)
            addressed["TargetModel"] = target_model
        elif manifest.addressing == INFERENCE_COMPONENT_HEADER:
            if entry.inference_component is None:
                log.error("the manifest names no inference component", extra={"model": model})
                return _error(502, f"the endpoint's manifest names no component for {model!r}")
            addressed["InferenceComponentName"] = entry.inference_component
        else:
            routed[ROUTER_PARAMETER] = target
        # Every RequestError (400/415) is raised here, before the endpoint is called.
        binary = body.header_size is not None
        if binary:
            payload, content_type = passthrough.forward_request(body, extra=routed)
        else:
            payload, content_type = encode_request(parse_body(body.data), extra=routed)
        call.request_bytes = len(payload)
        if len(payload) > manifest.max_request_bytes:
            return _error(
                413,
                f"the request is {len(payload)} bytes in Triton's binary protocol, over the "
                f"{manifest.max_request_bytes} bytes the endpoint takes: send fewer rows",
            )
        try:
            result = self._runtime.invoke_endpoint(
                EndpointName=self._endpoint_name,
                ContentType=content_type,
                Body=payload,
                **addressed,
            )
        except Exception as exc:  # botocore ClientError and transport errors
            call.code = _error_code(exc)
            return _invoke_error(exc)
        try:
            answer, answer_type = result["Body"].read(), result.get("ContentType", "")
            call.response_bytes = len(answer)
            if binary:
                raw, raw_type = passthrough.answer(answer, answer_type, model)
                return Response(200, raw=raw, content_type=raw_type, target_model=target_model)
            response = decode_response(answer, answer_type)
            response["model_name"] = model
        except Exception as exc:  # whatever the endpoint sent, it is not a v2 response
            log.error("unreadable endpoint response", extra={"model": model, "error": str(exc)})
            return _error(502, f"the endpoint's response could not be read: {exc}")
        return Response(200, response, target_model=target_model)


def _sticky_key(event: dict[str, Any]) -> str | None:
    """The caller's `X-Deploy-Sticky-Key` (None: absent or empty); API Gateway
    lowercases header names, a direct invoke may not."""
    headers = event.get("headers")
    if not isinstance(headers, dict):
        return None
    wanted = STICKY_KEY_HEADER.lower()
    value = next((v for k, v in headers.items() if str(k).lower() == wanted), None)
    return value if isinstance(value, str) and value else None


def _body_size(event: dict[str, Any]) -> int:
    """About how many bytes the caller sent (a request refused before it was encoded)."""
    body = event.get("body")
    if not isinstance(body, str):
        return 0
    if event.get("isBase64Encoded"):
        return len(body) * 3 // 4 - body[-2:].count("=")
    return len(body.encode("utf-8", "replace"))


def _error_code(exc: Exception) -> str | None:
    """The service's error code of a botocore ClientError (None for transport errors)."""
    error = getattr(exc, "response", None)
    code = error.get("Error", {}).get("Code") if isinstance(error, dict) else None
    return str(code) if code else None


def _invoke_error(exc: Exception) -> Response:
    error = getattr(exc, "response", None)
    if not isinstance(error, dict):
        log.error("invoke_endpoint failed", extra={"error": str(exc)})
        return _error(502, "the endpoint could not be reached")
    code = error.get("Error", {}).get("Code", "")
    if code == "ModelError":
        # The container answered an error: pass its status and Triton's message on.
        # botocore puts modeled error fields at the top level of the response.
        status = int(error.get("OriginalStatusCode") or 500)
        message = error.get("OriginalMessage") or error.get("Error", {}).get("Message", "")
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(message).get("error", message)
        return _error(status if 400 <= status < 600 else 502, str(message))
    status = int(error.get("ResponseMetadata", {}).get("HTTPStatusCode") or 502)
    log.warning("invoke_endpoint refused", extra={"code": code, "status": status})
    message = error.get("Error", {}).get("Message", code)
    return _error(status if 400 <= status < 600 else 502, f"{code}: {message}")


_front_door: FrontDoor | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda handler; boto3 clients are built once per execution environment."""
    global _front_door
    if _front_door is None:
        import boto3

        bucket, key = os.environ["MODEL_STORE_BUCKET"], os.environ["MANIFEST_KEY"]
        endpoint_name = os.environ["ENDPOINT_NAME"]
        _front_door = FrontDoor(
            runtime=boto3.client("sagemaker-runtime"),
            sagemaker=boto3.client("sagemaker"),
            manifest=ManifestCache(
                boto3.client("s3"),
                bucket,
                key,
                ttl_s=float(os.environ.get("MANIFEST_TTL_S", "60")),
            ),
            endpoint_name=endpoint_name,
        )
    return _front_door.handle(event)
