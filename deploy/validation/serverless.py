"""What a SageMaker serverless endpoint refuses or struggles with, checked offline.

A serverless stage (`hosting = "serverless"`) serves the router layout (every
model plus the router in one archive) on serverless capacity, which has
limits an instance-backed endpoint has not
(docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints-invoke.html and
the feature exclusions of serverless-endpoints.html):

- CPU only: a GPU instance type (the stage's `instance_type` only picks the
  image there) or a `KIND_GPU` instance group is an error;
- request and response payloads of at most 4 MB: a model whose full batch is
  larger by its declared shapes gets a warning (the SDK refuses such requests
  before sending them);
- memory (`infra.serverless_memory_mb`, 1-6 GB) holds Triton, the python
  backend's stub processes (the router's instances among them) and the loaded
  weights: model files larger than it are an error, over half of it a warning;
- a copy must download and unpack the archive, start Triton and answer `/ping`
  within 3 minutes (its models load then or on their first call, which has
  the 60 s of a call): a large archive gets a warning with its size;
- a call ends after 60 s: a queue delay or queue timeout that long is a warning.

Each diagnostic names the file and field (a model's config.pbtxt, or the
settings file and setting). Nothing here calls AWS.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from deploy.config import DeploySettings
from deploy.errors import ConfigError
from deploy.hosting.limits import SERVERLESS_MAX_REQUEST
from deploy.repository import Model, Repository
from deploy.repository.files import model_entries
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.instances import gpu_count

MIB = 1024 * 1024
PAYLOAD_LIMIT_BYTES = SERVERLESS_MAX_REQUEST  # request and response, each
CALL_TIMEOUT_S = 60
START_BUDGET_S = 180
# No figure for SageMaker's download and start rate is published; past this
# size the archive alone takes a noticeable share of the 3 minutes, and its
# models must still load (at start or on first use). A warning, not a limit.
START_WARNING_BYTES = 512 * MIB
# The share of serverless memory model files may take before a warning: Triton,
# the python backend stubs (one per instance; the router runs several) and
# request buffers share the rest, and loaded weights often exceed their files.
MEMORY_WARNING_SHARE = 0.5
# Where a request fits instead; named in messages about payloads.
LARGE_PAYLOAD_HOSTING = 'hosting = "async" (request bodies up to 1 GB through S3)'
LONG_CALL_HOSTING = 'hosting = "async" (calls up to 1 hour)'

_BYTES_PER_ELEMENT = {
    "BOOL": 1,
    "UINT8": 1,
    "INT8": 1,
    "UINT16": 2,
    "INT16": 2,
    "FP16": 2,
    "BF16": 2,
    "UINT32": 4,
    "INT32": 4,
    "FP32": 4,
    "UINT64": 8,
    "INT64": 8,
    "FP64": 8,
}
_STAGE = ""  # `Diagnostic.model` of findings about the stage rather than one model


def serverless_diagnostics(
    repository: Repository,
    settings: DeploySettings,
    *,
    settings_file: str,
    archive_bytes: int | None = None,
) -> list[Diagnostic]:
    """Every serverless finding for `repository` under `settings`, stage-level first.

    `settings_file` names where the settings come from (deploy.toml); with
    `archive_bytes` (after packaging) the start-budget warning uses the archive's
    size, otherwise the model files' total.
    """
    found = list(_instance_type(settings, settings_file))
    sizes = {name: model_bytes(model) for name, model in sorted(repository.models.items())}
    found.extend(_memory(sizes, settings, settings_file))
    found.extend(_start_budget(sizes, settings_file, archive_bytes))
    for _, model in sorted(repository.models.items()):
        file = str(model.config_path or model.path)
        found.extend(_instance_groups(model, file))
        found.extend(_payloads(model, file))
        found.extend(_queueing(model, file))
    return found


def package_findings(
    model_sizes: dict[str, int],
    archive_bytes: int,
    settings: DeploySettings,
    *,
    settings_file: str,
) -> list[Diagnostic]:
    """Memory and start-budget findings for a package: its models' bytes and the
    archive's size (what a copy downloads before it can answer)."""
    return [
        *_memory(model_sizes, settings, settings_file),
        *_start_budget(model_sizes, settings_file, archive_bytes),
    ]


def require_cpu_instance(settings: DeploySettings, *, where: str = "instance_type") -> None:
    """The settings check of a serverless stage: ConfigError for a GPU instance type."""
    for found in _instance_type(settings, where):
        raise ConfigError(found.message, where=where, fix=found.fix)


def model_bytes(model: Model) -> int:
    """Bytes of the files that make up `model`'s folder (links followed)."""
    total = 0
    for relative in model_entries(model.path):
        path = model.path / relative
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            continue  # an unreadable file is reported by the repository rules
    return total


def size(nbytes: int) -> str:
    return f"{nbytes / MIB:.1f} MB" if nbytes < 1024 * MIB else f"{nbytes / (1024 * MIB):.2f} GB"


def _instance_type(settings: DeploySettings, settings_file: str) -> Iterator[Diagnostic]:
    gpus = gpu_count(settings.instance_type)
    if gpus:
        yield error(
            _STAGE,
            settings_file,
            "instance_type (--instance)",
            f"{settings.instance_type} has {gpus} GPU(s), but serverless endpoints run on CPU "
            "only (a serverless stage uses instance_type only to pick the Triton image)",
            "set instance_type to a CPU type such as ml.m5.xlarge, or pick hosting "
            '"multi-model" or "async" to run on GPUs',
        )


def _memory(
    sizes: dict[str, int], settings: DeploySettings, settings_file: str
) -> Iterator[Diagnostic]:
    memory_mb = settings.infra.serverless_memory_mb
    memory = memory_mb * MIB
    total = sum(sizes.values())
    largest = ", ".join(
        f"{name} {size(nbytes)}"
        for name, nbytes in sorted(sizes.items(), key=lambda item: -item[1])[:3]
    )
    field = "infra.serverless_memory_mb"
    if total > memory:
        yield error(
            _STAGE,
            settings_file,
            field,
            f"the models' files take {size(total)} ({largest}), more than the "
            f"{memory_mb} MB a serverless copy has; a copy serves every model of the "
            "router layout",
            "raise serverless_memory_mb (at most 6144), serve fewer or smaller models, or "
            'pick hosting "multi-model" on an instance with more memory',
        )
    elif total > memory * MEMORY_WARNING_SHARE:
        needed = min(6144, 1024 * math.ceil(total / MEMORY_WARNING_SHARE / (1024 * MIB)))
        yield warning(
            _STAGE,
            settings_file,
            field,
            f"the models' files take {size(total)} ({largest}) of the {memory_mb} MB a "
            "serverless copy has; Triton, the python backend stubs and request buffers "
            "share the rest, and loaded weights often exceed their files",
            f"raise serverless_memory_mb (to {needed} MB or more), or check MemoryUtilization "
            "after deploying",
        )


def _start_budget(
    sizes: dict[str, int], settings_file: str, archive_bytes: int | None
) -> Iterator[Diagnostic]:
    measured = archive_bytes if archive_bytes is not None else sum(sizes.values())
    if measured < START_WARNING_BYTES:
        return
    what = "the archive is" if archive_bytes is not None else "the models' files are"
    yield warning(
        _STAGE,
        settings_file,
        "hosting",
        f"{what} {size(measured)}: a serverless copy must download and unpack it, start "
        f"Triton and answer /ping within {START_BUDGET_S // 60} minutes, or SageMaker fails "
        "the start, and its models must then load (watch the ModelSetupTime alarm)",
        "keep serverless archives small (well under "
        f"{size(START_WARNING_BYTES)}), set infra.serverless_provisioned_concurrency to start "
        'copies before traffic, or pick hosting "multi-model" or "async"',
    )


def _instance_groups(model: Model, file: str) -> Iterator[Diagnostic]:
    from deploy.repository.schema import model_config_pb2 as pb

    kind = pb.ModelInstanceGroup
    for index, group in enumerate(model.config.instance_group):
        where = f"instance_group[{index}]"
        if group.kind == kind.KIND_GPU:
            yield error(
                model.name,
                file,
                f"{where}.kind",
                "KIND_GPU, but serverless endpoints have no GPU; Triton refuses to load it",
                'use kind: KIND_CPU (or KIND_AUTO), or pick hosting "multi-model" or "async" '
                "on a GPU instance",
            )
        elif group.gpus:
            yield error(
                model.name,
                file,
                f"{where}.gpus",
                "gpus are listed, but serverless endpoints have no GPU (the group runs on CPU, "
                "which must list no gpus)",
                "remove gpus from the instance group",
            )


def _fixed_bytes(model: Model, tensors: str) -> tuple[str, int] | None:
    """(largest tensor, bytes of a full batch of every declared tensor), or None
    when a size is not known from the config (a -1 dimension, BYTES)."""
    batch = max(model.max_batch_size, 1)
    total = 0
    largest = ("", 0)
    for tensor in getattr(model, tensors):
        element = _BYTES_PER_ELEMENT.get(tensor.datatype)
        if element is None or any(dim < 0 for dim in tensor.shape):
            return None
        nbytes = batch * element * math.prod(tensor.shape)
        total += nbytes
        if nbytes > largest[1]:
            largest = (tensor.name, nbytes)
    return largest[0], total


def _payloads(model: Model, file: str) -> Iterator[Diagnostic]:
    batch = f"max_batch_size {model.max_batch_size}" if model.max_batch_size else "one request"
    for tensors, what in (("inputs", "request"), ("outputs", "response")):
        known = _fixed_bytes(model, tensors)
        if known is None or known[1] <= PAYLOAD_LIMIT_BYTES:
            continue
        name, _ = known
        yield warning(
            model.name,
            file,
            "max_batch_size" if model.max_batch_size else tensors[:-1],
            f"a full {what} ({batch}) carries {size(known[1])} of tensor data (largest: "
            f"{name}), over the {size(PAYLOAD_LIMIT_BYTES)} serverless endpoints accept; "
            "such calls are refused",
            f"send smaller batches (lower max_batch_size), or pick {LARGE_PAYLOAD_HOSTING}",
        )


def _queueing(model: Model, file: str) -> Iterator[Diagnostic]:
    config = model.config
    if not config.HasField("dynamic_batching"):
        return
    batching = config.dynamic_batching
    limit_us = CALL_TIMEOUT_S * 1_000_000
    fix = f"keep queueing well under {CALL_TIMEOUT_S} s, or pick {LONG_CALL_HOSTING}"
    if batching.max_queue_delay_microseconds >= limit_us:
        yield warning(
            model.name,
            file,
            "dynamic_batching.max_queue_delay_microseconds",
            f"a request may wait {batching.max_queue_delay_microseconds / 1e6:.0f} s for a "
            f"batch, but serverless calls end after {CALL_TIMEOUT_S} s",
            fix,
        )
    timeout = batching.default_queue_policy.default_timeout_microseconds
    if timeout > limit_us:
        yield warning(
            model.name,
            file,
            "dynamic_batching.default_queue_policy.default_timeout_microseconds",
            f"requests are kept queued up to {timeout / 1e6:.0f} s, but serverless calls end "
            f"after {CALL_TIMEOUT_S} s: Triton would still run requests nobody waits for",
            fix,
        )
