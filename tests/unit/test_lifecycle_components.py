"""The plan's per-component changes (hosting components): what differs is what changes."""

from __future__ import annotations

import dataclasses

from deploy.aws.inference_components import Deployed
from deploy.hosting.component_sizing import Component, ComponentSpec, Requirements
from deploy.lifecycle.components import plan_components, requested

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"


def url(key: str) -> str:
    return f"s3://store/models/{key}"


def component(model: str, key: str, *, gpus: int = 0, low: int = 1, high: int = 4) -> Component:
    spec = ComponentSpec(model, Requirements(gpus, 2.0, 2048), low, high)
    return Component(f"ep-{model}", key, spec)


def deployed(wanted: Component, **changes: object) -> Deployed:
    """The component as SageMaker would describe it after `deploy up` made it."""
    sent = requested(wanted, image=IMAGE, artifact_url=url(wanted.archive_key))
    now = Deployed(
        name=sent.name,
        status="InService",
        image=sent.image,
        artifact_url=sent.artifact_url,
        environment=sent.environment,
        accelerators=sent.accelerators,
        cpus=sent.cpus,
        memory_mb=sent.memory_mb,
        min_copies=sent.min_copies,
        max_copies=sent.max_copies,
    )
    return dataclasses.replace(now, **changes)  # type: ignore[arg-type]


def plan(
    desired: list[Component], on_endpoint: list[Deployed]
) -> list[tuple[str, str, bool, bool]]:
    changes = plan_components(
        desired, {d.name: d for d in on_endpoint}, image=IMAGE, artifact_url=url
    )
    return [(c.model, c.action, c.respec, c.rescale) for c in changes]


def test_unchanged_components_plan_nothing() -> None:
    gpu, cpu = (
        component("detector", "detector-1.tar.gz", gpus=1),
        component("tabular", "t-1.tar.gz"),
    )
    assert plan([gpu, cpu], [deployed(gpu), deployed(cpu)]) == []


def test_a_new_archive_updates_only_that_component() -> None:
    gpu, cpu = (
        component("detector", "detector-1.tar.gz", gpus=1),
        component("tabular", "t-1.tar.gz"),
    )
    changed = dataclasses.replace(cpu, archive_key="t-2.tar.gz")
    assert plan([gpu, changed], [deployed(gpu), deployed(cpu)]) == [
        ("tabular", "update", True, False)
    ]


def test_requirements_copies_and_failures_each_update() -> None:
    cpu = component("tabular", "t-1.tar.gz")
    assert plan([cpu], [deployed(cpu, memory_mb=1024)]) == [("tabular", "update", True, False)]
    assert plan([cpu], [deployed(cpu, cpus=1.0)]) == [("tabular", "update", True, False)]
    # New copy bounds change the autoscaling only: no rolling update.
    assert plan([cpu], [deployed(cpu, max_copies=2)]) == [("tabular", "update", False, True)]
    assert plan([cpu], [deployed(cpu, status="Failed")]) == [("tabular", "update", True, False)]


def test_added_and_removed_models_create_and_delete_one_component_each() -> None:
    gpu, cpu = (
        component("detector", "detector-1.tar.gz", gpus=1),
        component("tabular", "t-1.tar.gz"),
    )
    assert plan([gpu, cpu], [deployed(gpu)]) == [("tabular", "create", False, False)]
    assert plan([gpu], [deployed(gpu), deployed(cpu)]) == [("tabular", "delete", False, False)]
