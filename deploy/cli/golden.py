"""`deploy invoke --record-golden NAME`: save a call's inputs and outputs as a golden case.

The case goes into the model's folder of the repository (`deploy.repository.golden`
holds the format), where `deploy up` sends it to every new version before release.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploy.errors import DeployError

if TYPE_CHECKING:
    from deploy.client import InferResult

# A TargetModel as `deploy package` names it: <model>-<16 hex digits>.tar.gz.
_TARGET = re.compile(r"^(?P<model>.+)-[0-9a-f]{16}\.tar\.gz$")


def record_case(
    model: str,
    name: str,
    inputs: dict[str, Any],
    result: InferResult,
    repository: Path | None,
    *,
    force: bool,
) -> Path:
    """Write golden/NAME.npz in MODEL's folder; the path written."""
    from deploy.config import load_settings
    from deploy.repository.golden import write_case

    match = _TARGET.match(model)
    folder_name = match.group("model") if match else model
    root = repository or load_settings().repository
    folder = root / folder_name
    if not folder.is_dir():
        raise DeployError(
            f"the repository has no model folder {folder_name!r}",
            where=str(root),
            fix="pass --repository with the model repository that holds the model",
        )
    arrays = {key: getattr(value, "data", value) for key, value in inputs.items()}
    return write_case(folder, name, arrays, dict(result.items()), force=force)
