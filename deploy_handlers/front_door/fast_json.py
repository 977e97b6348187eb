"""The JSON library of the front door's request path: msgspec, packaged with the Lambda.

A 1 MB FP32 tensor is 5.3 MB of KServe v2 JSON text. On one core the
standard library takes about 60 ms to parse it and 140 ms to write the
answer; orjson 15 and 9 ms; msgspec 11 and 9 ms, and 3 to 4 ms less for the
whole request in the handler (`bench/front_door.py` measures the three side
by side: docs/measurements/front_door.json). Its wheel built for the Lambda's
runtime and architecture is installed into the function's asset at synth
(`deploy_infra/lambda_bundle.py`).

Where msgspec refuses a document the standard library takes (NaN and
Infinity, which Python clients write for non-finite floats), `loads` hands it
to `json`, so such requests mean what they meant before and a malformed one
gets `json`'s message: only a request that is not standard JSON pays the
second parse. Like `json`, msgspec reads integers of any size; it writes NaN
as null (non-finite outputs are strings before they get here).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

LIBRARY = f"msgspec {msgspec.__version__}"
DECODER = msgspec.json.Decoder()
ENCODER = msgspec.json.Encoder()


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The document; `json.JSONDecodeError` (a ValueError) for what `json` refuses too."""
    try:
        return DECODER.decode(data)
    except msgspec.DecodeError:
        return json.loads(bytes(data) if isinstance(data, memoryview | bytearray) else data)


def dumps(document: Any) -> bytes:
    """Compact UTF-8 JSON (no spaces), as the answers go out."""
    return ENCODER.encode(document)
