"""`deploy validate REPO` and `deploy package REPO --out DIR`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deploy.cli.env import IndexUrlOption
from deploy.cli.flags import HostingOption, NoRepoCodeOption, StageOption, repository_code
from deploy.cli.output import console, emit_json, interactive
from deploy.errors import ValidationFailedError

if TYPE_CHECKING:
    from deploy.hosting import Layout
    from deploy.validation import Report

RepoArgument = Annotated[
    Path, typer.Argument(help="Triton model repository (one folder per model).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("package")(package)


def validate(
    repo: RepoArgument,
    as_json: JsonOption = False,
    instance: Annotated[
        str | None,
        typer.Option("--instance", help="Check against this instance type (e.g. ml.g5.xlarge)."),
    ] = None,
    show_config: Annotated[
        bool,
        typer.Option(
            "--show-config",
            help="Print each model's config as Triton would load it (inferred, or completed "
            "by a python model's auto_complete_config).",
        ),
    ] = False,
    triton_version: Annotated[
        str | None,
        typer.Option(
            "--triton-version",
            help="Check against this SageMaker Triton image (e.g. 24.09): config fields it "
            "lacks, and whether it runs on --instance.",
        ),
    ] = None,
    hosting: HostingOption = None,
    stage: StageOption = None,
    no_repo_code: NoRepoCodeOption = False,
) -> None:
    """Check a model repository offline: errors exit 1, warnings exit 0.

    A python model's auto_complete_config runs, announced, in a box (no network, no
    credentials, writes only to a copy); --no-repo-code skips it.

    With --hosting, the mode's own rules too (serverless: CPU only, memory, payload
    and call limits, with the stage's settings from deploy.toml)."""
    repository_code(no_repo_code, stage=stage)
    from deploy.validation import validate_repository

    if instance is not None:
        from deploy.instance_types import require_instance_type

        require_instance_type(instance, where="--instance")
    extra_rules = []
    if hosting is not None:
        from deploy.config import load_settings, settings_file
        from deploy.hosting import mode_named

        mode = mode_named(hosting)
        settings = load_settings(stage=stage, instance_type=instance, hosting=hosting)
        where = str(settings_file())
        extra_rules.append(lambda repository: mode.check_repository(settings, repository, where))
        if not mode.on_instances:
            instance = None  # no instances: its GPUs are not what instance groups get
    report = validate_repository(
        repo,
        instance_type=instance,
        triton_version=triton_version,
        show_configs=show_config,
        extra_rules=extra_rules,
    )
    if as_json:
        emit_json(report.as_dict())
    else:
        _render_report(report)
    if report.errors:
        if as_json:
            raise typer.Exit(1)
        raise ValidationFailedError(
            f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)",
            where=str(repo),
            fix="fix the errors listed above and run `deploy validate` again",
        )


def _render_report(report: Report, *, stderr: bool = False) -> None:
    from rich.markup import escape

    out = console(stderr=stderr)
    for view in report.configs:
        out.print(f"[bold]{escape(view.model)}[/] ({escape(view.source)}):", markup=True)
        for line in view.text.splitlines():
            out.print(f"  {line}", markup=False, highlight=False)
    for d in report.diagnostics:
        style = "red" if d.severity == "error" else "yellow"
        where = f"{d.file}: {d.field}" if d.field else d.file
        # File names and messages are data: "[/x]" in a path is not markup.
        out.print(f"[{style}]{d.severity}[/] {escape(f'{where}: {d.message}')}", markup=True)
        out.print(f"  fix: {d.fix}", markup=False)
    out.print(
        f"{report.repository}: {report.models} model(s), {len(report.errors)} error(s), "
        f"{len(report.warnings)} warning(s)"
    )


def package(
    repo: RepoArgument,
    out: Annotated[Path, typer.Option("--out", "-o", help="Where archives and manifest go.")],
    as_json: JsonOption = False,
    check: Annotated[
        bool,
        typer.Option(
            "--validate/--no-validate",
            help="Validate first (as `deploy validate`); errors stop before anything is written.",
        ),
    ] = True,
    triton_version: Annotated[
        str | None,
        typer.Option(
            "--triton-version",
            help="SageMaker Triton image (default 24.09): the Python of requirements.txt "
            "environments.",
        ),
    ] = None,
    hosting: HostingOption = None,
    index_url: IndexUrlOption = None,
    no_repo_code: NoRepoCodeOption = False,
) -> None:
    """Validate, then write one archive per model plus manifest.json (incremental);
    with --hosting single-model (async, serverless): one archive with every model and
    the router."""
    repository_code(no_repo_code)
    from deploy.packaging import package_repository

    if check:
        _validate_before_packaging(repo)
    if hosting is not None:
        from deploy.hosting import mode_named

        mode = mode_named(hosting)
        if mode.layout.name != "per-model":
            _package_router(mode.layout, repo, out, as_json=as_json)
            return
    result = package_repository(
        repo,
        out,
        progress=interactive() and not as_json,
        triton_version=triton_version,
        index_url=index_url,
    )
    if as_json:
        emit_json(result.as_dict())
        return
    from rich import box
    from rich.table import Table

    from deploy.lifecycle.render import size

    # Fits 80 columns with whole target models (what clients send); --json has the kind.
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("model", overflow="fold")
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("target model", overflow="fold")
    for packaged in result.models:
        entry = packaged.entry
        status = "unchanged" if packaged.reused else "written"
        table.add_row(entry.name, size(entry.bytes or 0), status, entry.target_model)
    out_console = console()
    out_console.print(table)
    out_console.print(f"manifest: {result.manifest_path}")


def _validate_before_packaging(repo: Path) -> None:
    """What `deploy validate REPO` reports, on stderr; errors stop packaging (exit 1)."""
    from deploy.validation import validate_repository

    report = validate_repository(repo)
    if report.diagnostics:
        _render_report(report, stderr=True)
    if report.errors:
        raise ValidationFailedError(
            f"{len(report.errors)} error(s): nothing was packaged",
            where=str(repo),
            fix="fix the errors listed above (`deploy validate` checks again), or pass "
            "--no-validate to package anyway",
        )


def _package_router(layout: Layout, repo: Path, out: Path, *, as_json: bool) -> None:
    from deploy.lifecycle.render import size

    package = layout.package(repo, out)
    if as_json:
        emit_json(package.document)
        return
    archive = package.archive
    models = ", ".join(sorted(package.manifest.models))
    size_text = size(archive.bytes) if archive else "?"
    console().print(f"wrote {out / 'model.tar.gz'} ({size_text}: {models} + router)")
    console().print(f"manifest: {package.manifest_path}")
