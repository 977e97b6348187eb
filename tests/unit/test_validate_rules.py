"""Every validation rule, each against a bad repository in tests/fixtures/repos/invalid/.

Each fixture folder is a small repository plus `expected.json`: the exact
diagnostics (severity, model, file, field, message, fix) `deploy validate`
must report, and the `--instance` it runs with.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.repository import Model
from deploy.validation import Context, Diagnostic, register_rule, validate_repository, warning
from deploy.validation.instances import gpu_count
from deploy.validation.registry import MODEL_RULES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "repos"
INVALID = sorted(p.name for p in (FIXTURES / "invalid").iterdir() if p.is_dir())
EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"


def relative(diagnostic: Diagnostic, root: Path) -> dict[str, str]:
    found = diagnostic.as_dict()
    if Path(found["file"]).is_relative_to(root):
        found["file"] = Path(found["file"]).relative_to(root).as_posix()
    return found


@pytest.mark.parametrize("case", INVALID)
def test_rule_reports_the_exact_diagnostics(case: str) -> None:
    root = FIXTURES / "invalid" / case
    expected = json.loads((root / "expected.json").read_text())
    report = validate_repository(root, instance_type=expected["instance_type"])
    assert [relative(d, root) for d in report.diagnostics] == expected["diagnostics"]


def test_every_rule_has_a_case() -> None:
    # Guard against a rule list that grows without fixtures: at least 45 cases.
    assert len(INVALID) >= 45
    assert any(
        d["severity"] == "warning"
        for case in INVALID
        for d in json.loads((FIXTURES / "invalid" / case / "expected.json").read_text())[
            "diagnostics"
        ]
    )


def test_valid_configs_from_tritons_documentation_validate_cleanly() -> None:
    report = validate_repository(FIXTURES / "valid_triton_docs")
    assert report.diagnostics == ()
    assert report.models == 8


def test_examples_validate_cleanly_on_cpu_and_gpu_instances() -> None:
    for instance in (None, "ml.m5.xlarge", "ml.g5.xlarge"):
        assert validate_repository(EXAMPLES, instance_type=instance).diagnostics == ()


def test_registered_rule_runs_with_the_instance_type() -> None:
    seen: list[str | None] = []

    def neuron_rule(ctx: Context, model: Model) -> list[Diagnostic]:
        seen.append(ctx.instance_type)
        if ctx.instance_type and ctx.instance_type.startswith("ml.inf1."):
            return [warning(model.name, ctx.file_of(model), "x", "checked", "none")]
        return []

    register_rule(neuron_rule)
    try:
        report = validate_repository(EXAMPLES, instance_type="ml.inf1.xlarge")
        assert "ml.inf1.xlarge" in seen
        assert [d.message for d in report.warnings].count("checked") == 6
    finally:
        MODEL_RULES.remove(neuron_rule)


def test_gpu_counts() -> None:
    assert gpu_count("ml.g5.xlarge") == 1
    assert gpu_count("ml.g5.12xlarge") == 4
    assert gpu_count("ml.p4d.24xlarge") == 8
    assert gpu_count("ml.m5.xlarge") == 0
    assert gpu_count("ml.inf1.6xlarge") == 0
    assert gpu_count("g5.xlarge") is None


def test_cli_exit_codes_and_json() -> None:
    runner = CliRunner()
    bad = FIXTURES / "invalid" / "negative_max_batch"
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 1
    assert "max_batch_size is negative" in result.output
    assert "Traceback" not in result.output
    as_json = runner.invoke(app, ["validate", str(bad), "--json"])
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    assert (document["ok"], document["errors"]) == (False, 1)
    assert document["diagnostics"][0]["field"] == "max_batch_size"
    for warn_only in ("dynamic_no_batch", "name_differs"):
        result = runner.invoke(app, ["validate", str(FIXTURES / "invalid" / warn_only)])
        assert result.exit_code == 0
        assert "warning" in result.output
    missing = runner.invoke(app, ["validate", str(FIXTURES / "nope")])
    assert missing.exit_code == 1


def test_torchscript_inputs_may_use_forward_argument_names(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import warnings

    class Scale(torch.nn.Module):  # type: ignore[misc]
        def forward(self, image):  # type: ignore[no-untyped-def]
            return image * 2

    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.trace(Scale(), torch.zeros(1, 2)), str(version / "model.pt"))
    config = tmp_path / "m" / "config.pbtxt"
    config.write_text(
        'platform: "pytorch_libtorch"\nmax_batch_size: 1\n'
        'input [ { name: "image", data_type: TYPE_FP32, dims: [ 2 ] } ]\n'
        'output [ { name: "OUTPUT__0", data_type: TYPE_FP32, dims: [ 2 ] } ]\n'
    )
    assert validate_repository(tmp_path).diagnostics == ()
    config.write_text(config.read_text().replace('"image"', '"pixels"'))
    (problem,) = validate_repository(tmp_path).diagnostics
    assert (problem.field, problem.severity) == ("input[0].name", "warning")
    assert "(image)" in problem.message


ACCEPTED = sorted(p.name for p in (FIXTURES / "accepted").iterdir() if p.is_dir())
PYTHON_EXAMPLES = FIXTURES / "python_backend_examples"


@pytest.mark.parametrize("case", ACCEPTED)
def test_configs_sagemaker_accepts_get_no_diagnostics(case: str) -> None:
    report = validate_repository(FIXTURES / "accepted" / case)
    assert report.diagnostics == ()


def test_python_backends_published_examples_get_warnings_only() -> None:
    report = validate_repository(PYTHON_EXAMPLES)
    assert report.errors == []
    assert report.models == 5
    found = [
        (d.model, d.file.replace(str(PYTHON_EXAMPLES) + "/", ""), d.field) for d in report.warnings
    ]
    assert found == [
        ("bls_async", "bls_async/1/model.py:102", ""),  # "pytorch": not in the repository
        ("bls_async", "bls_async/1/model.py:102", "parameters[deploy.dependencies]"),  # add_sub
        ("repeat_int32", "repeat_int32/config.pbtxt", "model_transaction_policy.decoupled"),
    ]
    assert 'BLS call to model "pytorch" at model.py:102' in report.warnings[0].message
    assert 'string_value: "add_sub"' in report.warnings[1].fix


def test_declared_and_ensemble_bls_calls_are_not_reported(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(PYTHON_EXAMPLES / "add_sub", tmp_path / "add_sub")
    shutil.copytree(PYTHON_EXAMPLES / "bls_async", tmp_path / "bls_async")
    config = tmp_path / "bls_async" / "config.pbtxt"
    config.write_text(
        config.read_text()
        + 'parameters { key: "deploy.dependencies" value { string_value: "add_sub" } }\n'
    )
    called = [d.message for d in validate_repository(tmp_path).warnings]
    assert len(called) == 1 and '"pytorch"' in called[0]


def test_show_config_prints_the_completed_config() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["validate", str(PYTHON_EXAMPLES), "--show-config"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "batch_auto_complete (auto_complete_config in model.py):" in text
    batch = text.split("batch_auto_complete (", 1)[1].split("bls_async (", 1)[0]
    assert "max_batch_size: 4" in batch and 'name: "OUTPUT1"' in batch
    assert "dynamic_batching {" in batch
    assert "add_sub (config.pbtxt):" in text
    plain = runner.invoke(app, ["validate", str(PYTHON_EXAMPLES)])
    assert "max_batch_size: 4" not in plain.output
    as_json = runner.invoke(app, ["validate", str(PYTHON_EXAMPLES), "--show-config", "--json"])
    configs = {c["model"]: c for c in json.loads(as_json.stdout)["configs"]}
    nobatch = configs["nobatch_auto_complete"]
    assert nobatch["source"] == "auto_complete_config in model.py"
    assert nobatch["config"]["input"][0]["dims"] == [4]
    assert nobatch["config"]["max_batch_size"] == 0


def test_a_hook_that_fails_is_an_error_of_deploy_validate() -> None:
    result = CliRunner().invoke(
        app, ["validate", str(FIXTURES / "invalid" / "autocomplete_raises")]
    )
    assert result.exit_code == 1
    assert "auto_complete_config failed at model.py:8" in result.output
    assert "Traceback" not in result.output


def test_gpu_ids_are_checked_against_the_largest_instance_without_instance() -> None:
    from deploy.validation.instances import MAX_GPUS

    assert MAX_GPUS == 8
    root = FIXTURES / "invalid" / "gpu_beyond_any_instance"
    assert [d.field for d in validate_repository(root).errors] == ["instance_group[0].gpus"]
    assert [
        d.message for d in validate_repository(root, instance_type="ml.g5.48xlarge").errors
    ] == ["GPU 8 does not exist on ml.g5.48xlarge (8 GPU(s))"]
    one_gpu = validate_repository(root, instance_type="ml.g5.xlarge").errors
    assert [d.fix for d in one_gpu] == ["use GPU ids 0..0, or leave gpus out to use all of them"]


def test_a_bls_call_whose_model_name_comes_from_an_input_warns_that_it_cannot_be_checked(
    tmp_path: Path,
) -> None:
    # The shape of python_backend's BLS sync example and model_analyzer's quick-start `bls`
    # model: the callee's name arrives in a request tensor.
    model = tmp_path / "router"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "MODEL_NAME" data_type: TYPE_STRING dims: [1] }]\n'
        'output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]\n'
    )
    (model / "1" / "model.py").write_text(
        "import triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        for request in requests:\n"
        '            name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME")\n'
        "            call = pb_utils.InferenceRequest(\n"
        "                model_name=name.as_numpy()[0].decode(),\n"
        '                requested_output_names=["OUT"],\n'
        "                inputs=[],\n"
        "            )\n"
        "            call.exec()\n"
    )
    (warned,) = validate_repository(tmp_path).warnings
    assert warned.file.endswith("router/1/model.py:8")
    assert "cannot be checked" in warned.message
    assert "deploy.dependencies" in warned.fix
