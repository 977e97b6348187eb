"""The real tritonserver as an oracle: configs it refuses to load also fail `deploy validate`.

Each case folder is loaded the way SageMaker loads an archive (extracted to
`<root>/<hash>/model`, then `POST /models` on the SageMaker frontend).
Placeholder `model.py` files are replaced by a working identity model so that
only the config decides.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from deploy.validation import validate_repository
from tests.functional.repository_triton import (
    TritonProcess,
    mme_invoke,
    mme_load,
    shared_tritonserver,
)

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
    # Rules ported from core's model_config_utils.cc and ensemble_utils.cc.
    "priority_default_level",
    "priority_queue_policy_level",
    "preserve_ordering_priorities",
    "preserve_ordering_delay",
    "preferred_without_batching",
    "control_tensor_two_kinds",
    "corrid_values",
    "sequence_oldest_preferred",
    "sequence_direct_utilization",
    "sequence_response_cache",
    "decoupled_response_cache",
    "model_metrics_incomplete",
    "shape_tensor_not_tensorrt",
    "non_linear_io_not_tensorrt",
    "format_needs_three_dims",
    "profile_not_tensorrt",
    "ensemble_scheduling_not_ensemble",
    "reshape_empty_without_batching",
    "dims_empty_with_reshape",
    "reshape_variable_trunks",
    "batch_output_target_twice",
    "batch_input_int64",
    "ensemble_unused_input",
    "ensemble_unused_tensor",
    "ensemble_optimization_warmup",
    "ensemble_incomplete_step",
    "ensemble_decoupled_branches",
    "env_relative",
    "env_missing",
    # This machine has no GPU, as a CPU instance (the cases run with ml.m5.xlarge).
    "kind_gpu_python_cpu_instance",
    "kind_auto_gpus_cpu_instance",
    "gpus_on_cpu_group",
    # Python models.
    "python_syntax_error",
    "autocomplete_raises",
]

# Configs Triton loads that deploy validate once refused: now warnings at most.
ACCEPTED = [
    ("invalid", "name_differs"),
    ("invalid", "instance_negative_count"),
    ("invalid", "control_counts"),
    ("invalid", "batch_input_no_target"),
    ("invalid", "dynamic_no_batch"),
    ("invalid", "decoupled"),
    ("invalid", "ensemble_decoupled"),
    ("invalid", "ensemble_step_writes_input"),
    ("accepted", "python_any_platform"),
    ("accepted", "ensemble_non_batching_step"),
    ("accepted", "ensemble_dims_without_batch_dimension"),
]
# Configs Triton loads and then refuses every request with: errors too.
UNSERVABLE = [("duplicate_input", "expected 2 inputs but got 1 inputs")]
# Configs with duplicate names that Triton loads and serves: warnings at most.
SERVED = ["duplicate_input_optional", "duplicate_output"]
PYTHON_EXAMPLES = FIXTURES / "python_backend_examples"

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
    instance = json.loads((case_root / "expected.json").read_text())["instance_type"]
    assert validate_repository(case_root, instance_type=instance).errors


@pytest.mark.parametrize(("group", "case"), ACCEPTED)
def test_config_triton_accepts_gets_no_error(
    group: str, case: str, mme_server: TritonProcess, tmp_path: Path
) -> None:
    case_root = FIXTURES / group / case
    status, body = mme_load(mme_server, stage(case_root, tmp_path), f"oracle-ok-{case}.tar.gz")
    assert status == 200, body
    assert validate_repository(case_root).errors == []


def request_x() -> list[object]:
    import numpy as np
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput("X", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), np.float32), binary_data=True)
    return [tensor]


@pytest.mark.parametrize(("case", "refusal"), UNSERVABLE)
def test_config_triton_loads_but_never_serves_fails_validation(
    case: str, refusal: str, mme_server: TritonProcess, tmp_path: Path
) -> None:
    case_root = FIXTURES / "invalid" / case
    target = f"oracle-unservable-{case}.tar.gz"
    status, body = mme_load(mme_server, stage(case_root, tmp_path), target)
    assert status == 200, body
    with pytest.raises(urllib.error.HTTPError) as caught:
        mme_invoke(mme_server, case, target, request_x())
    assert caught.value.code == 400
    assert refusal in caught.value.read().decode()
    assert validate_repository(case_root).errors


@pytest.mark.parametrize("case", SERVED)
def test_duplicate_names_triton_serves_get_no_error(
    case: str, mme_server: TritonProcess, tmp_path: Path
) -> None:
    case_root = FIXTURES / "invalid" / case
    target = f"oracle-served-{case}.tar.gz"
    status, body = mme_load(mme_server, stage(case_root, tmp_path), target)
    assert status == 200, body
    result: Any = mme_invoke(mme_server, case, target, request_x())
    assert result.as_numpy("Y").tolist() == [[1.0] * 4]
    report = validate_repository(case_root)
    assert report.errors == [] and report.warnings


@pytest.mark.parametrize("model", sorted(p.name for p in PYTHON_EXAMPLES.iterdir() if p.is_dir()))
def test_python_backend_examples_load_and_get_no_error(
    model: str, mme_server: TritonProcess, tmp_path: Path
) -> None:
    # Each archive holds one model, as deploy package writes them; the hook of
    # the auto_complete examples runs in Triton, as on SageMaker.
    target = tmp_path / f"example-{model}" / "model"
    shutil.copytree(PYTHON_EXAMPLES / model, target / model)
    status, body = mme_load(mme_server, target, f"oracle-example-{model}.tar.gz")
    assert status == 200, body
    assert [d for d in validate_repository(PYTHON_EXAMPLES).errors if d.model == model] == []


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
