"""The inf1 (single-model) stages' pure parts: model diff, archive key, plan,
published manifest, tool checks and the CDK CLI command."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from deploy.client.manifest import parse
from deploy.config import load_settings
from deploy.errors import ConfigError
from deploy.hosting import StagePackage, StoredFile, router
from deploy.hosting.single_model import FOLDER, MODE
from deploy.lifecycle.cdk_cli import (
    ContainerEngineError,
    deploy_command,
    engine_problem,
    require_tools,
)
from deploy.lifecycle.plan import ArchiveChange, InfraChange, Plan
from deploy.lifecycle.prices import estimate
from deploy.lifecycle.stages import validate

ROOT = Path(__file__).resolve().parents[2]


def manifest(**digests: str) -> dict[str, Any]:
    return {
        "format": 1,
        "hosting": "single-model",
        "router": "router",
        "models": {
            name: {"name": name, "target_model": name, "source_digest": digest, "bytes": 10}
            for name, digest in digests.items()
        },
        "archive": {"key": "model.tar.gz", "sha256": "ab" * 32, "bytes": 99},
    }


def test_models_are_diffed_by_their_folder_digests() -> None:
    local = manifest(a="1", b="2", c="3")
    published = manifest(a="1", b="old", d="4")
    changes = {c.name: (c.action, c.upload) for c in router.diff_models(local, published)}
    assert changes == {
        "a": ("unchanged", False),
        "b": ("changed", False),
        "c": ("new", False),
        "d": ("removed", False),
    }
    assert {c.action for c in router.diff_models(local, None)} == {"new"}


def test_archive_key_is_content_derived_and_published_relative_to_its_folder(
    tmp_path: Path,
) -> None:
    sha = "0123456789abcdef" + "f" * 48
    key = router.archive_key(FOLDER, sha)
    assert key == "inf1/model-0123456789abcdef.tar.gz"
    document = manifest(a="1")
    document["archive"]["sha256"] = sha
    archive = StoredFile(key, tmp_path / "model.tar.gz", sha, 99)
    package = StagePackage(
        parse(document, "manifest.json"), document, tmp_path / "manifest.json", (archive,), archive
    )
    published = json.loads(MODE.layout.published_document(package))
    assert published["archive"] == {
        "key": "model-0123456789abcdef.tar.gz",
        "sha256": sha,
        "bytes": 99,
    }
    assert MODE.layout.archive_key(published) == "inf1/model-0123456789abcdef.tar.gz"
    assert document["archive"]["key"] == "model.tar.gz"  # the local manifest is left alone


def _plan(archive: ArchiveChange, actions: dict[str, str] | None = None) -> Plan:
    local = manifest(a="1")
    published = manifest(a="1" if not actions else "0")
    return Plan(
        stage="s",
        provider="aws",
        endpoint="e",
        models=router.diff_models(local, published),
        infra_action="none",
        infra=(),
        resources=(),
        cost=None,
        hosting="single-model",
        archive=archive,
    )


def test_a_new_archive_key_is_a_manifest_change_and_smokes_every_model() -> None:
    same = ArchiveChange("inf1/model-1.tar.gz", "inf1/model-1.tar.gz", "x", 5, upload=False)
    moved = ArchiveChange("inf1/model-2.tar.gz", "inf1/model-1.tar.gz", "y", 5, upload=True)

    def smoked(plan: Plan) -> list[str]:
        return [c.name for c in MODE.layout.smoke_changes(plan.models, deployed=not plan.empty)]

    assert _plan(same).empty and smoked(_plan(same)) == []
    assert not _plan(moved).empty and _plan(moved).manifest_changes
    assert smoked(_plan(moved)) == ["a"]
    document = _plan(moved).to_dict()
    assert document["hosting"] == "single-model"
    assert document["archive"]["key"] == "inf1/model-2.tar.gz"
    assert document["upload_bytes"] == 5


def test_multi_model_plans_keep_their_json_shape() -> None:
    plan = Plan("s", "aws", "e", (), "none", (), (), None)
    assert "hosting" not in plan.to_dict() and "archive" not in plan.to_dict()


def test_rendered_plan_names_the_single_model_endpoint_and_the_archive() -> None:
    from rich.console import Console

    archive = ArchiveChange("inf1/model-2.tar.gz", None, "y", 2048, upload=True)
    plan = Plan(
        stage="s",
        provider="aws",
        endpoint="e",
        models=router.diff_models(manifest(a="1"), None),
        infra_action="create",
        infra=(InfraChange("instance_type", None, "ml.inf1.xlarge"),),
        resources=(),
        cost=estimate("us-east-1", "ml.inf1.xlarge", min_instances=1, max_instances=2),
        hosting="single-model",
        archive=archive,
    )
    from deploy.lifecycle.render import render_plan

    buffer = io.StringIO()
    render_plan(plan, Console(file=buffer, width=200))
    text = buffer.getvalue()
    assert "archive (1 model(s) + router): inf1/model-2.tar.gz (new), 2.0 KiB" in text
    assert "to upload: 1 archive, 2.0 KiB" in text
    assert "single-model endpoint on ml.inf1.xlarge, 1-2 instance(s)" in text
    assert "estimated cost: $0.30-0.59/h" in text


def test_validate_accepts_inf1_sizes_and_still_refuses_other_neuron_families(
    tmp_path: Path,
) -> None:
    validate(load_settings(instance_type="ml.inf1.xlarge"), tmp_path, models=False)
    # Not a size SageMaker offers: its own list says so first.
    with pytest.raises(ConfigError, match="not a SageMaker hosting instance type"):
        validate(load_settings(instance_type="ml.inf1.48xlarge"), tmp_path, models=False)
    with pytest.raises(ConfigError, match="cannot host a multi-model endpoint"):
        validate(load_settings(instance_type="ml.inf2.xlarge"), tmp_path, models=False)


def test_a_provider_without_the_stages_hosting_is_refused(tmp_path: Path) -> None:
    from deploy.lifecycle.local_provider import LocalProvider
    from deploy.lifecycle.progress import SilentReporter
    from deploy.lifecycle.up import UpOptions, up

    # The local provider hosts every mode the local endpoint serves without S3.
    settings = load_settings(hosting="async")
    with pytest.raises(ConfigError, match="deploy serve --hosting async") as raised:
        up(
            settings,
            LocalProvider(state_dir=tmp_path),
            repository=tmp_path,
            package_dir=tmp_path,
            options=UpOptions(dry_run=True),
            reporter=SilentReporter(),
        )
    assert raised.value.where == "hosting (--hosting)"


def test_missing_docker_is_named() -> None:
    assert engine_problem("deploy-test-no-such-docker") == (
        "`deploy-test-no-such-docker` is not on PATH"
    )
    with pytest.raises(ContainerEngineError) as raised:
        require_tools(
            root=ROOT,
            stage="prod",
            stacks=["x-prod-endpoint"],
            image="deploy_infra/neuron/Dockerfile",
            engine="deploy-test-no-such-docker",
        )
    error = raised.value
    assert "Docker is needed to build the Neuron image" in error.message
    assert error.where == "stack x-prod-endpoint"
    assert "deploy cdk deploy --all -c stage=prod" in (error.fix or "")


def test_cdk_deploy_command_deploys_the_synthesized_assembly() -> None:
    command = deploy_command(Path("/p/node_modules/.bin/cdk"), Path("/a/cdk.out"), ["s1", "s2"])
    assert command == [
        "/p/node_modules/.bin/cdk",
        "deploy",
        "--app",
        "/a/cdk.out",
        "--require-approval",
        "never",
        "s1",
        "s2",
    ]
