"""Built-in validation rules (Triton's own checks, re-implemented offline)."""

from __future__ import annotations
