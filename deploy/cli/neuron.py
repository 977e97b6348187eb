"""`deploy neuron generate | plan | compile`: Inferentia (ml.inf1) models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

neuron_app = typer.Typer(
    help="Inferentia (ml.inf1): generate Neuron models, plan NeuronCores, route, package, compile.",
    no_args_is_help=True,
)


@neuron_app.command("generate")
def generate(
    compiled_model: Annotated[
        Path,
        typer.Option(
            "--compiled-model", help="TorchScript file (Neuron-compiled, or plain for CPU)."
        ),
    ],
    inputs: Annotated[
        list[str],
        typer.Option("--input", help="NAME__i,DTYPE,DIMS, e.g. INPUT__0,FP32,3x32x32 (repeat)."),
    ],
    outputs: Annotated[
        list[str],
        typer.Option("--output", help="NAME__i,DTYPE,DIMS, e.g. OUTPUT__0,FP32,10 (repeat)."),
    ],
    cores: Annotated[str, typer.Option("--cores", help="Inclusive NeuronCore range START:END.")],
    model_dir: Annotated[Path, typer.Option("--model-dir", help="Model folder to write.")],
    instances: Annotated[
        int, typer.Option("--instances", help="Model instances sharing the cores.")
    ] = 1,
    threads_per_core: Annotated[int, typer.Option("--threads-per-core")] = 1,
    max_batch_size: Annotated[int, typer.Option("--max-batch-size")] = 0,
    dynamic_batching: Annotated[bool, typer.Option("--dynamic-batching")] = False,
    preferred_batch_sizes: Annotated[
        list[int] | None,
        typer.Option("--preferred-batch-size", help="Dynamic batcher preferred size (repeat)."),
    ] = None,
    max_queue_delay_us: Annotated[int, typer.Option("--max-queue-delay-us")] = 0,
    per_request: Annotated[
        bool,
        typer.Option(
            "--per-request", help="Run queued requests one by one instead of concatenated."
        ),
    ] = False,
    instance_type: Annotated[
        str | None, typer.Option("--instance", help="Check the core range fits this inf1 size.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing model folder.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Write a Triton python-backend model that runs a compiled model on NeuronCores."""
    from deploy.cli.output import console, emit_json
    from deploy.neuron.generate import generate_model
    from deploy.neuron.planning import repository_core_ranges, require_core_plan, split_cores
    from deploy.neuron.spec import build_spec

    spec = build_spec(
        name=model_dir.name,
        compiled_model=compiled_model,
        inputs=inputs,
        outputs=outputs,
        cores=cores,
        instances=instances,
        threads_per_core=threads_per_core,
        max_batch_size=max_batch_size,
        dynamic_batching=dynamic_batching,
        preferred_batch_sizes=preferred_batch_sizes,
        max_queue_delay_us=max_queue_delay_us,
        per_request=per_request,
    )
    # The repository's other Neuron models share the instance: no core twice.
    ranges = repository_core_ranges(model_dir.parent) if model_dir.parent.is_dir() else {}
    ranges[spec.name] = spec.cores
    require_core_plan(ranges, instance_type)
    written = generate_model(spec, model_dir, force=force)
    slices = [piece.visible_cores() for piece in split_cores(spec.cores, spec.instances)]
    if as_json:
        emit_json(
            {
                "model": spec.name,
                "model_dir": str(written),
                "cores": str(spec.cores),
                "instance_cores": slices,
                "batching": spec.batching,
            }
        )
        return
    console().print(
        f"wrote [bold]{written}[/bold]: NeuronCores {spec.cores}, "
        f"instances {', '.join(slices)}, batching {spec.batching}"
    )


@neuron_app.command("plan")
def plan(
    repository: Annotated[Path, typer.Argument(help="Triton model repository.")],
    instance_type: Annotated[
        str, typer.Option("--instance", help="inf1 size, e.g. ml.inf1.6xlarge.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show each Neuron model's NeuronCores on an inf1 size; exit 1 on overlap or overflow."""
    from deploy.cli.output import console, emit_json
    from deploy.errors import NeuronError
    from deploy.neuron.instances import neuron_cores
    from deploy.neuron.planning import check_core_plan, repository_core_ranges

    available = neuron_cores(instance_type)
    ranges = repository_core_ranges(repository)
    problems = check_core_plan(ranges, instance_type)
    used = sum(cores.count for cores in ranges.values())
    if as_json:
        emit_json(
            {
                "instance_type": instance_type,
                "neuron_cores": available,
                "models": {name: str(cores) for name, cores in sorted(ranges.items())},
                "problems": [
                    {"models": list(p.models), "message": p.message, "fix": p.fix} for p in problems
                ],
            }
        )
    else:
        from rich.table import Table

        table = Table(title=f"{instance_type}: {available} NeuronCores, {used} assigned")
        table.add_column("model")
        table.add_column("cores")
        table.add_column("count", justify="right")
        for name, cores in sorted(ranges.items(), key=lambda item: item[1].start):
            table.add_row(name, str(cores), str(cores.count))
        console().print(table)
    if problems:
        first = problems[0]
        raise NeuronError(
            "; ".join(p.message for p in problems),
            where=", ".join(first.models),
            fix=first.fix,
        )


@neuron_app.command("router")
def router(
    repository: Annotated[Path, typer.Argument(help="Triton model repository (the inf1 layout).")],
    name: Annotated[str, typer.Option("--name", help="Router model name.")] = "router",
    instances: Annotated[
        int, typer.Option("--instances", help="Router instances (concurrent requests).")
    ] = 4,
    manifest: Annotated[
        Path | None,
        typer.Option("--manifest", help="Also write the SDK manifest (hosting single-model)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Write the router model that serves every model of REPOSITORY on one endpoint."""
    from deploy.cli.output import console, emit_json
    from deploy.hosting.router_model import read_models, write_manifest, write_router

    routed = sorted(model.name for model in read_models(repository, exclude=[name]))
    folder = write_router(repository, name=name, instances=instances)
    if manifest is not None:
        write_manifest(repository, manifest, router=name)
    if as_json:
        emit_json(
            {
                "router": str(folder),
                "models": routed,
                "manifest": str(manifest) if manifest else None,
            }
        )
        return
    console().print(f"wrote [bold]{folder}[/bold] routing to: {', '.join(routed)}")
    if manifest is not None:
        console().print(f"wrote [bold]{manifest}[/bold] (hosting single-model)")


@neuron_app.command("compile")
def compile_(
    model: Annotated[Path, typer.Option("--model", help="TorchScript file to compile.")],
    inputs: Annotated[
        list[str],
        typer.Option("--input", help="NAME__i,DTYPE,DIMS of each forward() input (repeat)."),
    ],
    output: Annotated[Path, typer.Option("--output", help="Where to write the compiled model.")],
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Batch dimension to compile for (0: none).")
    ] = 1,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing output.")] = False,
) -> None:
    """Compile a TorchScript model for inf1 with torch-neuron (Neuron package repository)."""
    from deploy.cli.output import console
    from deploy.neuron.compile import compile_model

    written = compile_model(model, inputs, output, batch_size=batch_size, force=force)
    console().print(f"wrote [bold]{written}[/bold] (Neuron-compiled TorchScript)")


@neuron_app.command("package")
def package(
    repository: Annotated[Path, typer.Argument(help="Triton model repository (the inf1 layout).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for model.tar.gz + manifest.json.")],
    instance_type: Annotated[
        str | None, typer.Option("--instance", help="Check NeuronCores fit this inf1 size first.")
    ] = None,
    router_instances: Annotated[int, typer.Option("--router-instances")] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Package every model plus the router as one single-model archive (ModelDataUrl)."""
    from deploy.cli.output import console, emit_json
    from deploy.hosting.router_archive import ARCHIVE_NAME, package_single_model
    from deploy.neuron.planning import repository_core_ranges, require_core_plan

    if instance_type is not None:
        require_core_plan(repository_core_ranges(repository), instance_type)
    manifest = package_single_model(repository, out, router_instances=router_instances)
    if as_json:
        emit_json(manifest)
        return
    archive = manifest["archive"]
    console().print(
        f"wrote [bold]{out / ARCHIVE_NAME}[/bold] ({archive['bytes']} bytes, "
        f"sha256 {archive['sha256'][:16]}…): {', '.join(sorted(manifest['models']))} "
        f"+ {manifest['router']}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(neuron_app, name="neuron")
