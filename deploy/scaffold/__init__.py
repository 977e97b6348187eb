"""`deploy init [DIR]`: the files a project needs to use deploy outside this checkout.

- `deploy.toml`: commented, with dev, staging and prod stages; the endpoint is named
  after the project folder and the repository is the one found there;
- `cdk.json`: runs the packaged CDK app as `python -m deploy_infra.app`, so that
  `cdk synth`/`cdk deploy` (and `deploy cdk ...`) work in the project. `python` is
  whichever the activated venv (or `deploy cdk`, which puts its own interpreter first
  on PATH) provides: no absolute path of one machine's venv, so a teammate's checkout
  works as is;
- `.github/workflows/release.yml`: the release pipeline, installing this version;
- `.gitignore` lines for what deploy writes (`build/`, `cdk.out/`, `.deploy/`);
- a model repository skeleton (`models/addsub`, a python-backend model that the
  workflow and `deploy up`'s smoke test can call) unless the project has one.

Nothing is overwritten without `force`; each file appears whole or not at all.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from deploy import __version__
from deploy._files import atomic_write_bytes
from deploy.catalogue.images import NEW_STAGE_TRITON_VERSION
from deploy.config import DEFAULT_CONFIG_FILE, REPOSITORY_NAMES, endpoint_name_for
from deploy.errors import ConfigError

DISTRIBUTION = "triton-sagemaker-deploy"
APP_COMMAND = "python -m deploy_infra.app"
NODE_VERSION = "20"
GITIGNORE_LINES = ("build/", "cdk.out/", ".deploy/")
SKELETON_MODEL = "addsub"


@dataclass
class Scaffold:
    """What `deploy init` wrote and what it left alone."""

    project: Path
    endpoint_name: str
    repository: str
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # existed; --force replaces them
    gitignore_added: list[str] = field(default_factory=list)
    repository_found: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "project": str(self.project),
            "endpoint_name": self.endpoint_name,
            "repository": self.repository,
            "repository_found": self.repository_found,
            "written": self.written,
            "kept": self.kept,
            "gitignore_added": self.gitignore_added,
            "next": next_steps(self),
        }


def _template(name: str) -> str:
    return (resources.files("deploy.scaffold") / "templates" / name).read_text(encoding="utf-8")


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"@@{key}@@", value)
    return text


def found_repository(project: Path) -> str | None:
    """The project's model repository, relative to it (None: none of the usual names)."""
    for name in REPOSITORY_NAMES:
        if (project / name).is_dir():
            return name
    return None


def scaffold(
    project: Path,
    *,
    force: bool = False,
    endpoint_name: str | None = None,
    repository: str | None = None,
    region: str = "us-east-1",
) -> Scaffold:
    """Write the project's files (see the module docstring) into `project`."""
    if project.exists() and not project.is_dir():
        raise ConfigError("not a folder", where=str(project), fix="name a folder for the project")
    project.mkdir(parents=True, exist_ok=True)
    found = found_repository(project)
    chosen = repository or found or REPOSITORY_NAMES[0]
    result = Scaffold(
        project=project,
        endpoint_name=endpoint_name or endpoint_name_for(project),
        repository=chosen,
        repository_found=repository is None and found is not None,
    )
    values = {
        "ENDPOINT": result.endpoint_name,
        "REPOSITORY": chosen,
        "REGION": region,
        "TRITON_VERSION": NEW_STAGE_TRITON_VERSION,
        "PYTHON": f"{sys.version_info.major}.{sys.version_info.minor}",
        "NODE": NODE_VERSION,
        "REQUIREMENT": f"{DISTRIBUTION}[cli,infra]=={__version__}",
    }
    files: dict[str, str] = {
        DEFAULT_CONFIG_FILE: _fill(_template("deploy.toml.tmpl"), values),
        "cdk.json": json.dumps(
            {"app": APP_COMMAND, "watch": {"include": [DEFAULT_CONFIG_FILE]}}, indent=2
        )
        + "\n",
        ".github/workflows/release.yml": _fill(_template("release.yml.tmpl"), values),
    }
    model_repository = project / chosen
    if not model_repository.is_dir() or not any(model_repository.iterdir()):
        model = f"{chosen}/{SKELETON_MODEL}"
        files[f"{model}/config.pbtxt"] = _template("addsub.config.pbtxt.tmpl")
        files[f"{model}/1/model.py"] = _template("addsub.model.py.tmpl")
    for relative, text in files.items():
        target = project / relative
        if target.exists() and not force:
            result.kept.append(relative)
            continue
        atomic_write_bytes(target, text.encode("utf-8"))
        result.written.append(relative)
    result.gitignore_added = _extend_gitignore(project / ".gitignore")
    return result


def _extend_gitignore(path: Path) -> list[str]:
    """Append the lines that are missing (the file's own lines are never changed)."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in GITIGNORE_LINES if line not in present]
    if missing:
        head = text if not text or text.endswith("\n") else text + "\n"
        block = "# deploy: packages, CDK output, local endpoint state\n" + "\n".join(missing)
        atomic_write_bytes(path, (head + block + "\n").encode("utf-8"))
    return missing


def next_steps(result: Scaffold) -> list[str]:
    """The commands to run next, in the project folder."""
    repository = result.repository
    return [
        f"deploy validate {repository}",
        f"deploy package {repository} --out build/models",
        "deploy serve                  # a local endpoint (the [local] extra)",
        "deploy up --dry-run           # the dev stage's plan on AWS",
        "deploy cdk synth -c stage=prod",
        "deploy up --stage dev",
    ]
