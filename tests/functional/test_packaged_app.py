"""`deploy up` synthesizes the packaged CDK app from a folder with no cdk.json, and a
project's own cdk.json (and cdk.context.json) context still reaches the app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.config import load_settings
from deploy.lifecycle.templates import stage_templates

pytestmark = [pytest.mark.cdk, pytest.mark.slow]

ZONES = "availability-zones:account=000000000000:region=us-east-1"


def subnet_zones(templates: dict[str, dict]) -> set[str]:
    (network,) = [t for name, t in templates.items() if name.endswith("-network")]
    return {
        str(resource["Properties"].get("AvailabilityZone"))
        for resource in network["Resources"].values()
        if resource["Type"] == "AWS::EC2::Subnet"
    }


def test_up_synthesizes_in_a_folder_without_cdk_json_and_honours_a_projects_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a project folder with no cdk.json anywhere above it
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    settings = load_settings(stage="pkgapp", endpoint_name="acme", repository=project)
    cache = tmp_path / "templates"
    # WHEN the stage's templates are synthesized, THEN the packaged app (and its pinned
    # context: the offline account's zones) makes them
    plain = stage_templates(settings, cache_dir=cache)
    assert list(plain.templates) == [
        "acme-pkgapp-model-store",
        "acme-pkgapp-network",
        "acme-pkgapp-endpoint",
        "acme-pkgapp-api",
    ]
    assert subnet_zones(plain.templates) == {"us-east-1a", "us-east-1b"}
    # GIVEN the project's own cdk.json with context (what `cdk context` would pin)
    (project / "cdk.json").write_text(
        json.dumps({"app": "python -m deploy_infra.app", "context": {ZONES: ["us-east-1c"]}})
    )
    (project / "cdk.context.json").write_text(json.dumps({ZONES: ["us-east-1d", "us-east-1f"]}))
    # WHEN synthesized again, THEN a new cache entry holds templates with its context
    # (cdk.context.json over cdk.json, as the CDK CLI merges them)
    own = stage_templates(settings, cache_dir=cache)
    assert own.assembly != plain.assembly
    assert subnet_zones(own.templates) == {"us-east-1d", "us-east-1f"}
    assert len(list(cache.iterdir())) == 2
