"""What `infer` returns: output arrays by name, plus classification helpers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from deploy.client._errors import ResponseFormatError


@dataclass(frozen=True, slots=True)
class Classification:
    """One entry of Triton's classification extension (`score:index[:label]`)."""

    score: float
    index: int
    label: str | None

    def __iter__(self) -> Iterator[Any]:
        """Unpacks as `score, index, label`."""
        return iter((self.score, self.index, self.label))


class InferResult(Mapping[str, np.ndarray[Any, Any]]):
    """Output arrays by name.

    Zero-copy: an output of a fixed-size datatype (every one but BYTES) is a
    numpy array viewing the response body as it was read from the socket
    (`np.frombuffer`), never copied. These arrays are read-only (writing
    raises `ValueError: assignment destination is read-only`); take
    `np.array(out)` or `out.copy()` for one to change. A view keeps the whole
    response body alive while it lives, and is unaligned where the body puts
    the tensor at an offset its itemsize does not divide (numpy reads it all
    the same). BYTES outputs are object arrays of new `bytes`.

    `model` is the name the caller used, `target_model` what was sent to the
    endpoint (None for single-model hosting), `parameters` the response's own.
    """

    def __init__(
        self,
        outputs: dict[str, np.ndarray[Any, Any]],
        *,
        datatypes: Mapping[str, str],
        model: str,
        target_model: str | None,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        self._outputs = outputs
        self.datatypes = dict(datatypes)
        self.model = model
        self.target_model = target_model
        self.parameters = dict(parameters or {})

    def __getitem__(self, name: str) -> np.ndarray[Any, Any]:
        try:
            return self._outputs[name]
        except KeyError:
            known = ", ".join(self._outputs) or "none"
            raise KeyError(f"no output {name!r} (outputs: {known})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._outputs)

    def __len__(self) -> int:
        return len(self._outputs)

    def __repr__(self) -> str:
        shapes = ", ".join(
            f"{name}: {self.datatypes.get(name)}{list(array.shape)}"
            for name, array in self._outputs.items()
        )
        return f"InferResult(model={self.model!r}, {shapes})"

    def classes(self, name: str) -> list[list[Classification]]:
        """Parse a classification output (requested with `class_count=k`).

        One list of `k` entries per row: a single row for an unbatched output,
        one per batch item otherwise.
        """
        array = self[name]
        rows = array.reshape(1, -1) if array.ndim <= 1 else array.reshape(-1, array.shape[-1])
        return [[parse_classification(item, name) for item in row] for row in rows]


def parse_classification(item: Any, output: str) -> Classification:
    """`b"0.93:3:cat"` → Classification(0.93, 3, "cat"); the label is optional."""
    where = f"output {output!r}"
    if isinstance(item, bytes):
        try:
            text = item.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ResponseFormatError("classification is not UTF-8", where=where) from exc
    elif isinstance(item, str):
        text = item
    else:
        raise ResponseFormatError(
            f"is not a classification output (holds {type(item).__name__})",
            where=where,
            fix="request it with class_count=k",
        )
    fields = text.split(":", 2)
    try:
        score, index = float(fields[0]), int(fields[1])
    except (ValueError, IndexError) as exc:
        raise ResponseFormatError(
            f"classification {text!r} is not score:index[:label]", where=where
        ) from exc
    return Classification(score, index, fields[2] if len(fields) == 3 else None)
