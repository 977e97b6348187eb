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
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import pybase64

from . import fast_json, passthrough
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
        try:
            response = self._route(route, model, event)
        except RequestError as exc:
            response = _error(exc.status, str(exc))
        except ManifestError as exc:
            log.error("manifest unavailable", extra={"route": route, "error": str(exc)})
            response = _error(503, "the model store's manifest cannot be read")
        except Exception:  # a bug of ours: answer, and log it whole (never a bare 500)
            log.exception("unexpected error", extra={"route": route, "model": model or None})
            response = _error(500, "the front door failed on this request; see its logs")
        log.info(
            "request",
            extra={
                "route": route,
                "model": model or None,
                "status": response.status,
                "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                "request_id": (event.get("requestContext") or {}).get("requestId"),
            },
        )
        return response.to_api_gateway()

    def _route(self, route: str, model: str, event: dict[str, Any]) -> Response:
        if route == "GET /v2/health/ready":
            return self.ready()
        if route == "GET /v2/models/{model}":
            return self.metadata(model)
        if route == "POST /v2/models/{model}/infer":
            return self.infer(model, read_body(event), sticky_key=_sticky_key(event))
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
        self, model: str, body: Body | str | bytes, *, sticky_key: str | None = None
    ) -> Response:
        """Answer one request: v2 JSON (`str`/`bytes` or a JSON `Body`) or the binary
        protocol; a model with a canary goes where `split` says for `sticky_key`."""
        if not isinstance(body, Body):
            body = Body(body)
        found = self._manifest.lookup(model)
        if found is None:
            return _error(404, f"unknown model {model!r}")
        manifest, entry = found
        # How the endpoint is addressed, as the manifest publishes it.
        addressed: dict[str, Any] = {}
        routed: dict[str, Any] = {}
        target_model = None
        if manifest.addressing == TARGET_MODEL_HEADER:
            target_model = split(entry, sticky_key)
            addressed["TargetModel"] = target_model
        elif manifest.addressing == INFERENCE_COMPONENT_HEADER:
            if entry.inference_component is None:
                log.error("the manifest names no inference component", extra={"model": model})
                return _error(502, f"the endpoint's manifest names no component for {model!r}")
            addressed["InferenceComponentName"] = entry.inference_component
        else:
            routed[ROUTER_PARAMETER] = entry.target_model
        # Every RequestError (400/415) is raised here, before the endpoint is called.
        binary = body.header_size is not None
        if binary:
            payload, content_type = passthrough.forward_request(body, extra=routed)
        else:
            payload, content_type = encode_request(parse_body(body.data), extra=routed)
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
            return _invoke_error(exc)
        try:
            answer, answer_type = result["Body"].read(), result.get("ContentType", "")
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
