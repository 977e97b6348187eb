"""`deploy bind SCRIPT --out REPO`: a PyTriton script's models as a Triton model repository.

For each model the script binds, `REPO/<model>/` gets:

    config.pbtxt                 the config PyTriton would generate (spec.model_config)
    <version>/model.py           model.py.tmpl, as it is: re-runs the script in the python backend
    <version>/deploy-bind.json   what model.py serves: script file name, model name, arguments
    <version>/pytriton/          the stand-in for PyTriton's API (numpy only)
    <version>/<script's folder>  the script and its local modules, as they are now
    requirements.txt             the script folder's, if it has one: what `deploy package`
                                 builds into the model's execution environment

Names from the script (its file name, the models it binds, its arguments)
reach model.py only as JSON data it reads, never as Python text. The
script's folder and the stand-in are copied once per bind and hard-linked
into each model's version folder (copied only where the file system has no
hard links), so a script that binds 1,000 models stores its folder once, not
1,000 times.

Everything is written into a staging folder beside REPO, checked with
`deploy validate`, and only then moved into REPO, model by model; an error
leaves REPO as it was.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.errors import BindError
from deploy.pytriton.record import RECORD_TIMEOUT_S, STANDIN_ROOT, record
from deploy.pytriton.spec import BoundModel, bound_models, model_config

_TEMPLATE = Path(__file__).resolve().parent / "model.py.tmpl"
BOUND_FILE = "deploy-bind.json"  # what model.py serves, as data
# Names the generated files take in the version folder.
_RESERVED = ("model.py", "pytriton", BOUND_FILE)
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class BindResult:
    repository: Path
    models: tuple[BoundModel, ...]
    warnings: tuple[Any, ...] = field(default=())  # deploy.validation Diagnostics

    def as_dict(self) -> dict[str, Any]:
        return {
            "repository": str(self.repository),
            "models": [
                {
                    "name": m.name,
                    "path": str(self.repository / m.name),
                    "bound_at": m.location,
                    "max_batch_size": m.max_batch_size,
                    "instances": m.instances,
                    "inputs": [t.name for t in m.inputs],
                    "outputs": [t.name for t in m.outputs],
                }
                for m in self.models
            ],
            "warnings": [w.as_dict() for w in self.warnings],
        }


def bind_script(
    script: Path,
    out: Path,
    *,
    argv: list[str] | None = None,
    force: bool = False,
    timeout: float = RECORD_TIMEOUT_S,
) -> BindResult:
    """Run `script` under the PyTriton stand-in and write its models into `out`."""
    script = script.resolve()
    if not script.is_file():
        raise BindError("no such file", where=str(script), fix="pass the path of a PyTriton script")
    folder = script.parent
    conflicts = [name for name in _RESERVED if (folder / name).exists()]
    if conflicts:
        raise BindError(
            f"the script's folder has {', '.join(conflicts)}, a name the generated model "
            "takes in the version folder",
            where=str(folder),
            fix=f"rename {', '.join(conflicts)} (and its imports), or move the script and its "
            "modules into a folder of their own",
        )
    argv = list(argv or [])
    recorded = record(script, argv, timeout=timeout, ignore=_ignore(folder, out.resolve()))
    models = bound_models(recorded, script)
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise BindError(
            "exists and is not a folder", where=str(out), fix="pass a repository folder"
        )
    existing = [m.name for m in models if (out / m.name).exists()]
    if existing and not force:
        raise BindError(
            f"model folder(s) {', '.join(existing)} already exist; nothing was written",
            where=str(out),
            fix="pass --force to replace them, or another --out",
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.bind-", dir=out.parent) as scratch:
        # One copy of the script's folder, beside the staged models on the same file
        # system, which each model's version folder links to.
        shared = Path(scratch) / "script"
        shutil.copytree(folder, shared, symlinks=False, ignore=_ignore(folder, out))
        standin = Path(scratch) / "pytriton"
        shutil.copytree(
            STANDIN_ROOT / "pytriton",
            standin,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_record.py"),
        )
        staging = Path(scratch) / "models"
        staging.mkdir()
        for model in models:
            _write_model(staging / model.name, model, script, argv, shared=shared, standin=standin)
        warnings = _check(staging, out)
        out.mkdir(parents=True, exist_ok=True)
        for model in models:
            _replace(staging / model.name, out / model.name)
    return BindResult(out, tuple(models), warnings)


def _write_model(
    target: Path,
    model: BoundModel,
    script: Path,
    argv: list[str],
    *,
    shared: Path,
    standin: Path,
) -> None:
    from deploy.repository import format_config

    version = target / str(model.version)
    shutil.copytree(shared, version, symlinks=False, copy_function=_link_or_copy)
    shutil.copytree(standin, version / "pytriton", copy_function=_link_or_copy)
    shutil.copyfile(_TEMPLATE, version / "model.py")
    bound = {"script": script.name, "model": model.name, "argv": argv}
    (version / BOUND_FILE).write_text(json.dumps(bound, indent=2) + "\n", encoding="utf-8")
    (target / "config.pbtxt").write_text(format_config(model_config(model)), encoding="utf-8")
    requirements = shared / "requirements.txt"
    if requirements.is_file():
        # At the model's root, deploy package builds it into the model's environment.
        _link_or_copy(str(requirements), str(target / "requirements.txt"))


def _link_or_copy(source: str, target: str) -> str:
    """A hard link to `source` (one copy on disk for every model), or a copy where the
    file system refuses links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return target


def _ignore(folder: Path, out: Path) -> Callable[[str, list[str]], set[str]]:
    """What of the script's folder stays behind: hidden entries, caches, the output."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set()
        for name in names:
            path = Path(directory) / name
            if (
                name.startswith(".")
                or name == "__pycache__"
                or name.endswith(_SKIPPED_SUFFIXES)
                or path.resolve() == out
                or path.resolve().is_relative_to(out)
            ):
                skipped.add(name)
        return skipped

    del folder
    return ignore


def _check(staging: Path, out: Path) -> tuple[Any, ...]:
    """`deploy validate` on the staged models: errors stop here, warnings are returned."""
    from deploy.validation import validate_repository

    report = validate_repository(staging)
    shown = str(staging)

    def place(text: str) -> str:
        return text.replace(shown, str(out))

    if report.errors:
        lines = [
            f"{place(str(d.file))}: {d.field + ': ' if d.field else ''}{place(d.message)}"
            for d in report.errors
        ]
        raise BindError(
            "the generated models do not validate; nothing was written:\n  " + "\n  ".join(lines),
            where=str(out),
            fix="; ".join(dict.fromkeys(d.fix for d in report.errors)),
        )
    # The staging folder goes once the bind is done: name the files where they will be.
    return tuple(
        dataclasses.replace(d, file=place(str(d.file)), message=place(d.message))
        for d in report.warnings
    )


def _replace(source: Path, target: Path) -> None:
    if target.exists():
        old = target.with_name(f".{target.name}.replaced")
        if old.exists():
            shutil.rmtree(old)
        target.rename(old)
        source.rename(target)
        shutil.rmtree(old)
    else:
        source.rename(target)
