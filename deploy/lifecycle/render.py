"""Rich renderings of plans, results and status, readable at a glance."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deploy.lifecycle.actions import (
    Action,
    CreateComponent,
    CreateModelStore,
    DeleteComponent,
    Provision,
    PublishManifest,
    UpdateComponent,
    UploadArchive,
)
from deploy.lifecycle.plan import Plan
from deploy.lifecycle.prices import ServerlessCostEstimate

if TYPE_CHECKING:
    from rich.console import Console

_ACTION_STYLE = {
    "new": "green",
    "changed": "yellow",
    "unchanged": "dim",
    "removed": "red",
    "unknown": "dim",
}


def size(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{nbytes} B"


def render_plan(plan: Plan, out: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    where = plan.provider
    if plan.region is not None:
        where = f"{plan.provider}, region {plan.region} from {plan.region_source}"
    out.print(
        f"[bold]deploy up[/] stage [bold]{plan.stage}[/] ({where}), "
        f"endpoint [bold]{plan.endpoint}[/]"
    )
    if plan.offline_reason is not None:
        out.print(f"[yellow]offline plan[/]: {plan.offline_reason}; not compared:")
        for part in plan.needs_credentials:
            out.print(f"  - {part}", markup=False)
    models = Table(title="models (↑ = to upload)")
    models.add_column("model", overflow="fold")
    models.add_column("change")
    models.add_column("target model", overflow="fold")  # never truncated: users copy it
    models.add_column("size", justify="right", no_wrap=True)
    canaries = {canary.name: canary for canary in plan.canaries}
    for change in plan.models:
        style = _ACTION_STYLE[change.action]
        label = "?" if change.action == "unknown" else change.action
        canary = canaries.get(change.name)
        if canary is not None:  # the live version stays; the new one takes a share
            target = escape(canary.describe().removeprefix(f"{change.name} "))
        else:
            target = change.target_model + (
                f"\n[dim]was {change.previous_target_model}[/]"
                if change.action == "changed"
                else ""
            )
        models.add_row(
            change.name,
            f"[{style}]{label}[/]" + (" ↑" if change.upload else ""),
            target,
            size(change.bytes),
        )
    out.print(models)
    removed = [m.name for m in plan.models if m.action == "removed"]
    if removed:
        out.print(
            f"[red]removed[/]: {', '.join(removed)} (in the published manifest, not in "
            "this repository): clients can no longer call them once the manifest is published"
        )
    if plan.archive is not None:
        _render_single_model(plan, out)
    elif plan.offline_reason is None:
        upload = sum(change.bytes for change in plan.uploads)
        out.print(f"to upload: {len(plan.uploads)} archive(s), {size(upload)}")
    infra = Table("setting", "now", "after", title=f"infrastructure: {plan.infra_action}")
    unknown = "?" if plan.offline_reason is not None else "-"
    for item in plan.infra:
        infra.add_row(item.setting, item.before or unknown, f"[yellow]{item.after}[/]")
    if infra.row_count:
        out.print(infra)
    _render_actions(plan, out)
    if plan.cost is not None:
        out.print(f"estimated cost: {plan.cost.describe()}")
    for note in plan.notes:
        out.print(f"[yellow]note[/]: {escape(note)}")


def _render_actions(plan: Plan, out: Console) -> None:
    """The changes, numbered in the order `deploy up` applies them (`Plan.actions`)."""
    from rich.markup import escape

    if plan.offline_reason is not None:
        return  # nothing was compared: the parts above that need credentials say so
    actions = plan.actions
    if not actions:
        out.print("changes: none (nothing to upload, provision or publish)")
        return
    out.print(f"[bold]changes[/] ({len(actions)}, applied in this order):")
    for number, action in enumerate(actions, start=1):
        out.print(f"  {number}. {escape(render_action(action))}")


def render_action(action: Action) -> str:
    """One line saying what the action changes and why."""
    return RENDERERS[type(action)](action)


def _create_model_store(action: CreateModelStore) -> str:
    return f"create stack {action.stack}: the model store ({action.why})"


def _upload(action: UploadArchive) -> str:
    models = action.models[0] if len(action.models) == 1 else f"{len(action.models)} models"
    return f"upload {action.key} ({size(action.bytes)}): {models}, {action.why}"


def _provision(action: Provision) -> str:
    return f"{action.change} {action.resource} {action.name} ({action.why})"


def _publish(action: PublishManifest) -> str:
    return f"publish the manifest: {', '.join(action.changes)}"


def _create_component(action: CreateComponent) -> str:
    return f"create component {action.name} for model {action.model}: {action.why}"


def _update_component(action: UpdateComponent) -> str:
    how = "rolling update" if action.respec else "copy autoscaling"
    return f"update component {action.name} ({how}): {action.why}"


def _delete_component(action: DeleteComponent) -> str:
    return (
        f"delete component {action.name} after publishing ({action.why}; the manifest "
        "no longer names it)"
    )


# One renderer per action kind (a test holds this to deploy.lifecycle.actions.ACTION_KINDS).
RENDERERS: dict[type[Any], Callable[[Any], str]] = {
    CreateModelStore: _create_model_store,
    UploadArchive: _upload,
    Provision: _provision,
    CreateComponent: _create_component,
    UpdateComponent: _update_component,
    PublishManifest: _publish,
    DeleteComponent: _delete_component,
}


def _render_single_model(plan: Plan, out: Console) -> None:
    """inf1: the one archive (every model + router) and the single-model endpoint."""
    archive = plan.archive
    if archive is None:
        return
    state = "unchanged" if archive.key == archive.previous_key else "new"
    upload = f"to upload: 1 archive, {size(archive.bytes)}" if archive.upload else "stored"
    out.print(
        f"archive ({len(plan.models)} model(s) + router): {archive.key} ({state}), "
        f"{size(archive.bytes)}; {upload}"
        + (f"\n  was {archive.previous_key}" if state == "new" and archive.previous_key else "")
    )
    if isinstance(plan.cost, ServerlessCostEstimate):
        cost = plan.cost
        warm = f", {cost.provisioned_concurrency} kept warm" if cost.provisioned_concurrency else ""
        out.print(
            f"hosting: serverless endpoint, {cost.memory_mb} MB per copy, up to "
            f"{cost.max_concurrency} concurrent{warm} (router + every model, CPU)"
        )
    else:
        spec = {item.setting: item.after for item in plan.infra}
        instance = spec.get("instance_type") or (plan.cost.instance_type if plan.cost else "")
        counts = ""
        if plan.cost is not None:
            counts = f", {plan.cost.min_instances}-{plan.cost.max_instances} instance(s)"
        out.print(f"hosting: {plan.hosting} endpoint on {instance}{counts} (router + every model)")


def render_status(document: dict[str, Any], out: Console) -> None:
    from rich.table import Table

    out.print(f"stage [bold]{document['stage']}[/] ({document['region']})")
    stacks = Table("stack", "status", title="stacks")
    for name, status in document.get("stacks", {}).items():
        stacks.add_row(name, status)
    out.print(stacks if stacks.row_count else "no stacks")
    endpoint = document.get("endpoint")
    if endpoint:
        scaling = document.get("scaling") or {}
        serverless = endpoint.get("serverless")
        capacity = (
            f"serverless, {serverless['memory_mb']} MB, up to {serverless['max_concurrency']} "
            "concurrent"
            if serverless
            else f"{endpoint['instance_count']} x {endpoint['instance_type']}"
        )
        out.print(
            f"endpoint [bold]{endpoint['name']}[/] {endpoint['status']}: variant "
            f"{endpoint['variant']}, {capacity}"
            + (f", scaling {scaling['min']}-{scaling['max']}" if scaling else "")
        )
    metrics = document.get("metrics")
    if metrics:
        latency = metrics["model_latency_avg_ms"]
        out.print(
            f"last {metrics['window_minutes']} min: {metrics['invocations']:.0f} invocations, "
            f"{metrics['errors_5xx']:.0f} 5XX, model latency "
            + (f"{latency:.1f} ms avg" if latency is not None else "n/a")
        )
    components = document.get("components")
    if components:
        table = Table("component", "status", "copies", "copy needs", title="inference components")
        for name, item in components.items():
            bounds = (
                f" ({item['min_copies']}-{item['max_copies']})"
                if item["min_copies"] is not None
                else ""
            )
            copies = "-" if item["copies"] is None else str(item["copies"])
            if item["desired_copies"] not in (None, item["copies"]):
                copies += f" of {item['desired_copies']}"
            needs = f"{item['cpus']:g} CPU, {item['memory_mb']} MB" + (
                f", {item['accelerators']} accelerator(s)" if item["accelerators"] else ""
            )
            status = item["status"] + (
                f": {item['failure_reason']}" if item["failure_reason"] else ""
            )
            table.add_row(name, status, copies + bounds, needs)
        out.print(table)
    alarms = document.get("canary_alarms")
    if alarms:
        table = Table("alarm (model/canary/kind)", "state", title="canary alarms")
        for alarm in alarms:
            state = alarm["state"] + (
                " (canary ended; the next deploy up, promote or rollback deletes it)"
                if alarm["canary_ended"]
                else ""
            )
            table.add_row(alarm["alarm"], state)
        out.print(table)
    models = Table("model", "target model", title="manifest")
    for name, target in document.get("models", {}).items():
        models.add_row(name, target)
    if models.row_count:
        out.print(models)
    if "calls_window_s" in document:
        title = f"calls, last {window_text(document['calls_window_s'])}"
        render_calls(document.get("calls", []), out, title=title)


def window_text(seconds: int) -> str:
    """3600 → `1h`, 1800 → `30m`, 172800 → `2d` (what `--window` takes)."""
    for unit, size in (("d", 86400), ("h", 3600)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds // 60}m"


def render_calls(rows: list[dict[str, Any]], out: Console, *, title: str) -> None:
    """Calls per logical model: the same table for the local endpoint (its /metrics, since
    it started) and AWS (the per-model metrics in CloudWatch, over a window)."""
    from rich.table import Table

    def ms(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds * 1000:.1f}"

    table = Table("model", "calls", "p50 ms", "p99 ms", "errors", title=title)
    for row in rows:
        errors = ", ".join(f"{n} {kind}" for kind, n in row["errors"].items() if n)
        table.add_row(
            row["model"] or f"({row['target_model']})",
            str(row["calls"]),
            ms(row["p50_seconds"]),
            ms(row["p99_seconds"]),
            errors or "0",
        )
    if table.row_count:
        out.print(table)
    else:
        out.print(f"{title}: no calls")
