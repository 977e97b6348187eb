"""`ModelConfig`: batching, batcher, cache, decoupled (`pytriton.model_config.model_config`)."""

from __future__ import annotations

import dataclasses

from .common import DynamicBatcher, ModelWarmup


@dataclasses.dataclass
class ModelConfig:
    batching: bool = True
    max_batch_size: int = 4
    batcher: DynamicBatcher | None = dataclasses.field(default_factory=DynamicBatcher)
    response_cache: bool = False
    decoupled: bool = False
    model_warmup: list[ModelWarmup] | None = None
