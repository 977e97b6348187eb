"""Every request the HTTP API can hand the front door gets an answer, never a crash.

Hypothesis generates KServe v2 request bodies, well-formed and broken in one
field each, wrapped in the API Gateway HTTP API (payload 2.0) events of
tests/events/. Well-formed ones come back from an echoing SageMaker runtime
stand-in with their own data; broken ones are a 400 (415 for a content type
the door does not take) whose message names the field, and the runtime sees
no call. The findings that once crashed the Lambda (an uncaught exception is
a 500) or went through to the endpoint have their own tests, against a real
botocore client held by a Stubber with no response queued: any call would fail.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import math
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy_handlers.front_door.app import FrontDoor
from deploy_handlers.front_door.binary import BINARY_CONTENT_TYPE, DATATYPES, encode_request
from deploy_handlers.front_door.manifest import ManifestCache

from .test_handlers_front_door import TARGET, SageMakerStandIn, StoreStandIn

EVENT = json.loads((Path(__file__).resolve().parents[1] / "events" / "infer.json").read_text())
INT_RANGES = {
    "INT8": (-(2**7), 2**7 - 1),
    "INT16": (-(2**15), 2**15 - 1),
    "INT32": (-(2**31), 2**31 - 1),
    "INT64": (-(2**63), 2**63 - 1),
    "UINT8": (0, 2**8 - 1),
    "UINT16": (0, 2**16 - 1),
    "UINT32": (0, 2**32 - 1),
    "UINT64": (0, 2**64 - 1),
}
ITEM_SIZE = {"BOOL": 1, "FP16": 2, "BF16": 2, "FP32": 4, "FP64": 8} | {
    datatype: int(datatype.removeprefix("U").removeprefix("INT")) // 8 for datatype in INT_RANGES
}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class EchoRuntimeStandIn:
    """A SageMaker runtime whose model returns its inputs: checks the binary body, echoes it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        media_type, _, size = kwargs["ContentType"].partition(";json-header-size=")
        assert media_type == BINARY_CONTENT_TYPE, kwargs["ContentType"]
        body: bytes = kwargs["Body"]
        header = json.loads(body[: int(size)])
        offset, raw = int(size), {}
        for tensor in header["inputs"]:
            length = tensor["parameters"]["binary_data_size"]
            raw[tensor["name"]] = body[offset : offset + length]
            assert len(raw[tensor["name"]]) == length, "a tensor runs past the body"
            _check_size(tensor["datatype"], tensor["shape"], raw[tensor["name"]])
            offset += length
        assert offset == len(body), "bytes after the last tensor"
        wanted = [o["name"] for o in header.get("outputs", [])] or list(raw)
        types = {t["name"]: t for t in header["inputs"]}
        head = {
            "model_name": kwargs["TargetModel"],
            "outputs": [
                {
                    "name": name,
                    "datatype": types[name]["datatype"],
                    "shape": types[name]["shape"],
                    "parameters": {"binary_data_size": len(raw[name])},
                }
                for name in wanted
            ],
        }
        head_bytes = json.dumps(head).encode()
        return {
            "Body": io.BytesIO(head_bytes + b"".join(raw[name] for name in wanted)),
            "ContentType": f"{BINARY_CONTENT_TYPE};json-header-size={len(head_bytes)}",
        }


def _check_size(datatype: str, shape: list[int], raw: bytes) -> None:
    """What Triton checks of a binary input: its bytes are exactly what the shape holds."""
    count = math.prod(shape)
    if datatype != "BYTES":
        assert len(raw) == count * ITEM_SIZE[datatype], (datatype, shape, len(raw))
        return
    offset = 0
    for _ in range(count):
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4 + length
    assert offset == len(raw), "BYTES elements do not fill the tensor"


def door(runtime: Any) -> FrontDoor:
    return FrontDoor(
        runtime=runtime,
        sagemaker=SageMakerStandIn(),
        manifest=ManifestCache(StoreStandIn(), "store", "models/manifest.json"),
        endpoint_name="deploy-triton",
    )


def infer_event(body: str, **changes: Any) -> dict[str, Any]:
    event = copy.deepcopy(EVENT)
    event["body"] = body
    event.update(changes)
    return event


def answer(event: dict[str, Any]) -> tuple[int, dict[str, Any], EchoRuntimeStandIn]:
    runtime = EchoRuntimeStandIn()
    response = door(runtime).handle(event)
    assert response["headers"]["content-type"] == "application/json"
    return response["statusCode"], json.loads(response["body"]), runtime


# -- generated requests -------------------------------------------------------------


def elements(datatype: str) -> st.SearchStrategy[Any]:
    if datatype in INT_RANGES:
        low, high = INT_RANGES[datatype]
        return st.integers(low, high)
    if datatype == "BOOL":
        return st.booleans()
    if datatype == "BYTES":
        return st.text(max_size=8)
    if datatype == "BF16":  # integers up to 256 are exact in BF16's 8-bit mantissa
        return st.integers(-256, 256).map(float)
    width = {"FP16": 16, "FP32": 32, "FP64": 64}[datatype]
    return st.floats(width=width, allow_nan=False, allow_infinity=False)


def nest(flat: list[Any], shape: list[int]) -> list[Any]:
    """Row-major `flat` in the natural nesting of `shape`."""
    if len(shape) <= 1:
        return flat
    step = math.prod(shape[1:])
    return [nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


@st.composite
def tensors(draw: st.DrawFn, name: str, min_dims: int = 0) -> dict[str, Any]:
    datatype = draw(st.sampled_from(sorted(DATATYPES)))
    shape = draw(st.lists(st.integers(0, 3), min_size=min_dims, max_size=3))
    count = math.prod(shape)
    flat = draw(st.lists(elements(datatype), min_size=count, max_size=count))
    data: Any = nest(flat, shape) if draw(st.booleans()) else flat
    if count == 1 and draw(st.booleans()):
        data = flat[0]  # a scalar stands for one element
    tensor = {"name": name, "datatype": datatype, "shape": shape, "data": data}
    if draw(st.booleans()):
        tensor["parameters"] = draw(scalar_parameters)
    return tensor


scalar_parameters = st.dictionaries(
    st.text(max_size=6).filter(lambda key: not key.startswith("shared_memory_")),
    st.one_of(
        st.text(max_size=6),
        st.integers(-(2**53), 2**53),
        st.booleans(),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    max_size=3,
)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3, unique=True))
    request: dict[str, Any] = {"inputs": [draw(tensors(name)) for name in names]}
    outputs = draw(st.none() | st.lists(st.sampled_from(names), unique=True))
    if outputs is not None:
        request["outputs"] = [{"name": name} for name in outputs]
    if draw(st.booleans()):
        request["id"] = draw(st.text(max_size=8))
    if draw(st.booleans()):
        request["parameters"] = draw(scalar_parameters)
    return request


@st.composite
def wrapped(draw: st.DrawFn, request: Any) -> dict[str, Any]:
    """The request as API Gateway hands it over: text or base64, with a JSON content type."""
    text = json.dumps(request)
    event = infer_event(text)
    if draw(st.booleans()):
        event["body"] = base64.b64encode(text.encode()).decode("ascii")
        event["isBase64Encoded"] = True
    content_type = draw(
        st.sampled_from(["application/json", "application/json; charset=utf-8", "Application/JSON"])
        | st.none()
    )
    if content_type is None:
        del event["headers"]["content-type"]
    else:
        event["headers"]["content-type"] = content_type
    return event


def flat(data: Any) -> list[Any]:
    if not isinstance(data, list):
        return [data]
    return (
        [leaf for item in data for leaf in flat(item)]
        if data and isinstance(data[0], list)
        else data
    )


@SETTINGS
@given(st.data())
def test_well_formed_requests_reach_the_endpoint_once_and_come_back_whole(
    data: st.DataObject,
) -> None:
    request = data.draw(requests())
    status, body, runtime = answer(data.draw(wrapped(request)))

    assert status == 200, body
    (call,) = runtime.calls
    assert call["TargetModel"] == TARGET
    sent = {t["name"]: t for t in request["inputs"]}
    wanted = [o["name"] for o in request.get("outputs") or []] or list(sent)
    assert [o["name"] for o in body["outputs"]] == wanted
    for output in body["outputs"]:
        tensor = sent[output["name"]]
        assert output["datatype"] == tensor["datatype"]
        assert output["shape"] == tensor["shape"]
        assert output["data"] == flat(tensor["data"])


# -- broken requests: one field wrong each -----------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)
Broken = tuple[dict[str, Any], int, str]  # (event, status, a fragment the message holds)
Mutation = Callable[[st.DrawFn, dict[str, Any]], tuple[Any, str]]


def _index(draw: st.DrawFn, request: dict[str, Any]) -> int:
    return draw(st.integers(0, len(request["inputs"]) - 1))


def not_an_object(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    return draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict))), "must be a JSON object"


def bad_inputs(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    request["inputs"] = draw(JSON_VALUES.filter(lambda v: not isinstance(v, list)) | st.just([]))
    if draw(st.booleans()):
        del request["inputs"]
    return request, "'inputs'"


def input_not_an_object(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    i = _index(draw, request)
    request["inputs"][i] = draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict)))
    return request, f"inputs[{i}] must be an object"


def missing_field(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    i = _index(draw, request)
    del request["inputs"][i][draw(st.sampled_from(["name", "datatype", "shape", "data"]))]
    return request, f"inputs[{i}] needs"


def bad_name(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    i = _index(draw, request)
    request["inputs"][i]["name"] = draw(
        JSON_VALUES.filter(lambda v: not isinstance(v, str)) | st.just("")
    )
    return request, f"inputs[{i}].name"


def twice(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    request["inputs"].append(copy.deepcopy(request["inputs"][0]))
    return request, f"inputs[{len(request['inputs']) - 1}].name"


def bad_datatype(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    i = _index(draw, request)
    wrong = draw(JSON_VALUES.filter(lambda v: not isinstance(v, str)))
    if draw(st.booleans()):
        wrong = draw(st.text(max_size=6).filter(lambda v: v not in DATATYPES))
    request["inputs"][i]["datatype"] = wrong
    return request, "datatype"


def bad_shape(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    i = _index(draw, request)
    shape = list(request["inputs"][i]["shape"])
    not_a_dim = st.integers(max_value=-1) | JSON_VALUES.filter(
        lambda v: type(v) is not int  # True is an int to Python, not a dimension
    )
    shape.insert(draw(st.integers(0, len(shape))), draw(not_a_dim))
    request["inputs"][i]["shape"] = (
        shape
        if draw(st.booleans())
        else draw(JSON_VALUES.filter(lambda v: not isinstance(v, list)))
    )
    return request, f"inputs[{i}].shape"


def count_mismatch(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    i = _index(draw, request)
    tensor = request["inputs"][i]
    values = flat(tensor["data"])
    if values and draw(st.booleans()):
        values = values[:-1]
    else:
        values = [*values, draw(elements(tensor["datatype"]))]
    tensor["data"] = values
    return request, f"input {tensor['name']!r}: shape"


@st.composite
def ragged_tensor(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """Nested data that does not nest as its shape: one list too short or too long, or reshaped."""
    tensor = draw(tensors(name, min_dims=2).filter(lambda t: t["shape"][0] >= 2))
    shape = tensor["shape"]
    values = flat(tensor["data"])
    if draw(st.booleans()) and math.prod(shape) > 0:
        # The same elements, nested as another shape: [[1, 2], [3, 4]] sent for shape [4, 1].
        other = [math.prod(shape) // shape[-1], shape[-1]]
        if other == shape[:2] and len(shape) == 2:
            other = [1, math.prod(shape)]
        tensor["data"] = nest(values, other)
        return tensor
    nested = nest(values, shape)
    path = [draw(st.integers(0, shape[0] - 1))]
    row = nested[path[0]]
    while isinstance(row, list) and row and isinstance(row[0], list) and draw(st.booleans()):
        path.append(draw(st.integers(0, len(row) - 1)))
        row = row[path[-1]]
    if row and draw(st.booleans()):
        row.pop()
    else:
        row.append(copy.deepcopy(row[0]) if row else draw(elements(tensor["datatype"])))
    tensor["data"] = nested
    return tensor


def ragged(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    i = _index(draw, request)
    request["inputs"][i] = draw(ragged_tensor(request["inputs"][i]["name"]))
    return request, repr(request["inputs"][i]["name"])


def wrong_element(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    """One element that the datatype cannot hold (the rest stay valid)."""
    candidates = [t for t in request["inputs"] if math.prod(t["shape"]) > 0]
    if not candidates:
        return bad_inputs(draw, request)
    tensor = draw(st.sampled_from(candidates))
    datatype = tensor["datatype"]
    values = flat(tensor["data"])
    not_scalar = st.none() | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
    if datatype in INT_RANGES:
        low, high = INT_RANGES[datatype]
        bad = draw(
            not_scalar
            | st.text(max_size=3)
            | st.sampled_from([low - 1, high + 1, 2**64, -(2**64), 0.5])
            | st.floats(allow_nan=False)
        )
    elif datatype == "BOOL":
        bad = draw(not_scalar | st.text(max_size=3) | st.integers(0, 1) | st.floats())
    elif datatype == "BYTES":
        bad = draw(not_scalar | st.lists(st.text(max_size=2), min_size=2, max_size=3))
    else:
        bad = draw(not_scalar | st.text(max_size=3) | st.sampled_from([10**400, -(10**400)]))
        if datatype == "FP16":
            bad = draw(st.just(bad) | st.sampled_from([1e6, -1e6]))
    values[draw(st.integers(0, len(values) - 1))] = bad
    tensor["data"] = values
    return request, repr(tensor["name"])


def bad_parameters(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    not_scalar = (
        st.none()
        | st.lists(st.integers(), max_size=2)
        | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)
    )
    wrong = draw(
        JSON_VALUES.filter(lambda v: v is not None and not isinstance(v, dict))
        | st.builds(lambda v: {"k": v}, not_scalar | st.sampled_from([math.nan, math.inf]))
        | st.just({"shared_memory_region": "stolen"})
    )
    where = draw(st.sampled_from(["request", "input", "output"]))
    if where == "input":
        i = _index(draw, request)
        request["inputs"][i]["parameters"] = wrong
        return request, f"inputs[{i}].parameters"
    if where == "output":
        names = [t["name"] for t in request["inputs"]]
        request["outputs"] = [{"name": n} for n in names]
        i = draw(st.integers(0, len(names) - 1))
        request["outputs"][i]["parameters"] = wrong
        return request, f"outputs[{i}].parameters"
    request["parameters"] = wrong
    return request, "parameters"


def bad_outputs(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    outputs = [{"name": t["name"]} for t in request["inputs"]]
    i = draw(st.integers(0, len(outputs) - 1))
    kind = draw(st.sampled_from(["outputs", "entry", "name"]))
    if kind == "outputs":
        request["outputs"] = draw(
            JSON_VALUES.filter(lambda v: v is not None and not isinstance(v, list))
        )
        return request, "outputs"
    if kind == "entry":
        outputs[i] = draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict)))
    else:
        outputs[i]["name"] = draw(
            JSON_VALUES.filter(lambda v: not isinstance(v, str)) | st.just("")
        )
    request["outputs"] = outputs
    return request, f"outputs[{i}]"


def bad_id(draw: st.DrawFn, request: dict[str, Any]) -> tuple[Any, str]:
    request["id"] = draw(JSON_VALUES.filter(lambda v: not isinstance(v, str)))
    return request, "id"


MUTATIONS: list[Mutation] = [
    not_an_object,
    bad_inputs,
    input_not_an_object,
    missing_field,
    bad_name,
    twice,
    bad_datatype,
    bad_shape,
    count_mismatch,
    ragged,
    wrong_element,
    bad_parameters,
    bad_outputs,
    bad_id,
]


@st.composite
def broken_bodies(draw: st.DrawFn, mutate: Mutation) -> Broken:
    """A well-formed request with one field broken, wrapped as API Gateway would."""
    request, fragment = mutate(draw, draw(requests()))
    return draw(wrapped(request)), 400, fragment


@st.composite
def broken_events(draw: st.DrawFn, kind: str) -> Broken:
    """A body that is not JSON text at all: truncated, deep, bad base64, other content types."""
    request = draw(requests())
    text = json.dumps(request)
    if kind == "truncated":
        return infer_event(text[: draw(st.integers(0, len(text) - 1))]), 400, "not valid JSON"
    if kind == "deep":
        depth = draw(st.integers(2, 100_000))
        deep = "[" * depth + "]" * depth
        at = draw(st.sampled_from(["body", "data", "shape", "parameters", "outputs", "id"]))
        if at == "body":
            return infer_event(deep), 400, ""
        marker = '"@deep@"'
        if at in {"data", "shape"}:
            request["inputs"][0][at] = "@deep@"
        else:
            request[at] = "@deep@"
        return infer_event(json.dumps(request).replace(marker, deep)), 400, ""
    if kind == "base64":
        encoded = base64.b64encode(text.encode()).decode("ascii")
        position = draw(st.integers(0, len(encoded)))
        junk = draw(st.sampled_from(["!", "*", "é", " ", "\n", "-", "_", "=A"]))
        body = encoded[:position] + junk + encoded[position:]
        return infer_event(body, isBase64Encoded=True), 400, "isBase64Encoded"
    if kind == "not utf-8":
        raw = draw(st.binary(min_size=1)).replace(b"\x00", b"\xff") + b"\xff"
        event = infer_event(base64.b64encode(raw).decode("ascii"), isBase64Encoded=True)
        return event, 400, "not valid JSON"
    payload, content_type = encode_request(request)
    size = int(content_type.rsplit("=", 1)[1])
    if kind == "binary header size":
        # Triton's binary protocol whose header size does not fit its body: a 400.
        header_size, fragment = draw(
            st.sampled_from(
                [
                    ("-1", "json-header-size"),
                    ("x", "json-header-size"),
                    ("", "json-header-size"),
                    ("1e3", "json-header-size"),
                    ("²", "json-header-size"),  # a digit to str.isdigit, not a count
                    ("9" * 40, "json-header-size"),
                    ("0", "json-header-size=0"),
                    (str(len(payload) + 10), "longer than the request body"),
                    (str(size - 1), ""),  # the header cut short: not JSON
                    (str(size + 1), ""),  # a tensor byte in the header: not JSON, or sizes off
                    (None, "needs ;json-header-size=N"),
                ]
            )
        )
        event = infer_event(base64.b64encode(payload).decode("ascii"), isBase64Encoded=True)
        event["headers"]["content-type"] = (
            BINARY_CONTENT_TYPE
            if header_size is None
            else f"{BINARY_CONTENT_TYPE};json-header-size={header_size}"
        )
        return event, 400, fragment
    # A content type the front door does not take.
    other = draw(
        st.sampled_from(
            [
                "application/octet-stream",
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/jsonl",
                "",
            ]
        )
    )
    if draw(st.booleans()):
        event = infer_event(base64.b64encode(payload).decode("ascii"), isBase64Encoded=True)
    else:
        event = infer_event(text)
    event["headers"]["content-type"] = other
    return event, 415, "content-type"


@pytest.mark.parametrize(
    "broken",
    [
        *(pytest.param(broken_bodies(mutate), id=mutate.__name__) for mutate in MUTATIONS),
        *(
            pytest.param(broken_events(kind), id=kind)
            for kind in (
                "truncated",
                "deep",
                "base64",
                "not utf-8",
                "binary header size",
                "content type",
            )
        ),
    ],
)
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_malformed_requests_are_4xx_naming_the_field_and_never_reach_the_endpoint(
    broken: st.SearchStrategy[Broken], data: st.DataObject
) -> None:
    event, expected, fragment = data.draw(broken)
    status, body, runtime = answer(event)

    assert (status, runtime.calls) == (expected, []), body
    assert fragment in body["error"], body


@SETTINGS
@given(
    body=st.none() | st.text() | JSON_VALUES.map(json.dumps),
    base64_flag=st.none() | st.booleans() | st.integers(),
    headers=st.none() | st.dictionaries(st.sampled_from(["content-type", "host"]), st.text()),
)
def test_any_event_body_gets_an_answer_below_500(
    body: str | None, base64_flag: Any, headers: dict[str, str] | None
) -> None:
    event = infer_event(body, isBase64Encoded=base64_flag, headers=headers)  # type: ignore[arg-type]
    status, answer_body, runtime = answer(event)
    assert 400 <= status < 500 and runtime.calls == [], answer_body
    assert answer_body["error"]


# -- the findings, one test each, against a real botocore client ---------------------

GOOD = {
    "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4]]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]},
    ]
}


def _with(**changes: Any) -> str:
    return json.dumps({**GOOD, **changes})


def _ragged(data: Any, shape: list[int] | None = None) -> str:
    tensor = {**GOOD["inputs"][0], "data": data, "shape": shape or [2, 2]}
    return _with(inputs=[tensor])


def _runtime_client() -> Any:
    return boto3.client(
        "sagemaker-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def stubbed_runtime() -> Iterator[Any]:
    """A real sagemaker-runtime client whose Stubber has nothing queued: a call would fail."""
    client = _runtime_client()
    with Stubber(client) as stubber:
        yield client
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("event", "status", "message"),
    [
        pytest.param(
            infer_event("[" * 100_000 + "]" * 100_000), 400, "nests too deeply", id="100k-deep"
        ),
        pytest.param(
            infer_event(_with(parameters=["binary_data_output"])),
            400,
            "parameters must be an object",
            id="parameters-list",
        ),
        pytest.param(
            infer_event(_with(outputs=[5])), 400, "outputs[0] must be an object", id="outputs-5"
        ),
        pytest.param(
            infer_event("!!not base64!!", isBase64Encoded=True),
            400,
            "isBase64Encoded but is not valid base64",
            id="bad-base64",
        ),
        pytest.param(
            infer_event(base64.b64encode(_with().encode())[:-1].decode(), isBase64Encoded=True),
            400,
            "not valid base64",
            id="truncated-base64",
        ),
        pytest.param(
            infer_event(_ragged([[1, 2, 3], [4]])), 400, "dimension 1 needs lists of 2", id="ragged"
        ),
        pytest.param(
            infer_event(_ragged([[1, 2], [3, 4]], [4, 1])),
            400,
            "dimension 0 needs lists of 4",
            id="nested-unlike-shape",
        ),
        pytest.param(
            infer_event(_ragged([[1, 2], 3, [4]], [4])), 400, "nests unlike shape", id="mixed"
        ),
        pytest.param(
            infer_event(_ragged([1, 2, 3, 4], [True, 4])),
            400,
            "inputs[0].shape",
            id="bool-dimension",
        ),
        pytest.param(
            infer_event(_with(inputs=[GOOD["inputs"][0], GOOD["inputs"][0]])),
            400,
            "inputs[1].name: input 'INPUT0' is given twice",
            id="twice",
        ),
        pytest.param(
            infer_event(
                '{"inputs": [{"name": "X", "datatype": "BYTES", "shape": [1],'
                ' "data": ["\\ud800"]}]}'
            ),
            400,
            "not Unicode",
            id="lone-surrogate",
        ),
        pytest.param(
            infer_event(_ragged(["1", "2", "3", "4"]).replace("FP32", "BF16")),
            400,
            "BF16 elements must be numbers",
            id="bf16-strings",
        ),
        pytest.param(
            infer_event(_with(parameters={"shared_memory_region": "input_data"})),
            400,
            "takes no shared memory",
            id="shared-memory",
        ),
        pytest.param(infer_event(_with(id=7)), 400, "id must be a string", id="id-number"),
        pytest.param(
            {
                **infer_event(_with()),
                "headers": {"content-type": f"{BINARY_CONTENT_TYPE};json-header-size=999999"},
            },
            400,
            "json-header-size=999999 is longer than the request body",
            id="binary-protocol-header-past-the-body",
        ),
        pytest.param(
            {**infer_event(_with()), "headers": {"Content-Type": "text/plain"}},
            415,
            "content-type 'text/plain'",
            id="header-name-case",
        ),
        pytest.param(
            infer_event(_with(inputs=[{**GOOD["inputs"][0], "data": [0.0] * 1_000_000}])),
            400,
            "holds 4 elements, data has 1000000",
            id="huge",
        ),
    ],
)
def test_each_finding_is_answered_4xx_without_calling_sagemaker(
    stubbed_runtime: Any, event: dict[str, Any], status: int, message: str
) -> None:
    response = door(stubbed_runtime).handle(event)
    error = json.loads(response["body"])["error"]
    assert response["statusCode"] == status and message in error, error


def test_the_stubbed_client_does_see_a_well_formed_request() -> None:
    """The control for the test above: the same client and door call SageMaker once."""
    document = json.loads(_with(outputs=[{"name": "INPUT1"}]))
    payload, content_type = encode_request(document)
    reply = EchoRuntimeStandIn().invoke_endpoint(
        Body=payload, ContentType=content_type, TargetModel=TARGET
    )
    raw = reply["Body"].read()
    client = _runtime_client()
    with Stubber(client) as stubber:
        stubber.add_response(
            "invoke_endpoint",
            {"Body": StreamingBody(io.BytesIO(raw), len(raw)), "ContentType": reply["ContentType"]},
            {
                "EndpointName": "deploy-triton",
                "TargetModel": TARGET,
                "ContentType": content_type,
                "Body": payload,
            },
        )
        response = door(client).handle(infer_event(json.dumps(document)))
        stubber.assert_no_pending_responses()
    assert response["statusCode"] == 200, response["body"]
    (output,) = json.loads(response["body"])["outputs"]
    assert output == {"name": "INPUT1", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]}
