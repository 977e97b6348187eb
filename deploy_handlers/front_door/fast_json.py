"""The JSON library of the front door's request path: orjson, packaged with the Lambda.

A 1 MB FP32 tensor is 5.3 MB of KServe v2 JSON text. The standard library
takes about 60 ms to parse it and 135 ms to write the answer on one core;
orjson about 15 ms and 9 ms (msgspec was as fast; orjson's answers are bytes
ready to send and its wheel is a third of msgspec's). `bench/front_door.py`
measures the three side by side. The wheel built for the Lambda's runtime and
architecture is installed into the function's asset at synth
(`deploy_infra/lambda_bundle.py`).

Where orjson refuses a document the standard library takes (NaN and
Infinity, which Python clients write for non-finite floats; nesting past
1,024 levels), `loads` hands it to `json`, so such requests mean what they
meant before and a malformed one gets `json`'s message: only a request that
is not standard JSON pays the second parse. orjson reads integers past 64 bits
as floats (a 400 all the same once packed into an integer tensor) and writes
NaN as null (non-finite outputs are strings before they get here).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The document; `json.JSONDecodeError` (a ValueError) for what `json` refuses too."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(bytes(data) if isinstance(data, memoryview | bytearray) else data)


def dumps(document: Any) -> bytes:
    """Compact UTF-8 JSON (no spaces), as the answers go out."""
    return orjson.dumps(document)
