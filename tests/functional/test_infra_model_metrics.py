"""Per-model observability in the synthesized stage: Triton's metrics on, SageMaker's
detailed observability, a dashboard section per packaged model; cfn-lint and cdk-nag
clean.

The stage is a GPU multi-model endpoint whose package directory holds a packaged
manifest of two models (what `deploy package` writes), so the CDK app reads the
names from it as `deploy cdk synth` does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.config import load_settings
from deploy.lifecycle.packaged_models import MODELS_CONTEXT, packaged_models
from deploy_infra.synth import synthesize
from tests.functional.test_infra_stacks import nag_rows

pytestmark = [pytest.mark.cdk, pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "manifests" / "040d6bc"
DEPLOY_TOML = """
[default]
region = "us-east-1"
package_dir = "{package_dir}"

[stages.obs]
endpoint_name = "triton-obs"
instance_type = "ml.g5.xlarge"
"""


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Path], list[str]]:
    root = tmp_path_factory.mktemp("obs")
    package_dir = root / "package"
    package_dir.mkdir()
    shutil.copy(FIXTURE / "multi-model.json", package_dir / "manifest.json")
    config = root / "deploy.toml"
    config.write_text(DEPLOY_TOML.format(package_dir=package_dir), encoding="utf-8")
    settings = load_settings(stage="obs", config_file=config)
    models = packaged_models(settings)
    assert len(models) >= 2, models
    return settings, synthesize(settings, root / "cdk.out"), models


def _template(stage: tuple[Any, dict[str, Path], list[str]], component: str) -> dict[str, Any]:
    settings, paths, _ = stage
    loaded: dict[str, Any] = json.loads(
        paths[settings.stack_name(component)].read_text(encoding="utf-8")
    )
    return loaded


def _resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_triton_metrics_and_detailed_observability_are_on(stage: Any) -> None:
    template = _template(stage, "endpoint")
    (model,) = _resources(template, "AWS::SageMaker::Model")
    container = model["PrimaryContainer"]
    assert container["Mode"] == "MultiModel"
    assert container["Environment"] == {"SAGEMAKER_TRITON_ALLOW_METRICS": "true"}
    (config,) = _resources(template, "AWS::SageMaker::EndpointConfig")
    assert config["MetricsConfig"] == {"EnableDetailedObservability": True}


def test_the_dashboard_has_a_section_per_packaged_model(stage: Any) -> None:
    settings, _, models = stage
    (dashboard,) = _resources(_template(stage, "endpoint"), "AWS::CloudWatch::Dashboard")
    body = dashboard["DashboardBody"]
    text = body if isinstance(body, str) else json.dumps(body)
    # The body is a Fn::Join of strings and tokens: join the literal parts back.
    if not isinstance(body, str):
        parts = body["Fn::Join"][1]
        text = "".join(part if isinstance(part, str) else "${token}" for part in parts)
    document = json.loads(text)
    per_model: dict[str, dict[str, list[list[Any]]]] = {}
    for widget in document["widgets"]:
        properties = widget["properties"]
        if widget["type"] == "text":
            continue
        title = properties.get("title", "")
        name, _, kind = title.partition(": ")
        if name in models:
            per_model.setdefault(name, {})[kind] = properties["metrics"]
    assert sorted(per_model) == models
    for name in models:
        graphs = per_model[name]
        assert sorted(graphs) == ["errors", "latency (ms)", "requests"]

        def described(
            kind: str, graphs: dict[str, list[list[Any]]] = graphs, name: str = name
        ) -> set[Any]:
            found = set()
            for metric in graphs[kind]:
                namespace, metric_name, *dims = [m for m in metric if not isinstance(m, dict)]
                options = next((m for m in metric if isinstance(m, dict)), {})
                assert namespace == "Deploy/Models"
                assert dict(zip(dims[::2], dims[1::2], strict=True)) == {
                    "Endpoint": settings.endpoint_name,
                    "Model": name,
                }
                found.add((metric_name, options.get("stat")))
            return found

        assert described("requests") == {("Requests", "Sum")}
        assert described("latency (ms)") == {("Latency", "p50"), ("Latency", "p99")}
        assert described("errors") == {
            ("ClientErrors", "Sum"),
            ("ModelErrors", "Sum"),
            ("Throttles", "Sum"),
        }


def test_the_stage_is_cfn_lint_and_cdk_nag_clean(stage: Any) -> None:
    _, paths, _ = stage
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--format",
            "json",
            *map(str, paths.values()),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    assert [f for f in findings if f["Level"] == "Error"] == []
    outdir = next(iter(paths.values())).parent
    rows = nag_rows(outdir)
    assert rows, "cdk-nag reports are written"
    assert [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}] == []


def test_deploy_up_hands_the_app_the_names_and_keys_its_cache_on_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app reads no deploy.toml under `deploy up`: the names travel as context, and a
    model added re-synthesizes (a new cache key) instead of reusing the old dashboard."""
    from deploy.lifecycle import templates

    package_dir = tmp_path / "package"
    package_dir.mkdir()
    document = json.loads((FIXTURE / "multi-model.json").read_text(encoding="utf-8"))
    (package_dir / "manifest.json").write_text(json.dumps(document), encoding="utf-8")
    config = tmp_path / "deploy.toml"
    config.write_text(DEPLOY_TOML.format(package_dir=package_dir), encoding="utf-8")
    settings = load_settings(stage="obs", config_file=config)
    seen: list[dict[str, Any]] = []

    def run(command: list[str], **kwargs: Any) -> Any:
        seen.append(json.loads(kwargs["env"]["CDK_CONTEXT_JSON"]))
        raise OSError("stop here: only the context is under test")

    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(Exception, match="stop here"):
        templates._cdk_synthesize(settings, tmp_path / "out")
    assert json.loads(seen[0][MODELS_CONTEXT]) == sorted(document["models"])

    keys = []
    for _ in range(2):
        made: list[Path] = []

        def fake(settings: Any, outdir: Path, made: list[Path] = made) -> dict[str, Path]:
            made.append(outdir)
            outdir.mkdir(parents=True)
            return {}

        templates.stage_templates(settings, cache_dir=tmp_path / "cache", synthesize=fake)
        keys.append(made)
        first = next(iter(document["models"].values()))
        document["models"]["added"] = {**first, "name": "added"}
        (package_dir / "manifest.json").write_text(json.dumps(document), encoding="utf-8")
    assert keys[0] and keys[1] and keys[0][0] != keys[1][0]
