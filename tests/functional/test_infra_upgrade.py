"""Upgrading the tool replaces none of a user's stateful resources.

GIVEN a stage of each hosting mode, synthesized (real CDK synth, `deploy_infra.synth`)
by a pinned release of the project (BASELINE, extracted from git history) and by
the working tree, THEN every model-store bucket, KMS key, log group and endpoint of
the baseline is in the same stack under the same logical ID, of the same type, and
no property whose change makes CloudFormation replace it (or refuse the update)
differs.

What counts as replacing (`replacing_properties`):
- the resource type's `createOnlyProperties` in the CloudFormation registry schema
  ("can be specified only when the resource is created"; a change replaces it), read
  from cfn-lint's copy of the schemas: S3 BucketName, Logs LogGroupName, SageMaker
  EndpointName, ...
  https://docs.aws.amazon.com/cloudformation-cli/latest/userguide/resource-type-schema.html
- AWS::KMS::Key: KeySpec, KeyUsage, Origin, MultiRegion. The registry lists none, but
  "If you change the value of the KeySpec, KeyUsage, Origin, or MultiRegion properties
  of an existing KMS key, the update request fails" (the key policy itself updates in
  place). https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-kms-key.html
- a new logical ID, or a renamed stack: CloudFormation deletes the old resource and
  creates a new one (the stateful ones here are retained, i.e. orphaned, instead).

Without git history (a shallow clone) this fails and says how to get it: it never skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.cdk, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# main before the hosting redesign of issue 21 (the last release users deploy with).
BASELINE = "040d6bc"
TREES = ("deploy", "deploy_infra", "deploy_handlers")
STATEFUL = ("AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup", "AWS::SageMaker::Endpoint")
KMS_IMMUTABLE = ("KeySpec", "KeyUsage", "Origin", "MultiRegion")

# One stage per hosting mode (and the multi-model one with the API and the async lane,
# so their log groups count too).
DEPLOY_TOML = """
[default]
region = "us-east-1"

[stages.mm]
endpoint_name = "up-mm"
instance_type = "ml.g5.xlarge"
async_lane = true

[stages.mm.infra]
api = true
max_instance_count = 2

[stages.single]
hosting = "single-model"
endpoint_name = "up-single"
instance_type = "ml.g5.xlarge"

[stages.inf1]
endpoint_name = "up-inf1"
instance_type = "ml.inf1.6xlarge"

[stages.asynchronous]
hosting = "async"
endpoint_name = "up-async"
instance_type = "ml.g5.xlarge"

[stages.asynchronous.infra]
min_instance_count = 0
max_instance_count = 2

[stages.sls]
hosting = "serverless"
endpoint_name = "up-sls"
instance_type = "ml.m5.xlarge"

[stages.sls.infra]
serverless_memory_mb = 3072
serverless_max_concurrency = 8
"""
STAGES = ("mm", "single", "inf1", "asynchronous", "sls")

# Run with a tree first on PYTHONPATH: synthesize each stage, write stack → template.
SYNTH = """
import json, sys
from pathlib import Path
from deploy.config import load_settings
from deploy_infra.synth import synthesize

config, out = Path(sys.argv[1]), Path(sys.argv[2])
found = {}
for stage in sys.argv[3:]:
    settings = load_settings(stage=stage, config_file=config)
    paths = synthesize(settings, out / stage, nag=False)
    found[stage] = {name: json.loads(path.read_text()) for name, path in paths.items()}
(out / "templates.json").write_text(json.dumps(found))
"""

Templates = dict[str, dict[str, dict[str, Any]]]  # stage → stack → template


def baseline_tree(into: Path) -> Path:
    """`git archive BASELINE deploy deploy_infra deploy_handlers`, extracted into `into`."""
    archive = into / "baseline.tar"
    with archive.open("wb") as out:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BASELINE, *TREES],
            stdout=out,
            stderr=subprocess.PIPE,
            check=False,
        )
    if done.returncode != 0:
        pytest.fail(
            f"cannot read commit {BASELINE} from the git history of {ROOT}: "
            f"{done.stderr.decode(errors='replace').strip()}. This test compares the stacks "
            f"with that release's: run it in a full clone (`git fetch --unshallow`, or "
            f"actions/checkout with fetch-depth: 0)"
        )
    tree = into / "baseline"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def synthesize_with(tree: Path, config: Path, out: Path) -> subprocess.Popen[str]:
    """Synthesize every stage with `tree`'s deploy, deploy_infra and deploy_handlers."""
    out.mkdir(parents=True)
    environment = {key: value for key, value in os.environ.items() if key != "DEPLOY_CONFIG"}
    environment["PYTHONPATH"] = os.pathsep.join([str(tree), environment.get("PYTHONPATH", "")])
    environment["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
    environment["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] = "1"
    return subprocess.Popen(
        [sys.executable, "-c", SYNTH, str(config), str(out), *STAGES],
        cwd=out,  # no project folder: nothing else lands on sys.path
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def collected(process: subprocess.Popen[str], out: Path, what: str) -> Templates:
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, f"synthesizing with {what} failed:\n{output[-3000:]}"
    loaded: Templates = json.loads((out / "templates.json").read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Templates, Templates]]:
    root = tmp_path_factory.mktemp("upgrade")
    config = root / "deploy.toml"
    config.write_text(DEPLOY_TOML, encoding="utf-8")
    old = baseline_tree(root)
    before = synthesize_with(old, config, root / "before")
    after = synthesize_with(ROOT, config, root / "after")
    yield (
        collected(before, root / "before", f"commit {BASELINE}"),
        collected(after, root / "after", "the working tree"),
    )


def replacing_properties(resource_type: str) -> tuple[str, ...]:
    """Properties whose change replaces a resource of `resource_type` (or fails the update)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
    create_only = [
        pointer.removeprefix("/properties/") for pointer in schema.get("createOnlyProperties", [])
    ]
    extra = KMS_IMMUTABLE if resource_type == "AWS::KMS::Key" else ()
    return tuple(dict.fromkeys([*create_only, *extra]))


def replacements(before: Templates, after: Templates) -> list[str]:
    """Each stateful resource of `before` that `after` would replace, and why."""
    found: list[str] = []
    for stage, stacks in before.items():
        for stack, template in stacks.items():
            new = after.get(stage, {}).get(stack)
            for logical_id, resource in template.get("Resources", {}).items():
                kind = resource.get("Type")
                if kind not in STATEFUL:
                    continue
                where = f"{stage}: {stack} {logical_id} ({kind})"
                if new is None:
                    found.append(f"{where}: its stack is gone")
                    continue
                moved = new.get("Resources", {}).get(logical_id)
                if moved is None or moved.get("Type") != kind:
                    found.append(f"{where}: no {kind} under this logical ID any more")
                    continue
                old_props = resource.get("Properties", {})
                new_props = moved.get("Properties", {})
                for name in replacing_properties(kind):
                    if old_props.get(name) != new_props.get(name):
                        found.append(
                            f"{where}: {name} {old_props.get(name)!r} -> {new_props.get(name)!r}"
                        )
    return found


def count(templates: Templates, kind: str) -> int:
    return sum(
        1
        for stacks in templates.values()
        for template in stacks.values()
        for resource in template.get("Resources", {}).values()
        if resource.get("Type") == kind
    )


def test_the_baseline_has_each_kind_of_stateful_resource_to_compare(
    synthesized: tuple[Templates, Templates],
) -> None:
    before, _ = synthesized
    assert set(before) == set(STAGES)
    for kind in STATEFUL:
        assert count(before, kind) >= 1, kind
    # Every mode has its store's bucket and key and its endpoint.
    for stage, stacks in before.items():
        kinds = {r.get("Type") for t in stacks.values() for r in t.get("Resources", {}).values()}
        assert {"AWS::S3::Bucket", "AWS::KMS::Key", "AWS::SageMaker::Endpoint"} <= kinds, stage


def test_upgrading_replaces_no_bucket_key_log_group_or_endpoint(
    synthesized: tuple[Templates, Templates],
) -> None:
    before, after = synthesized
    assert replacements(before, after) == []


def test_the_comparison_sees_a_replacement(synthesized: tuple[Templates, Templates]) -> None:
    # GIVEN the working tree's templates with a bucket renamed, a log group under another
    # logical ID and an endpoint name changed, THEN each is reported.
    before, after = synthesized
    changed = json.loads(json.dumps(after))
    store = next(s for s in changed["mm"] if s.endswith("-model-store"))
    resources = changed["mm"][store]["Resources"]
    bucket = next(k for k, r in resources.items() if r["Type"] == "AWS::S3::Bucket")
    resources[bucket]["Properties"]["BucketName"] = "renamed-bucket"
    for stacks in changed.values():
        for template in stacks.values():
            for logical_id, resource in list(template["Resources"].items()):
                if resource["Type"] == "AWS::Logs::LogGroup":
                    template["Resources"][logical_id + "Moved"] = template["Resources"].pop(
                        logical_id
                    )
                if resource["Type"] == "AWS::SageMaker::Endpoint":
                    resource["Properties"]["EndpointName"] = "another-name"
    found = replacements(before, changed)
    assert any(bucket in line and "-> 'renamed-bucket'" in line for line in found), found
    assert sum("no AWS::Logs::LogGroup" in line for line in found) == count(
        before, "AWS::Logs::LogGroup"
    )
    assert sum("EndpointName" in line for line in found) == count(
        before, "AWS::SageMaker::Endpoint"
    )
    assert replacing_properties("AWS::KMS::Key")[-4:] == KMS_IMMUTABLE
    assert "LogGroupName" in replacing_properties("AWS::Logs::LogGroup")
