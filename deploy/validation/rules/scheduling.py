"""Scheduler rules: dynamic batching, sequence batching, response cache, decoupled models.

Ported from triton-inference-server/core `ValidateModelConfig` and
`Get{Boolean,Typed}SequenceControlProperties` (`model_config_utils.cc`); the
warnings cover what Triton loads but SageMaker's `InvokeEndpoint` cannot use.
"""

from __future__ import annotations

from collections.abc import Iterator

from deploy.repository import Model
from deploy.repository.schema import model_config_pb2 as pb
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.registry import Context, model_rule

_Control = pb.ModelSequenceBatching.Control
_CONTROL_KINDS = {
    _Control.CONTROL_SEQUENCE_START: "START",
    _Control.CONTROL_SEQUENCE_READY: "READY",
    _Control.CONTROL_SEQUENCE_END: "END",
    _Control.CONTROL_SEQUENCE_CORRID: "CORRID",
}
_CORRID_TYPES = {pb.TYPE_UINT64, pb.TYPE_INT64, pb.TYPE_UINT32, pb.TYPE_INT32, pb.TYPE_STRING}


@model_rule
def dynamic_batching(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    file = ctx.file_of(model)
    config = model.config
    if config.max_batch_size < 0:
        yield error(
            model.name,
            file,
            "max_batch_size",
            f"max_batch_size is negative ({config.max_batch_size})",
            "use 0 (no batching) or a positive batch size",
        )
    if not config.HasField("dynamic_batching"):
        return
    batching = config.dynamic_batching
    if config.max_batch_size == 0:
        # Seen on the real tritonserver: it loads and never batches.
        yield warning(
            model.name,
            file,
            "dynamic_batching",
            "dynamic_batching with max_batch_size: 0 is accepted and ignored by Triton",
            "set max_batch_size > 0 to batch requests, or remove dynamic_batching",
        )
    for size in batching.preferred_batch_size:
        if size > config.max_batch_size or size <= 0:
            yield error(
                model.name,
                file,
                "dynamic_batching.preferred_batch_size",
                f"preferred batch size {size} is outside 1..max_batch_size "
                f"({config.max_batch_size})",
                "use preferred sizes between 1 and max_batch_size, or remove them",
            )
    levels = batching.priority_levels
    if levels:
        if not 1 <= batching.default_priority_level <= levels:
            yield error(
                model.name,
                file,
                "dynamic_batching.default_priority_level",
                f"default_priority_level {batching.default_priority_level} is outside "
                f"1..priority_levels ({levels})",
                f"set default_priority_level between 1 and {levels}",
            )
        for level in sorted(batching.priority_queue_policy):
            if not 1 <= level <= levels:
                yield error(
                    model.name,
                    file,
                    f"dynamic_batching.priority_queue_policy[{level}]",
                    f"priority_queue_policy names level {level}, outside 1..priority_levels "
                    f"({levels})",
                    f"use levels between 1 and {levels} as keys",
                )
    if batching.preserve_ordering:
        if levels > 1:
            yield error(
                model.name,
                file,
                "dynamic_batching.preserve_ordering",
                f"preserve_ordering allows one priority level, but priority_levels is {levels}",
                "set priority_levels to 0 or 1, or remove preserve_ordering",
            )
        policies = [("default_queue_policy", batching.default_queue_policy)]
        policies += [
            (f"priority_queue_policy[{level}]", batching.priority_queue_policy[level])
            for level in sorted(batching.priority_queue_policy)
        ]
        for where, policy in policies:
            if (
                policy.default_timeout_microseconds != 0
                and policy.timeout_action == pb.ModelQueuePolicy.DELAY
            ):
                yield error(
                    model.name,
                    file,
                    f"dynamic_batching.{where}.timeout_action",
                    "timeout_action DELAY cannot be combined with preserve_ordering",
                    "use timeout_action: REJECT, or remove preserve_ordering",
                )


@model_rule
def sequence_batching(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    config = model.config
    if not config.HasField("sequence_batching"):
        return
    file = ctx.file_of(model)
    batcher = config.sequence_batching
    if config.response_cache.enable:
        yield error(
            model.name,
            file,
            "response_cache.enable",
            "Triton's response cache does not support sequence batching",
            "set response_cache { enable: false }, or remove sequence_batching",
        )
    yield from _controls(model, file, batcher)
    for size in batcher.oldest.preferred_batch_size:
        if size > config.max_batch_size or size <= 0:
            yield error(
                model.name,
                file,
                "sequence_batching.oldest.preferred_batch_size",
                f"preferred batch size {size} is outside 1..max_batch_size "
                f"({config.max_batch_size})",
                "use preferred sizes between 1 and max_batch_size",
            )
    utilization = batcher.direct.minimum_slot_utilization
    if not 0.0 <= utilization <= 1.0:
        yield error(
            model.name,
            file,
            "sequence_batching.direct.minimum_slot_utilization",
            f"minimum_slot_utilization {utilization:g} is outside 0..1",
            "use a fraction between 0 and 1",
        )


def _controls(model: Model, file: str, batcher: pb.ModelSequenceBatching) -> Iterator[Diagnostic]:
    names: dict[str, int] = {}
    kinds: dict[int, str] = {}
    for index, control_input in enumerate(batcher.control_input):
        where = f"sequence_batching.control_input[{index}]"
        if not control_input.name:
            yield error(model.name, file, f"{where}.name", "control input has no name", "name it")
        elif control_input.name in names:
            yield error(
                model.name,
                file,
                f"{where}.name",
                f'control tensor "{control_input.name}" is declared twice '
                f"(control_input[{names[control_input.name]}] and [{index}])",
                "declare each control tensor once; give each control kind its own tensor",
            )
        else:
            names[control_input.name] = index
        if len(control_input.control) != 1:
            # Triton loads it: no control is inert, several give one tensor
            # several meanings.
            yield warning(
                model.name,
                file,
                f"{where}.control",
                f'control input "{control_input.name}" has {len(control_input.control)} '
                "controls; Triton expects one per control tensor",
                "declare one control per control input",
            )
        for control in control_input.control:
            label = _CONTROL_KINDS.get(control.kind, str(control.kind))
            if control.kind in kinds:
                yield error(
                    model.name,
                    file,
                    f"{where}.control",
                    f"control {label} is declared twice "
                    f'("{kinds[control.kind]}" and "{control_input.name}")',
                    "declare each control kind once",
                )
            kinds[control.kind] = control_input.name
            values = [
                len(control.int32_false_true),
                len(control.fp32_false_true),
                len(control.bool_false_true),
            ]
            if control.kind == _Control.CONTROL_SEQUENCE_CORRID:
                if any(values):
                    yield error(
                        model.name,
                        file,
                        f"{where}.control",
                        "the CORRID control carries the correlation id itself and takes no "
                        "int32_false_true, fp32_false_true or bool_false_true",
                        "remove the *_false_true values; set data_type instead",
                    )
                if control.data_type not in _CORRID_TYPES:
                    yield error(
                        model.name,
                        file,
                        f"{where}.control.data_type",
                        "the CORRID control needs data_type UINT64, INT64, UINT32, INT32 or STRING",
                        "set data_type: TYPE_UINT64",
                    )
            elif sorted(values) != [0, 0, 2]:
                yield error(
                    model.name,
                    file,
                    f"{where}.control",
                    f"control {label} needs exactly one of int32_false_true, fp32_false_true, "
                    "bool_false_true, with two values",
                    "e.g. int32_false_true: [ 0, 1 ]",
                )


@model_rule
def transaction_policy(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    config = model.config
    if not config.model_transaction_policy.decoupled:
        return
    file = ctx.file_of(model)
    if config.response_cache.enable:
        yield error(
            model.name,
            file,
            "response_cache.enable",
            "Triton's response cache does not support decoupled models",
            "set response_cache { enable: false }",
        )
    yield warning(
        model.name,
        file,
        "model_transaction_policy.decoupled",
        "a decoupled model sends its responses as a stream; SageMaker's InvokeEndpoint "
        "(real-time and multi-model) expects exactly one response per request and cannot "
        "serve it",
        "set decoupled: false and return one response per request, or host the model "
        "where Triton's streaming API is reachable",
    )


@model_rule
def model_metrics(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    file = ctx.file_of(model)
    for index, control in enumerate(model.config.model_metrics.metric_control):
        where = f"model_metrics.metric_control[{index}]"
        if not control.metric_identifier.family:
            yield error(
                model.name,
                file,
                f"{where}.metric_identifier.family",
                "metric control names no metric family",
                'set metric_identifier { family: "nv_inference_first_response_histogram_ms" }',
            )
        if not control.histogram_options.buckets:
            yield error(
                model.name,
                file,
                f"{where}.histogram_options.buckets",
                "metric control has no histogram buckets",
                "list the bucket boundaries, e.g. buckets: [ 1, 10, 100 ]",
            )
