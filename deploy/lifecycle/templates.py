"""Synthesized CloudFormation templates for a stage: cached, and made rollout-safe.

Synthesizing the CDK app takes seconds; templates are cached under
`build/templates/<key>/`, keyed by the settings and the infra sources. The app is
the packaged one (`python -m deploy_infra.app`, the interpreter running deploy),
so a project needs no cdk.json; when it has one, its context is passed on.

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
from deploy.lifecycle.packaged_models import MODELS_CONTEXT, packaged_models

COMPONENTS = ("model-store", "network", "endpoint", "async-lane", "api")

Synthesizer = Callable[[DeploySettings, Path], dict[str, Path]]


def project_root(start: Path | None = None) -> Path:
    """The project: the nearest folder holding cdk.json, from cwd upwards; else cwd.

    Its cdk.json (and cdk.context.json) context is added to the packaged app's; the
    CDK CLI runs there and templates are cached under its `build/`.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "cdk.json").is_file():
            return folder
    return here


def cdk_synthesizer(context: dict[str, Any]) -> Synthesizer:
    """Synthesize by running the CDK app as the CDK CLI does, `context` added to
    cdk.json's (what the CLI's context providers would have looked up, e.g.
    availability zones).
    """

    def synthesize(settings: DeploySettings, outdir: Path) -> dict[str, Path]:
        return _cdk_synthesize(settings, outdir, context)

    return synthesize


# The context key that turns cdk-nag off in the CDK app (it runs in `make test`;
# provisioning needs the templates only).
NAG_CONTEXT = "deploy:nag"


def settings_context(settings: DeploySettings) -> dict[str, Any]:
    """The settings the CDK app reads, as `-c key=value` context (deploy_infra.app's keys)."""
    context: dict[str, Any] = {
        "stage": settings.stage,
        "region": settings.region,
        "endpoint_name": settings.endpoint_name,
        "instance_type": settings.instance_type,
    }
    if settings.hosting is not None:
        context["hosting"] = settings.hosting
    if settings.async_lane:
        context["async_lane"] = True
    for name, value in settings.infra.model_dump(mode="json").items():
        if value is not None:
            context[f"infra.{name}"] = value
    return context


# The packaged CDK app (deploy_infra/app.py), run by the interpreter running deploy.
APP_MODULE = "deploy_infra.app"
# Files of the project whose context the CDK CLI would pass the app.
CONTEXT_FILES = ("cdk.json", "cdk.context.json")


def app_command() -> list[str]:
    """The packaged CDK app, as a command (a separate program: deploy imports none of it)."""
    import sys

    return [sys.executable, "-m", APP_MODULE]


def project_context(root: Path) -> dict[str, Any]:
    """The context of the project's cdk.json and cdk.context.json (lookups the CDK CLI
    made), later files winning, as the CLI merges them; {} without them."""
    context: dict[str, Any] = {}
    for name in CONTEXT_FILES:
        path = root / name
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot read JSON: {exc}", where=str(path), fix="correct or remove the file"
            ) from exc
        if not isinstance(document, dict):
            raise ConfigError("expected a JSON object", where=str(path))
        found = document.get("context", {}) if name == "cdk.json" else document
        if isinstance(found, dict):
            context.update(found)
    return context


def _cdk_synthesize(
    settings: DeploySettings,
    outdir: Path,
    context: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Run the packaged CDK app with the settings as its context (over the project's
    cdk.json context, if any); the app is a separate program, so deploy imports nothing
    of it."""
    import subprocess

    root = project_root()
    command = app_command()
    full_context = {
        **project_context(root),
        **(context or {}),
        **settings_context(settings),
        NAG_CONTEXT: False,
        MODELS_CONTEXT: json.dumps(packaged_models(settings)),
    }
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEPLOY_")}
    environment.update(
        {
            "CDK_OUTDIR": str(outdir),
            "CDK_CONTEXT_JSON": json.dumps(full_context),
            # Every setting is in the context: the app reads no deploy.toml.
            "DEPLOY_CONFIG": os.devnull,
            # Node 20 synthesizes correctly; without these jsii prints an end-of-life
            # banner (the second variable lists the major versions to stay quiet about).
            "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        }
    )
    outdir.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            command,
            cwd=root,
            env=environment,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"cannot run the CDK app: {exc}", where=APP_MODULE, fix=_APP_FIX) from exc
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        detail = " | ".join(lines[-5:])[-1500:] or f"exit code {done.returncode}"
        raise ConfigError(f"the CDK app failed: {detail}", where=APP_MODULE, fix=_APP_FIX)
    manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
    missing = [str(entry.get("key")) for entry in manifest.get("missing", [])]
    if missing:
        # The app would hold placeholder values (a dummy prefix list id, say).
        raise ConfigError(
            f"the CDK app needs context values that were not looked up: {', '.join(missing)}",
            where="deploy_infra/",
            fix="synthesize once with the CDK CLI (`deploy cdk synth`), which looks them up "
            "into cdk.context.json, or add them to cdk.json's context",
        )
    stacks = {
        str(artifact.get("displayName") or name): outdir / artifact["properties"]["templateFile"]
        for name, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }
    order = [settings.stack_name(component) for component in COMPONENTS]
    return {name: stacks[name] for name in order if name in stacks}


_APP_FIX = (
    "the CDK app needs the infra extra: `pip install 'triton-sagemaker-deploy[infra]'` "
    "(an error in deploy.toml or the flags is named above)"
)


def _package_folder(root: Path, package: str) -> Path | None:
    """Where the app's child process imports `package` from: the project's own copy
    (it runs in `root`, first on its sys.path), else the installed one."""
    import importlib.util

    own = root / package
    if (own / "__init__.py").is_file():
        return own
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def _infra_fingerprint(root: Path) -> str:
    """The app's code and data, the Lambda's code and the project's context files."""
    digest = hashlib.sha256()
    files = [(root / name, name) for name in CONTEXT_FILES]
    for package in ("deploy_infra", "deploy_handlers"):
        folder = _package_folder(root, package)
        if folder is None:
            continue
        files += [(path, f"{package}/{path.relative_to(folder)}") for path in folder.rglob("*")]
    for path, name in sorted(files, key=lambda item: item[1]):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(name.encode())
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

    root = root_dir or project_root()
    # Only what the CDK app reads: paths of models and packages do not matter here.
    relevant = settings.model_dump_json(
        include={"stage", "region", "endpoint_name", "instance_type", "hosting", "infra"}
    )
    # The dashboard has a section per packaged model.
    relevant += json.dumps(packaged_models(settings))
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
