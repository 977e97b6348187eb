"""Synthesized CloudFormation templates for a stage: cached, and made rollout-safe.

Synthesizing the CDK app takes seconds; templates are cached under
`build/templates/<key>/`, keyed by the settings and the infra sources.

`pin_endpoint_configs` gives every `AWS::SageMaker::EndpointConfig` a logical
id derived from its properties. A new instance type or count then appears to
CloudFormation as a new config resource beside the old one: it creates the
new config, switches the endpoint (SageMaker's blue/green deployment with
auto-rollback, from the template's DeploymentConfig), and deletes the old
config only in the cleanup phase, after the endpoint update succeeded. (It
also spares emulators that cannot replace a config in place.)

A stage whose stacks have container image assets (the inf1 Neuron image) is
deployed by the CDK CLI from the synthesized cloud assembly, so its templates
stay as synthesized. For router layouts the setting `infra.model_archive`
points the SageMaker Model (and the execution role's read permission) at the
uploaded archive.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.config import DeploySettings
from deploy.errors import ConfigError

COMPONENTS = ("model-store", "network", "endpoint", "api")

Synthesizer = Callable[[DeploySettings, Path], dict[str, Path]]


def project_root(start: Path | None = None) -> Path:
    """The folder holding cdk.json (the CDK app's root), searched upwards from cwd."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "cdk.json").is_file():
            return folder
    raise ConfigError(
        "no cdk.json in this folder or above it",
        where=str(here),
        fix="run `deploy up` from the project (the folder with cdk.json and infra/)",
    )


def cdk_synthesizer(context: dict[str, Any]) -> Synthesizer:
    """Synthesize with the CDK app in process, `context` added to cdk.json's (what the
    CDK CLI's context providers would have looked up, e.g. availability zones).
    """

    def synthesize(settings: DeploySettings, outdir: Path) -> dict[str, Path]:
        return _cdk_synthesize(settings, outdir, context)

    return synthesize


def _cdk_synthesize(
    settings: DeploySettings,
    outdir: Path,
    context: dict[str, Any] | None = None,
) -> dict[str, Path]:
    import sys

    root = str(project_root())
    if root not in sys.path:
        # The console script does not put the working directory on sys.path.
        sys.path.insert(0, root)
    # Node 20 synthesizes correctly; without these jsii prints an end-of-life banner
    # (the second variable lists the major versions to stay quiet about).
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    try:
        import aws_cdk as cdk

        from infra.synth import build_app
    except ModuleNotFoundError as exc:
        from deploy.extras import PROVIDED_BY, install_command

        module = (exc.name or "").split(".")[0]
        raise ConfigError(
            f"the CDK app is not importable ({exc.name} is missing)",
            where="infra/",
            fix=install_command("infra")
            if module in PROVIDED_BY
            else "run deploy from the project root (infra/ is not installed with the package)",
        ) from exc
    pinned = json.loads((project_root() / "cdk.json").read_text(encoding="utf-8"))
    app = cdk.App(outdir=str(outdir), context={**pinned.get("context", {}), **(context or {})})
    # cdk-nag runs in `make test`; provisioning needs the templates only.
    staged = build_app(settings, app=app, nag=False)
    assembly = staged.app.synth()
    manifest = json.loads((Path(assembly.directory) / "manifest.json").read_text(encoding="utf-8"))
    missing = [str(entry.get("key")) for entry in manifest.get("missing", [])]
    if missing:
        # The app would hold placeholder values (a dummy prefix list id, say).
        raise ConfigError(
            f"the CDK app needs context values that were not looked up: {', '.join(missing)}",
            where="infra/",
            fix="synthesize with the CDK CLI (`npx cdk synth`), which looks them up, or add "
            "them to cdk.json's context",
        )
    return {
        stack.stack_name: Path(assembly.get_stack_by_name(stack.stack_name).template_full_path)
        for stack in staged.stacks.values()
    }


def _root_or_cwd() -> Path:
    try:
        return project_root()
    except ConfigError:
        return Path.cwd()


def _infra_fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(
        [*root.glob("infra/**/*.py"), root / "cdk.json", *root.glob("handlers/**/*")]
    ):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class StageTemplates:
    templates: dict[str, dict[str, Any]]  # stack name → template, in deployment order
    assembly: Path  # the cloud assembly (cdk.out) holding the stacks' asset manifests


def stage_templates(
    settings: DeploySettings,
    *,
    cache_dir: Path,
    synthesize: Synthesizer | None = None,
    root_dir: Path | None = None,
) -> StageTemplates:
    """The stage's templates (rollout-safe), synthesized once per settings and infra code."""
    from deploy.lifecycle.assets import container_image_stacks

    root = root_dir or _root_or_cwd()
    # Only what the CDK app reads: paths of models and packages do not matter here.
    relevant = settings.model_dump_json(
        include={"stage", "region", "endpoint_name", "instance_type", "hosting", "infra"}
    )
    key = hashlib.sha256((relevant + _infra_fingerprint(root)).encode()).hexdigest()[:20]
    folder = cache_dir / key
    index = folder / "stacks.json"
    if index.is_file():
        order = json.loads(index.read_text(encoding="utf-8"))
    else:
        produced = (synthesize or _cdk_synthesize)(settings, folder / "cdk.out")
        order = {name: str(path) for name, path in produced.items()}
        index.write_text(json.dumps(order), encoding="utf-8")
    # The CDK CLI deploys a stage whose stacks build an image (the inf1 Neuron image)
    # from the assembly: its templates as written.
    assembly = folder / "cdk.out"
    built = container_image_stacks(assembly, list(order))
    pin = _as_is if built else pin_endpoint_configs
    templates = {
        name: pin(json.loads(Path(path).read_text(encoding="utf-8")))
        for name, path in order.items()
    }
    return StageTemplates(templates, assembly)


def _as_is(template: dict[str, Any]) -> dict[str, Any]:
    return template


def pin_endpoint_configs(template: dict[str, Any]) -> dict[str, Any]:
    resources: dict[str, Any] = template.get("Resources", {})
    renames: dict[str, str] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") == "AWS::SageMaker::EndpointConfig":
            properties = json.dumps(resource.get("Properties", {}), sort_keys=True)
            digest = hashlib.sha256(properties.encode()).hexdigest()[:8].upper()
            renames[logical_id] = f"{logical_id}{digest}"
    if not renames:
        return template
    renamed = {renames.get(key, key): value for key, value in resources.items()}
    result: dict[str, Any] = _rewrite({**template, "Resources": renamed}, renames)
    return result


def _rewrite(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [_rewrite(item, renames) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "Ref" and isinstance(value, str):
            out[key] = renames.get(value, value)
        elif key == "Fn::GetAtt" and isinstance(value, list) and value:
            out[key] = [renames.get(value[0], value[0]), *_rewrite(value[1:], renames)]
        elif key == "Fn::GetAtt" and isinstance(value, str):
            head, _, attribute = value.partition(".")
            out[key] = f"{renames.get(head, head)}.{attribute}"
        elif key == "DependsOn":
            if isinstance(value, str):
                out[key] = renames.get(value, value)
            else:
                out[key] = [renames.get(item, item) for item in value]
        else:
            out[key] = _rewrite(value, renames)
    return out
