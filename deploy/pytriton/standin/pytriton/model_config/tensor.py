"""`Tensor`: one model input or output (`pytriton.model_config.tensor`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Tensor:
    """Name, dtype and shape (without the batch dimension) of an input or output.

    `dtype` defaults to None here (PyTriton requires it) so that `deploy bind`
    can name the model and tensor whose dtype is missing.
    """

    shape: Any
    dtype: Any = None
    name: str | None = None
    optional: bool | None = False

    def __post_init__(self) -> None:
        if isinstance(self.dtype, np.dtype):
            object.__setattr__(self, "dtype", self.dtype.type)
