"""Golden requests: a model's known inputs and the outputs it must give for them.

A release sends these cases to a new model version before any caller can
reach it, so a version that answers differently never goes live. They live
beside the model's config and are not model content: `deploy package` leaves
`golden/` out of the archive.

Layout, in a model folder::

    <model>/golden/<case>.npz        arrays named input.<NAME> and output.<NAME>
    <model>/golden/<case>.json       {"inputs": [...], "outputs": [...]} in the v2 form
                                     that `deploy invoke` reads and writes:
                                     {"name", "datatype", "shape", "data"} per tensor;
                                     optional "rtol"/"atol" for this case
    <model>/golden/tolerance.json    optional {"rtol": R, "atol": A,
                                     "cases": {"<case>": {"rtol": R, "atol": A}}}

Floating-point outputs match when `|actual - expected| <= atol + rtol * |expected|`
elementwise (numpy's `isclose`; defaults rtol 1e-5, atol 1e-6); every other
datatype must be equal. An output the case does not name is not compared.
BYTES are stored in `.npz` as fixed-width bytes (`S`), as `deploy invoke -o` writes them.

Reading here does no I/O beyond the golden folder and imports numpy lazily.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.errors import RepositoryError

GOLDEN_FOLDER = "golden"
TOLERANCE_FILE = "tolerance.json"
INPUT_PREFIX = "input."
OUTPUT_PREFIX = "output."
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6
CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
FORMAT_HINT = (
    "a golden case is golden/<case>.npz with arrays input.<NAME> and output.<NAME>, or "
    'golden/<case>.json with {"inputs": [...], "outputs": [...]} '
    '({"name", "datatype", "shape", "data"} each)'
)

# v2 datatype -> numpy dtype string (BYTES: object; BF16 compared as float32).
NUMPY_DTYPES: dict[str, str] = {
    "BOOL": "bool",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
    "BF16": "float32",
    "BYTES": "object",
}


class GoldenError(RepositoryError):
    """A golden case cannot be read, or cannot be written."""


@dataclass(frozen=True)
class GoldenCase:
    """One case: inputs to send, the outputs expected back, and how close is equal."""

    name: str
    path: Path
    inputs: dict[str, Any]  # name -> numpy array (BYTES: object array of bytes)
    outputs: dict[str, Any]
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL


@dataclass(frozen=True)
class Mismatch:
    """One output that differs from its expected value."""

    output: str
    message: str  # what differs, in words
    max_abs_diff: float | None = None
    first_index: tuple[int, ...] | None = None
    expected: Any = None  # the first differing values, for the report
    actual: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "message": self.message,
            "max_abs_diff": self.max_abs_diff,
            "first_index": list(self.first_index) if self.first_index is not None else None,
            "expected": self.expected,
            "actual": self.actual,
        }


def golden_folder(model_path: Path) -> Path:
    return model_path / GOLDEN_FOLDER


def case_files(model_path: Path) -> list[Path]:
    """The case files of a model, sorted by name (empty when there is no golden/)."""
    folder = golden_folder(model_path)
    if not folder.is_dir():
        return []
    return sorted(
        path
        for path in folder.iterdir()
        if path.suffix in (".npz", ".json")
        and path.name != TOLERANCE_FILE
        and not path.name.startswith(".")  # a case being written
    )


def load_cases(model_path: Path) -> list[GoldenCase]:
    """Every case of a model; GoldenError names the file, what is wrong and the fix."""
    tolerance = read_tolerance(golden_folder(model_path) / TOLERANCE_FILE)
    return [load_case(path, tolerance) for path in case_files(model_path)]


def load_case(path: Path, tolerance: dict[str, Any] | None = None) -> GoldenCase:
    tolerance = tolerance or {}
    name = path.stem
    per_case = tolerance.get("cases", {}).get(name, {})
    rtol = float(per_case.get("rtol", tolerance.get("rtol", DEFAULT_RTOL)))
    atol = float(per_case.get("atol", tolerance.get("atol", DEFAULT_ATOL)))
    if path.suffix == ".npz":
        inputs, outputs = _read_npz(path)
    else:
        inputs, outputs, rtol, atol = _read_json(path, rtol, atol)
    if not inputs:
        raise GoldenError("the case has no inputs", where=str(path), fix=FORMAT_HINT)
    if not outputs:
        raise GoldenError("the case has no expected outputs", where=str(path), fix=FORMAT_HINT)
    return GoldenCase(name, path, inputs, outputs, rtol, atol)


def read_tolerance(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GoldenError(f"cannot read the tolerance: {exc}", where=str(path)) from exc
    fix = 'write {"rtol": 1e-5, "atol": 1e-6, "cases": {"<case>": {"rtol": ..., "atol": ...}}}'
    if not isinstance(document, dict) or not isinstance(document.get("cases", {}), dict):
        raise GoldenError("expected a JSON object", where=str(path), fix=fix)
    for scope in (document, *document.get("cases", {}).values()):
        if not isinstance(scope, dict):
            raise GoldenError("each case's tolerance must be an object", where=str(path), fix=fix)
        for key in ("rtol", "atol"):
            value = scope.get(key, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise GoldenError(
                    f"{key} must be a number >= 0, not {value!r}", where=str(path), fix=fix
                )
    return document


def _read_npz(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError) as exc:
        raise GoldenError(f"cannot read the case: {exc}", where=str(path)) from exc
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    for key, array in arrays.items():
        if array.dtype.kind == "S":  # BYTES, stored fixed-width
            array = np.array(array.tolist(), dtype=object).reshape(array.shape)
        if key.startswith(INPUT_PREFIX):
            inputs[key[len(INPUT_PREFIX) :]] = array
        elif key.startswith(OUTPUT_PREFIX):
            outputs[key[len(OUTPUT_PREFIX) :]] = array
        else:
            raise GoldenError(
                f"array {key!r} is neither input.<NAME> nor output.<NAME>",
                where=str(path),
                fix=f"rename it to input.{key} or output.{key}",
            )
    return inputs, outputs


def _read_json(
    path: Path, rtol: float, atol: float
) -> tuple[dict[str, Any], dict[str, Any], float, float]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GoldenError(f"cannot read the case: {exc}", where=str(path)) from exc
    if not isinstance(document, dict):
        raise GoldenError("expected a JSON object", where=str(path), fix=FORMAT_HINT)
    tensors = []
    for section in ("inputs", "outputs"):
        entries = document.get(section, [])
        if not isinstance(entries, list):
            raise GoldenError(f"{section} must be a list", where=str(path), fix=FORMAT_HINT)
        tensors.append(
            {
                str(entry.get("name")): _json_array(entry, f"{path}: {section}[{index}]")
                for index, entry in enumerate(entries)
            }
        )
    rtol = float(document.get("rtol", rtol))
    atol = float(document.get("atol", atol))
    return tensors[0], tensors[1], rtol, atol


def _json_array(entry: Any, where: str) -> Any:
    import numpy as np

    if not isinstance(entry, dict) or not {"name", "datatype", "data"} <= entry.keys():
        raise GoldenError("needs name, datatype and data", where=where, fix=FORMAT_HINT)
    datatype = entry["datatype"]
    if datatype not in NUMPY_DTYPES:
        raise GoldenError(
            f"unknown datatype {datatype!r}",
            where=where,
            fix=f"use one of {', '.join(NUMPY_DTYPES)}",
        )
    try:
        data = entry["data"]
        if datatype == "BYTES":
            flat = np.asarray(data, dtype=object).reshape(-1)
            data = [item.encode("utf-8") if isinstance(item, str) else item for item in flat]
        array = np.asarray(data, dtype=NUMPY_DTYPES[datatype])
        if "shape" in entry:
            array = array.reshape(entry["shape"])
    except (TypeError, ValueError, OverflowError) as exc:
        raise GoldenError(
            f"data is not {datatype} of shape {entry.get('shape')}: {exc}", where=where
        ) from exc
    return array


def datatype_of(array: Any) -> str:
    """The v2 datatype a stored array stands for (BYTES for bytes/str/object)."""
    kind = array.dtype.kind
    if kind in "SUO":
        return "BYTES"
    for datatype, name in NUMPY_DTYPES.items():
        if datatype != "BF16" and array.dtype.name == name:
            return datatype
    return str(array.dtype.name).upper()


def compare(case: GoldenCase, actual: dict[str, Any]) -> list[Mismatch]:
    """The expected outputs that `actual` (name -> array) does not match."""
    import numpy as np

    mismatches: list[Mismatch] = []
    for name, expected in case.outputs.items():
        if name not in actual:
            mismatches.append(Mismatch(name, "the model returned no such output"))
            continue
        got = np.asarray(actual[name])
        if got.dtype.kind in "SU":
            got = np.array(
                [v if isinstance(v, bytes) else str(v).encode() for v in got.reshape(-1)],
                dtype=object,
            ).reshape(got.shape)
        if got.shape != expected.shape:
            mismatches.append(
                Mismatch(name, f"shape {list(got.shape)}, expected {list(expected.shape)}")
            )
            continue
        if expected.dtype.kind in "fc" and got.dtype.kind in "fciub":
            close = np.isclose(got, expected, rtol=case.rtol, atol=case.atol, equal_nan=True)
            diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
            max_diff: float | None = float(np.nanmax(diff)) if diff.size else 0.0
        else:
            close = got == expected
            max_diff = None
            if expected.dtype.kind in "iub" and got.dtype.kind in "iub" and got.size:
                max_diff = float(np.max(np.abs(got.astype(np.float64) - expected)))
        if bool(np.all(close)):
            continue
        index = tuple(int(i) for i in np.argwhere(~np.asarray(close))[0])
        mismatches.append(
            Mismatch(
                name,
                f"{int(np.size(close) - np.count_nonzero(close))} of {np.size(close)} values "
                f"differ (rtol {case.rtol:g}, atol {case.atol:g})",
                max_abs_diff=max_diff,
                first_index=index,
                expected=_plain(expected[index]),
                actual=_plain(got[index]),
            )
        )
    return mismatches


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value.item() if hasattr(value, "item") else value


def write_case(
    model_path: Path,
    name: str,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    *,
    force: bool = False,
) -> Path:
    """Write golden/<name>.npz atomically; refuse to replace one unless `force`."""
    import numpy as np

    if not CASE_NAME.match(name) or name == Path(TOLERANCE_FILE).stem:
        raise GoldenError(
            f"{name!r} is not a usable case name",
            where=str(golden_folder(model_path)),
            fix="use letters, digits, '_', '-' and '.', starting with a letter or digit "
            "(and not 'tolerance')",
        )
    folder = golden_folder(model_path)
    path = folder / f"{name}.npz"
    if not force and (path.exists() or (folder / f"{name}.json").exists()):
        raise GoldenError(
            "this golden case exists already",
            where=str(path if path.exists() else folder / f"{name}.json"),
            fix="pass --force to replace it, or choose another name",
        )
    arrays: dict[str, Any] = {}
    for prefix, tensors in ((INPUT_PREFIX, inputs), (OUTPUT_PREFIX, outputs)):
        for tensor_name, array in tensors.items():
            value = np.asarray(array)
            arrays[prefix + tensor_name] = value.astype(bytes) if value.dtype == object else value
    temporary: Path | None = None
    try:
        folder.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "wb", dir=folder, prefix=f".{name}.", suffix=".npz", delete=False
        ) as handle:
            temporary = Path(handle.name)
            np.savez(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        if force:
            temporary.replace(path)
        else:
            os.link(temporary, path)  # fails if the case appeared meanwhile
            temporary.unlink()
        temporary = None
    except FileExistsError:
        raise GoldenError(
            "this golden case exists already",
            where=str(path),
            fix="pass --force to replace it, or choose another name",
        ) from None
    except OSError as exc:
        raise GoldenError(f"cannot write the golden case: {exc}", where=str(path)) from exc
    finally:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
    return path
