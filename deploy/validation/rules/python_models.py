"""Python-backend models as SageMaker runs them: source, BLS calls, imports, bare configs.

`model.py` is read with `ast`, never imported (auto-completion, which must
run the model's code, happens in `deploy.repository.autocomplete`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from deploy.envs.requirements import RequirementsFile, canonical_name, parse_requirements
from deploy.neuron.instances import is_inferentia
from deploy.neuron.planning import PARAM_CORE_START
from deploy.repository import DEPENDENCIES_PARAMETER, Model
from deploy.repository.bls import model_name_calls
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.image import image_has, pip_name
from deploy.validation.registry import Context, model_rule

ENV_PARAMETER = "EXECUTION_ENV_PATH"
_IMPORT_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class _Source:
    path: Path
    tree: ast.Module


def _sources(model: Model) -> Iterator[_Source | Diagnostic]:
    """Each python file of the model's versions, parsed; a syntax error is a diagnostic."""
    for version in model.versions:
        for relative in version.files:
            path = version.path / relative
            if path.suffix != ".py" or not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
                tree = ast.parse(text, filename=str(path))
            except SyntaxError as exc:
                yield error(
                    model.name,
                    f"{path}:{exc.lineno or 0}",
                    "",
                    f"{path.name} does not parse: {exc.msg}; Triton fails to import it",
                    "fix the syntax (Python 3.10 runs it in the SageMaker Triton image)",
                )
                continue
            except (OSError, ValueError):
                continue  # unreadable files are reported by the file rules
            yield _Source(path, tree)


def _parsed(model: Model) -> list[_Source]:
    return [s for s in _sources(model) if isinstance(s, _Source)]


@model_rule
def python_sources_parse(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.backend == "python":
        yield from (d for d in _sources(model) if isinstance(d, Diagnostic))


@model_rule
def python_model_declares_tensors(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.backend != "python" or model.config_path is not None or model.auto_completed:
        return
    if not model.inputs and not model.outputs:
        yield warning(
            model.name,
            str(model.path),
            "input",
            "no config.pbtxt and no auto_complete_config: Triton loads the model with no "
            "inputs or outputs, and refuses every request that sends inputs",
            f"write {model.name}/config.pbtxt with its inputs and outputs, or define "
            "TritonPythonModel.auto_complete_config in model.py",
        )


def _shares_an_ensemble(ctx: Context, caller: str, callee: str) -> bool:
    """An ensemble archive loads every composing model, so they can call each other."""
    return any(
        m.kind == "ensemble" and {caller, callee} <= set(ctx.repository.closure(m.name))
        for m in ctx.repository.models.values()
    )


@model_rule
def bls_calls(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.backend != "python":
        return

    def declare(name: str) -> str:
        return (
            f'parameters {{ key: "{DEPENDENCIES_PARAMETER}" value {{ string_value: "{name}" }} }}'
        )

    reported: set[str] = set()
    for source in _parsed(model):
        for called, line in model_name_calls(source.tree):
            if called is None:
                yield warning(
                    model.name,
                    f"{source.path}:{line}",
                    f"parameters[{DEPENDENCIES_PARAMETER}]",
                    f"BLS call at {source.path.name}:{line} takes its model name from a value "
                    "deploy cannot read before it runs (an input, a computed string), so the "
                    "callee cannot be checked: on a SageMaker multi-model endpoint each archive "
                    "loads alone, and only models bundled into this one can answer",
                    f"bundle every model it may call: add {declare('<name>[,<name>…]')} to "
                    f"{model.name}/config.pbtxt",
                )
                continue
            if called in reported or called == model.name or called in model.dependencies:
                continue
            if _shares_an_ensemble(ctx, model.name, called):
                continue
            reported.add(called)
            site = f"{source.path}:{line}"
            if called in ctx.repository.models:
                yield warning(
                    model.name,
                    site,
                    f"parameters[{DEPENDENCIES_PARAMETER}]",
                    f'BLS call to model "{called}" at {source.path.name}:{line}, which is in the '
                    f"repository but not in {DEPENDENCIES_PARAMETER}: on a SageMaker multi-model "
                    "endpoint each archive loads alone, under its TargetModel, so the call "
                    f'finds no "{called}"',
                    f"bundle it: add {declare(called)} to "
                    f"{model.name}/config.pbtxt (a comma-separated list for several)",
                )
            else:
                yield warning(
                    model.name,
                    site,
                    "",
                    f'BLS call to model "{called}" at {source.path.name}:{line}, which is '
                    "neither in this repository nor bundled, so the call fails on the endpoint",
                    f"add {called}/ to the repository and {declare(called)} to "
                    f"{model.name}/config.pbtxt, or fix the model name",
                )


def _guarded(tree: ast.Module) -> set[int]:
    """ids of import nodes inside `try:` blocks that handle a failed import."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        names: set[str] = set()
        for handler in node.handlers:
            if handler.type is None:
                names.add("BaseException")
            for caught in (
                handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            ):
                if isinstance(caught, ast.Name):
                    names.add(caught.id)
        if names & _IMPORT_GUARDS:
            for statement in node.body:
                guarded.update(id(n) for n in ast.walk(statement))
    return guarded


def _imports(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(top-level module, line) of every absolute import not guarded by try/except."""
    guarded = _guarded(tree)
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.partition(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.partition(".")[0], node.lineno


def _local_modules(model: Model) -> set[str]:
    """Names the model imports from its own folders (Triton puts both on sys.path)."""
    names: set[str] = set()
    for folder in (model.path, *(v.path for v in model.versions)):
        for child in folder.iterdir():
            if child.suffix == ".py" or (child.is_dir() and not child.name.startswith(".")):
                names.add(child.stem if child.suffix == ".py" else child.name)
    return names


@model_rule
def imports_the_image_lacks(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.backend != "python" or ENV_PARAMETER in model.config.parameters:
        return
    neuron_model = PARAM_CORE_START in model.config.parameters
    if neuron_model or (ctx.instance_type and is_inferentia(ctx.instance_type)):
        return  # Inferentia runs a custom image built with its Neuron packages
    local = _local_modules(model)
    required = _required(model)
    seen: set[str] = set()
    for source in _parsed(model):
        for module, line in sorted(_imports(source.tree), key=lambda item: item[1]):
            if module in seen or module in local or image_has(module):
                continue
            seen.add(module)
            package = pip_name(module)
            if required is not None and canonical_name(package) in required:
                continue  # deploy package builds it into the model's environment
            yield warning(
                model.name,
                f"{source.path}:{line}",
                f"parameters[{ENV_PARAMETER}]",
                f'{source.path.name}:{line} imports "{module}", which the SageMaker Triton '
                "image's Python does not have (it has the standard library and numpy), so the "
                "import fails there"
                + (f" ({REQUIREMENTS} does not list it)" if required is not None else ""),
                f"add {package} to {model.name}/{REQUIREMENTS}: deploy package builds it into "
                f"an execution environment for the image's Python and sets {ENV_PARAMETER} "
                "(or build one with `deploy env build` and name it in the config)",
            )


REQUIREMENTS = "requirements.txt"  # deploy.packaging.environments builds it into the archive


def _requirements(model: Model) -> RequirementsFile | str | None:
    """The model's requirements.txt parsed, why it cannot be read, or None without one."""
    path = model.path / REQUIREMENTS
    if model.backend != "python" or not path.is_file():
        return None
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 text (byte {exc.start})"
    return parse_requirements(text, where=str(path))


def _required(model: Model) -> set[str] | None:
    """Distribution names the model's requirements.txt lists (None without one)."""
    parsed = _requirements(model)
    if parsed is None:
        return None
    return parsed.names() if isinstance(parsed, RequirementsFile) else set()


@model_rule
def requirements_are_specifiers(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    """deploy package installs requirements.txt with pip: specifiers and hashes only."""
    parsed = _requirements(model)
    path = model.path / REQUIREMENTS
    if isinstance(parsed, str):
        yield error(
            model.name,
            str(path),
            "",
            f"{REQUIREMENTS} {parsed}, so deploy package cannot build its environment",
            "save it as UTF-8 text with one requirement specifier per line",
        )
    elif parsed is not None:
        for refusal in parsed.refusals:
            yield error(
                model.name,
                f"{path}:{refusal.line}",
                "",
                f"{refusal.text!r}: {refusal.message}",
                refusal.fix,
            )
