"""The front door's fast tensor packing gives `array`'s bytes and errors, value for value.

JSON tensors are packed with one `struct.Struct` and fall back to `array`
where struct refuses; output floats skip the non-finite sum unless an
element's exponent byte allows a NaN or infinity. Both are shortcuts: these
tests hold them to the plain algorithm (`array` packing, the sum over every
output) on the values where the shortcuts could differ — floats too large for
FP32, integers out of range, wrong element types, NaN and infinities at any
position, and finite values whose high byte looks like one.
"""

from __future__ import annotations

import array
import math
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy_handlers.front_door.binary import TensorError, decode_tensor, encode_tensor

CODES = {
    "UINT8": "B",
    "UINT16": "H",
    "UINT32": "I",
    "UINT64": "Q",
    "INT8": "b",
    "INT16": "h",
    "INT32": "i",
    "INT64": "q",
    "FP32": "f",
    "FP64": "d",
}
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ELEMENTS = (
    st.floats()
    | st.integers()
    | st.integers(-(2**65), 2**65)
    | st.booleans()
    | st.sampled_from([3.4028235e38, 3.4028236e38, 1e39, -1e300, 2**128, 10**400, "1", None])
)


def array_packed(datatype: str, values: list[Any]) -> tuple[str, Any]:
    """What `array` alone makes of the values (the packing before the shortcut)."""
    try:
        packed = array.array(CODES[datatype], values)
    except (TypeError, OverflowError) as exc:
        return "error", f"input 'x': data does not fit {datatype}: {exc}"
    return "ok", packed.tobytes()


def packed(datatype: str, values: list[Any]) -> tuple[str, Any]:
    try:
        return "ok", encode_tensor("x", datatype, [len(values)], values)
    except TensorError as exc:
        return "error", str(exc)


@SETTINGS
@given(datatype=st.sampled_from(sorted(CODES)), values=st.lists(ELEMENTS, min_size=1, max_size=6))
def test_packing_matches_array_for_any_elements(datatype: str, values: list[Any]) -> None:
    assert packed(datatype, values) == array_packed(datatype, values)


def test_a_float_too_large_for_fp32_packs_as_infinity_as_before() -> None:
    raw = encode_tensor("x", "FP32", [3], [1.0, 1e39, -1e39])
    assert struct.unpack("<3f", raw) == (1.0, math.inf, -math.inf)


def summed(datatype: str, raw: bytes) -> list[Any]:
    """Output data as the plain algorithm gives it: every element, non-finite ones as strings."""
    fmt = {"FP32": "f", "FP64": "d"}[datatype]
    values = list(struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw))
    return [v if math.isfinite(v) else str(v) for v in values]


SPECIAL = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.5, 2.0**127, -(2.0**127)]


@pytest.mark.parametrize(("datatype", "fmt"), [("FP32", "f"), ("FP64", "d")])
@SETTINGS
@given(data=st.data())
def test_non_finite_outputs_become_strings_wherever_they_are(
    datatype: str, fmt: str, data: st.DataObject
) -> None:
    floats = st.floats(width=32) if fmt == "f" else st.floats()
    values = data.draw(st.lists(floats | st.sampled_from(SPECIAL), min_size=1, max_size=40))
    raw = struct.pack(f"<{len(values)}{fmt}", *values)
    got, encoding = decode_tensor(datatype, [len(values)], raw)
    assert encoding is None
    assert repr(got) == repr(summed(datatype, raw))


def test_finite_outputs_that_look_non_finite_stay_numbers() -> None:
    # 2**127 and -(2**127) have the high byte 0x7F / 0xFF of a NaN: the check goes on to the sum.
    values = [2.0**127, -(2.0**127), 3.4028234663852886e38]
    got, _ = decode_tensor("FP32", [3], struct.pack("<3f", *values))
    assert got == values
