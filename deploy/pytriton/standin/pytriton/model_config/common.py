"""Dynamic batcher, queue policy and warmup settings (`pytriton.model_config.common`)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class DeviceKind(enum.Enum):
    KIND_AUTO = "KIND_AUTO"
    KIND_CPU = "KIND_CPU"
    KIND_GPU = "KIND_GPU"


class TimeoutAction(enum.Enum):
    REJECT = "REJECT"
    DELAY = "DELAY"


@dataclasses.dataclass
class QueuePolicy:
    timeout_action: TimeoutAction = TimeoutAction.REJECT
    default_timeout_microseconds: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0


@dataclasses.dataclass
class DynamicBatcher:
    max_queue_delay_microseconds: int = 0
    preferred_batch_size: list[int] | None = None
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: QueuePolicy | None = None
    priority_queue_policy: dict[int, QueuePolicy] | None = None


@dataclasses.dataclass
class WarmupInput:
    dtype: Any
    shape: Any
    zero_data: bool | None = False
    random_data: bool | None = False
    input_data_file: str | None = None


@dataclasses.dataclass
class ModelWarmup:
    name: str
    batch_size: int
    inputs: dict[str, WarmupInput]
    count: int
