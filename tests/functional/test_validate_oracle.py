"""The real tritonserver as an oracle: configs it refuses to load also fail `deploy validate`.

Each case folder is loaded the way SageMaker loads an archive (extracted to
`<root>/<hash>/model`, then `POST /models` on the SageMaker frontend).
Placeholder `model.py` files are replaced by a working identity model so that
only the config decides.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deploy.validation import validate_repository
from tests.functional.repository_triton import TritonProcess, mme_load, shared_tritonserver

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "repos"
EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"

IDENTITY_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())
                ]
            )
            for r in requests
        ]
"""

REFUSED = [
    "parse_error",
    "unknown_platform",
    "negative_max_batch",
    "preferred_too_big",
    "dims_zero",
    "reshape_count",
    "missing_data_type",
    "label_missing",
    "no_version",
    "control_two_values",
    "batch_input_source",
    "warmup_unknown_input",
    "ensemble_dtype",
    "ensemble_cycle",
]

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture(scope="session")
def mme_server(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> TritonProcess:
    return shared_tritonserver(pytestconfig, tmp_path_factory, "mme")


def stage(case_root: Path, into: Path) -> Path:
    """Copy a case's model folders to `<into>/<case>/model`, with a working model.py."""
    target = into / case_root.name / "model"
    for folder in sorted(p for p in case_root.iterdir() if p.is_dir()):
        shutil.copytree(folder, target / folder.name)
    for model_py in target.glob("*/1/model.py"):
        if model_py.read_text().startswith("# python model"):
            model_py.write_text(IDENTITY_MODEL)
    return target


@pytest.mark.parametrize("case", REFUSED)
def test_config_triton_refuses_also_fails_validation(
    case: str, mme_server: TritonProcess, tmp_path: Path
) -> None:
    case_root = FIXTURES / "invalid" / case
    status, body = mme_load(mme_server, stage(case_root, tmp_path), f"oracle-{case}.tar.gz")
    assert status == 400, body
    assert validate_repository(case_root).errors


@pytest.mark.parametrize(
    ("root", "model"),
    [(FIXTURES / "valid_triton_docs", "add_sub"), (EXAMPLES, "addsub")],
)
def test_config_triton_loads_validates_cleanly(
    root: Path, model: str, mme_server: TritonProcess, tmp_path: Path
) -> None:
    target = tmp_path / f"ok-{model}" / "model"
    shutil.copytree(root / model, target / model, ignore=shutil.ignore_patterns("__pycache__"))
    status, body = mme_load(mme_server, target, f"oracle-ok-{model}.tar.gz")
    assert status == 200, body
    report = validate_repository(root)
    assert [d for d in report.diagnostics if d.model == model] == []
