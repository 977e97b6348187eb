"""`deploy bench`: load-test a model through the SDK, compare runs, search configs.

deploy bench MODEL [--local | --endpoint NAME | --endpoint-url URL] [--concurrency 1,8,32]
             [--rate R] [--duration S] [--warmup S] [--input FILE] [--batch B] [--json]
             [--plot FILE]
deploy bench --compare BASE.json NEW.json [--max-regression 10%]
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from deploy.cli.flags import AWS_FLAGS, ProfileOption, RegionOption, StageOption, reject
from deploy.cli.invoke import _aws_call, _local_target
from deploy.errors import BenchError

if TYPE_CHECKING:
    from deploy.bench.compare import Comparison
    from deploy.bench.cost import Pricing
    from deploy.bench.report import BenchReport, StepReport
    from deploy.bench.runner import Plan
    from deploy.bench.sweep import SweepReport


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def bench(
    ctx: typer.Context,
    model: Annotated[
        str | None, typer.Argument(help="Logical model name (or a TargetModel *.tar.gz).")
    ] = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="The local endpoint (`deploy serve`, `deploy up --local`).",
        ),
    ] = False,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="SageMaker endpoint name (default: stage's).")
    ] = None,
    endpoint_url: Annotated[
        str | None, typer.Option("--endpoint-url", help="Runtime URL (local endpoint, proxies).")
    ] = None,
    manifest: Annotated[
        str | None,
        typer.Option("--manifest", help="manifest.json path or s3:// URL (default: discovered)."),
    ] = None,
    target_model: Annotated[
        str | None, typer.Option("--target-model", help="Send this TargetModel as is.")
    ] = None,
    stage: StageOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    concurrency: Annotated[
        str | None,
        typer.Option(
            "--concurrency",
            "-c",
            help="Requests in flight, one step each: 1,8,32 (default). With --rate: the cap "
            "on requests in flight (default 32).",
        ),
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option(
            "--rate",
            help="Fixed-rate sends per second (comma list: one step each) instead "
            "of a closed loop; latency counts from each scheduled send.",
        ),
    ] = None,
    duration: Annotated[
        float, typer.Option("--duration", min=0.1, help="Measured seconds per step.")
    ] = 10.0,
    warmup: Annotated[
        float, typer.Option("--warmup", min=0.0, help="Unmeasured seconds before each step.")
    ] = 2.0,
    input_file: Annotated[
        Path | None,
        typer.Option("--input", "-i", help="Inputs: .npz or .json (default: generated)."),
    ] = None,
    batch: Annotated[
        int | None,
        typer.Option("--batch", min=1, help="Rows per request of generated inputs (default 1)."),
    ] = None,
    shape: Annotated[
        list[str] | None,
        typer.Option("--shape", help="NAME=DIMS for a variable-size input (repeat)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.001, help="Seconds per call.")
    ] = 30.0,
    workers: Annotated[
        int | None,
        typer.Option("--workers", min=1, help="Load-generator processes (default: from -c)."),
    ] = None,
    instance: Annotated[
        str | None,
        typer.Option(
            "--instance", help="Price as this instance type (default: the stage's, on AWS)."
        ),
    ] = None,
    instance_count: Annotated[
        int | None, typer.Option("--instance-count", min=1, help="Instances serving it.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Write a latency-vs-throughput chart (.html)."),
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            "--compare",
            help="Compare two --json reports (BASE NEW); exit 1 on a regression.",
            metavar="BASE NEW",
        ),
    ] = None,
    max_regression: Annotated[
        str, typer.Option("--max-regression", help="Allowed throughput drop or p99 rise.")
    ] = "10%",
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            help="KEY=V1,V2 (repeat; max_batch_size, instances, max_queue_delay_us): serve "
            "every combination on a local endpoint started for it (with --local).",
        ),
    ] = None,
    latency_budget: Annotated[
        str | None,
        typer.Option("--latency-budget", help="p99 budget for the best variant: 50ms, 0.2s."),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="Write the best variant's config.pbtxt (--sweep).")
    ] = False,
    repository: Annotated[
        Path | None,
        typer.Option("--repository", help="Model repository of --sweep (default: settings)."),
    ] = None,
) -> None:
    """Load-test MODEL through the SDK: throughput, latency, errors, client CPU and cost."""
    if compare is not None:
        _compare(compare, max_regression, as_json)
        return
    if model is None:
        raise typer.BadParameter("give the MODEL to load-test (or --compare BASE NEW)")
    plan = _plan(concurrency, rate, duration, warmup, workers)
    if sweep:
        if not local:
            ctx.fail("--sweep serves each variant on a local endpoint: add --local")
        unused = {"endpoint": "--endpoint", "endpoint_url": "--endpoint-url"}
        unused |= {"manifest": "--manifest", "target_model": "--target-model"}
        unused |= {"input_file": "--input"}
        reject(ctx, {**unused, **AWS_FLAGS}, because="to --sweep: it serves its own variants")
        _sweep(
            model,
            sweep,
            plan,
            repository=repository,
            budget=latency_budget,
            write=write,
            batch=batch or 1,
            shapes=shape or [],
            timeout=timeout,
            pricing=_pricing(instance, instance_count, None, None, stage_endpoint=None),
            as_json=as_json,
            plot=plot,
        )
        return
    if write or latency_budget is not None or repository is not None:
        ctx.fail("--write, --latency-budget and --repository go with --sweep")
    if input_file is not None and (batch is not None or shape):
        ctx.fail("--batch and --shape shape generated inputs; --input FILE brings its own")
    from deploy.bench.target import Target

    if local:
        reject(ctx, AWS_FLAGS, because="to --local: the local endpoint runs on this machine")
        name, url, manifest_location = _local_target(endpoint, endpoint_url, manifest)
        target = Target(name, model, url, manifest=manifest_location, timeout_s=timeout)
        # A local run is priced only as the instance named (--instance), in the stage's region.
        pricing = _pricing(instance, instance_count, None, stage, stage_endpoint=None)
    else:
        aws = _aws_call(
            endpoint, stage=stage, region=region, profile=profile, endpoint_url=endpoint_url
        )
        if profile is not None:
            aws.session()  # an unknown profile is an error here, not in every worker
        target = Target(
            aws.endpoint,
            model,
            endpoint_url,
            region=aws.region.name,
            profile=profile,
            manifest=manifest,
            timeout_s=timeout,
        )
        pricing = _pricing(
            instance,
            instance_count,
            aws.region.name,
            stage,
            stage_endpoint=None if endpoint_url else aws.endpoint,
        )
    target = replace(target, target_model=target_model)
    report = _run(target, plan, input_file, batch or 1, shape or [], pricing, as_json)
    _emit(report, as_json=as_json, plot=plot)


# -- the parts ----------------------------------------------------------------------------


def _numbers(text: str, flag: str, kind: type[float] | type[int]) -> list[Any]:
    values: list[Any] = []
    for part in text.split(","):
        try:
            value = kind(part.strip())
        except ValueError:
            value = 0
        if value <= 0:
            raise BenchError(
                f"{flag} {text!r}: {part.strip()!r} is not a positive number",
                where=flag,
                fix=f"give a comma-separated list, e.g. {flag} 1,8,32",
            )
        values.append(value)
    return values


def _plan(
    concurrency: str | None, rate: str | None, duration: float, warmup: float, workers: int | None
) -> Plan:
    from deploy.bench.runner import Plan, Step

    if rate is not None:
        caps = _numbers(concurrency, "--concurrency", int) if concurrency else [32]
        if len(caps) != 1:
            raise BenchError(
                "with --rate, --concurrency is one number: the cap on requests in flight",
                where="--concurrency",
                fix="pass one value, e.g. --rate 200 --concurrency 64",
            )
        steps = tuple(Step(caps[0], float(r)) for r in _numbers(rate, "--rate", float))
    else:
        levels = _numbers(concurrency or "1,8,32", "--concurrency", int)
        steps = tuple(Step(level) for level in levels)
    return Plan(steps=steps, duration_s=duration, warmup_s=warmup, workers=workers)


def _pricing(
    instance: str | None,
    count: int | None,
    region: str | None,
    stage: str | None,
    *,
    stage_endpoint: str | None,
) -> Pricing | None:
    """`--instance` (and count), else the stage's instance type and minimum count when the
    endpoint is the stage's; None for a local endpoint without --instance."""
    from deploy.bench.cost import pricing_for
    from deploy.config import load_settings

    settings = load_settings(stage=stage) if stage is not None else load_settings()
    if instance is not None:
        return pricing_for(instance, count or 1, region or settings.region, source="--instance")
    if stage_endpoint is None or stage_endpoint != settings.endpoint_name:
        if count is not None:
            raise BenchError("--instance-count needs --instance", where="--instance-count")
        return None
    try:
        # Instances are billed, not the models or inference components they hold; the
        # benchmark's calls run on at least one, whatever the minimum (scale to zero).
        return pricing_for(
            settings.instance_type,
            count or max(settings.infra.min_instance_count, 1),
            region or settings.region,
            source=f"stage {settings.stage}",
        )
    except BenchError:
        return None  # not priced; the report says so


def _run(
    target: Any,
    plan: Plan,
    input_file: Path | None,
    batch: int,
    shapes: list[str],
    pricing: Pricing | None,
    as_json: bool,
) -> BenchReport:
    from deploy.bench.benchmark import benchmark, model_info
    from deploy.bench.inputs import generate_inputs, parse_shapes
    from deploy.cli.invoke import InvokeError, read_inputs

    info = model_info(target)
    if input_file is not None:
        try:
            inputs = read_inputs(input_file, info)
        except InvokeError as exc:
            raise BenchError(exc.message, where=exc.where, fix=exc.fix) from exc
        label = str(input_file)
    elif info is None:
        raise BenchError(
            "no manifest describes this model, so its inputs cannot be generated",
            where=f"model {target.model!r}",
            fix="pass --input FILE (.npz or .json), or --manifest PATH",
        )
    else:
        inputs = generate_inputs(info, batch=batch, shapes=parse_shapes(shapes))
        label = "generated"
    progress = None if as_json else _progress()
    return benchmark(
        target, inputs, plan, info=info, pricing=pricing, inputs_label=label, on_step=progress
    )


def _progress() -> Any:
    from deploy.cli.output import console

    err = console(stderr=True)

    def show(step: StepReport) -> None:
        p99 = step.latency_ms["p99"]
        err.print(
            f"  {step.label()}: {step.throughput_rps:,.1f} req/s, p99 "
            + (f"{p99:.2f} ms" if p99 is not None else "-")
            + (f", {step.failed} failed" if step.failed else "")
        )

    return show


# -- rendering ------------------------------------------------------------------------------


def _num(value: float) -> str:
    """Throughput in as few characters as its precision needs."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _cost(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 1 else f"{value:,.2f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _emit(report: BenchReport, *, as_json: bool, plot: Path | None) -> None:
    if plot is not None:
        _plot_run(report, plot)
    if as_json:
        from deploy.cli.output import emit_json

        emit_json(report.to_dict())
        if report.failed:
            raise typer.Exit(1)
        return
    _render(report, plot)


def _render(report: BenchReport, plot: Path | None) -> None:
    from rich.table import Table

    from deploy.cli.output import console

    out = console()
    for note in report.warnings():
        style = "bold red" if note.startswith("FAILED") else "yellow"
        out.print(f"[{style}]{note}[/]")
    where = report.endpoint_url or report.region or "AWS"
    out.print(
        f"[bold]{report.model}[/] on endpoint {report.endpoint} ({where}); "
        f"{report.inputs} inputs, {report.items_per_request} per request, "
        f"{report.request_bytes:,} bytes; {report.mode}, {report.workers} worker processes; "
        f"first call {report.first_call_s:.2f} s"
    )
    batched = report.items_per_request > 1
    table = Table(
        caption="latency in ms; err: failed requests; CPU: the client's ms per request; "
        "$/M: per million inferences"
        + ("; ! client saturated" if any(step.client_saturated for step in report.steps) else "")
    )
    columns = ["load", "req/s", *(["items/s"] if batched else []), "p50", "p90", "p99", "max"]
    columns += ["err", "CPU", "$/M"]
    for column in columns:
        table.add_column(column, justify="left" if column == "load" else "right", no_wrap=True)
    for step in report.steps:
        cpu = step.client_cpu_ms_per_request
        cost = step.cost_per_million_usd
        table.add_row(
            _short(step) + (" !" if step.client_saturated else ""),
            _num(step.throughput_rps),
            *([_num(step.items_per_s)] if batched else []),
            _ms(step.latency_ms["p50"]),
            _ms(step.latency_ms["p90"]),
            _ms(step.latency_ms["p99"]),
            _ms(step.latency_ms["max"]),
            str(step.failed),
            "-" if cpu is None else f"{cpu:.3f}",
            _cost(cost),
        )
    out.print(table)
    if report.pricing is not None:
        out.print(f"cost: {report.pricing.describe()}")
    else:
        out.print("cost: not priced (pass --instance TYPE [--instance-count N])")
    for step in report.steps:
        if step.errors:
            classes = ", ".join(f"{kind} {count}" for kind, count in step.errors.items())
            out.print(f"failed at {step.label()}: {classes}")
        for kind, message in step.error_examples.items():
            out.print(f"  {kind}: {message}", soft_wrap=True)
    if plot is not None:
        out.print(f"wrote {plot}")


def _plot_run(report: BenchReport, path: Path) -> None:
    from deploy.bench.plot import Point, Series, render_page, write_page

    series = []
    for key in ("p50", "p90", "p99"):
        points = tuple(
            Point(step.items_per_s, value, _short(step))
            for step in report.steps
            if (value := step.latency_ms[key]) is not None
        )
        series.append(Series(key, points))
    table = [["load", "items/s", "p50 ms", "p90 ms", "p99 ms", "errors"]]
    for step in report.steps:
        table.append(
            [
                step.label(),
                f"{step.items_per_s:,.1f}",
                _ms(step.latency_ms["p50"]),
                _ms(step.latency_ms["p90"]),
                _ms(step.latency_ms["p99"]),
                str(step.failed),
            ]
        )
    title = f"deploy bench {report.model} on {report.endpoint}"
    write_page(path, render_page(title, series, notes=report.warnings(), table=table))


def _short(step: StepReport) -> str:
    return f"c{step.concurrency}" if step.rate is None else f"{step.rate:g}/s≤{step.concurrency}"


def _compare(paths: tuple[Path, Path], max_regression: str, as_json: bool) -> None:
    from deploy.bench.compare import compare, parse_fraction

    result = compare(paths[0], paths[1], max_regression=parse_fraction(max_regression))
    if as_json:
        from deploy.cli.output import emit_json

        emit_json(result.to_dict())
    else:
        _render_comparison(result)
    if result.regressed:
        raise typer.Exit(1)


def _render_comparison(result: Comparison) -> None:
    from rich.table import Table

    from deploy.cli.output import console

    out = console()
    table = Table(
        title=f"{result.base} → {result.new} (max regression {result.max_regression:.0%})"
    )
    for column in ("load", "items/s", "change", "p99 ms", "change", "verdict"):
        table.add_column(column, justify="left" if column in ("load", "verdict") else "right")
    for step in result.steps:
        table.add_row(
            step.load,
            f"{step.base_items_per_s:,.1f} → {step.new_items_per_s:,.1f}",
            "-" if step.throughput_change is None else f"{step.throughput_change:+.1%}",
            f"{_ms(step.base_p99_ms)} → {_ms(step.new_p99_ms)}",
            "-" if step.p99_change is None else f"{step.p99_change:+.1%}",
            "[red]" + "; ".join(step.regressions) + "[/]" if step.regressions else "ok",
        )
    out.print(table)
    if result.new_failed:
        out.print("[red]the new run failed (over 1% of its requests)[/]")
    for key in result.only_in_base:
        out.print(f"not compared (only in the base): {key}")
    for key in result.only_in_new:
        out.print(f"not compared (only in the new run): {key}")
    out.print("[red]regression[/]" if result.regressed else "no regression")


# -- sweep ----------------------------------------------------------------------------------


def _sweep(
    model: str,
    specs: list[str],
    plan: Plan,
    *,
    repository: Path | None,
    budget: str | None,
    write: bool,
    batch: int,
    shapes: list[str],
    timeout: float,
    pricing: Pricing | None,
    as_json: bool,
    plot: Path | None,
) -> None:
    from deploy.bench.inputs import parse_shapes
    from deploy.bench.sweep import parse_axes, parse_budget, run_sweep, write_best
    from deploy.config import load_settings
    from deploy.extras import require

    axes = parse_axes(specs)
    budget_ms = parse_budget(budget) if budget is not None else None
    require("local")  # before packaging: the endpoint it starts needs it
    folder = repository or load_settings().repository
    report = run_sweep(
        folder,
        model,
        axes,
        plan,
        budget_ms=budget_ms,
        batch=batch,
        shapes=parse_shapes(shapes),
        timeout_s=timeout,
        pricing=pricing,
        on_variant=None if as_json else _variant_progress(),
    )
    written = write_best(report, folder) if write else None
    if plot is not None:
        _plot_sweep(report, plot)
    if as_json:
        from deploy.cli.output import emit_json

        emit_json({**report.to_dict(), "written": str(written) if written else None})
    else:
        _render_sweep(report, written, plot)
    if report.best() is None:
        raise typer.Exit(1)


def _variant_progress() -> Any:
    from deploy.bench.sweep import VariantResult, describe
    from deploy.cli.output import console

    err = console(stderr=True)

    def show(result: VariantResult) -> None:
        if result.report is None:
            err.print(f"  {describe(result.variant)}: [red]failed[/] ({result.error})")
            return
        best = max(result.report.steps, key=lambda step: step.items_per_s)
        err.print(
            f"  {describe(result.variant)}: up to {best.items_per_s:,.1f} items/s "
            f"(p99 {_ms(best.latency_ms['p99'])} ms at {_short(best)})"
        )

    return show


def _render_sweep(report: SweepReport, written: Path | None, plot: Path | None) -> None:
    from rich.table import Table

    from deploy.bench.sweep import describe, within
    from deploy.cli.output import console

    out = console()
    budget = report.budget_ms
    chosen = report.best()
    table = Table(
        title=f"{report.model}: {len(report.results)} variants"
        + (f", p99 budget {budget:g} ms" if budget is not None else ""),
        caption="latency in ms; err: failed requests; $/M: per million inferences; "
        "ok: p99 within the budget and at most 1% failed; * the best; delay in µs",
    )
    for column in ("variant", "load", "items/s", "p50", "p99", "err", "$/M", "ok"):
        table.add_column(
            column, justify="left" if column in ("variant", "load") else "right", no_wrap=True
        )
    for result in report.results:
        name = describe(result.variant, short=True)
        if result.report is None:
            table.add_row(name, "-", "-", "-", "-", "-", "-", f"[red]{result.error}[/]")
            continue
        for step in result.report.steps:
            best = chosen is not None and chosen[0] is result and chosen[1] is step
            table.add_row(
                name,
                _short(step) + (" *" if best else ""),
                _num(step.items_per_s),
                _ms(step.latency_ms["p50"]),
                _ms(step.latency_ms["p99"]),
                str(step.failed),
                _cost(step.cost_per_million_usd),
                "yes" if within(step, budget) else "no",
            )
            name = ""
    out.print(table)
    if chosen is None:
        out.print("[red]no variant served within the budget with at most 1% failed requests[/]")
    else:
        result, step = chosen
        out.print(
            f"best: [bold]{describe(result.variant)}[/] at {_short(step)}: "
            f"{step.items_per_s:,.1f} items/s, p99 {_ms(step.latency_ms['p99'])} ms"
            + (
                f", ${step.cost_per_million_usd:,.2f} per million inferences"
                if step.cost_per_million_usd is not None
                else ""
            )
        )
    if written is not None:
        out.print(f"wrote {written}")
    if plot is not None:
        out.print(f"wrote {plot}")


def _plot_sweep(report: SweepReport, path: Path) -> None:
    from deploy.bench.plot import Point, Series, render_page, write_page
    from deploy.bench.sweep import describe

    series = []
    table = [["variant", "load", "items/s", "p99 ms", "errors"]]
    for result in report.results:
        if result.report is None:
            continue
        steps = result.report.steps
        points = tuple(
            Point(step.items_per_s, p99, _short(step))
            for step in steps
            if (p99 := step.latency_ms["p99"]) is not None
        )
        series.append(Series(describe(result.variant), points))
        for step in steps:
            table.append(
                [
                    describe(result.variant),
                    _short(step),
                    f"{step.items_per_s:,.1f}",
                    _ms(step.latency_ms["p99"]),
                    str(step.failed),
                ]
            )
    title = f"deploy bench --sweep {report.model}: p99 against throughput"
    write_page(path, render_page(title, series, table=table, budget_ms=report.budget_ms))
