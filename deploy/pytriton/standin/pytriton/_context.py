"""The Triton context PyTriton gives a bound callable before serving it."""

from __future__ import annotations

from typing import Any

from .model_config.common import DeviceKind
from .model_config.triton_model_config import ResponseCache, TensorSpec, TritonModelConfig
from .triton import Binding


def triton_model_config(binding: Binding) -> TritonModelConfig:
    """The config PyTriton gives the decorators (names default to INPUT_n / OUTPUT_n)."""
    config = binding.config
    return TritonModelConfig(
        model_name=str(binding.model_name),
        model_version=int(binding.model_version),
        batching=config.batching,
        batcher=config.batcher,
        max_batch_size=config.max_batch_size,
        decoupled=config.decoupled,
        instance_group={DeviceKind.KIND_CPU: len(binding.infer_funcs)},
        inputs=[
            TensorSpec(t.name or f"INPUT_{i}", tuple(t.shape), t.dtype, t.optional)
            for i, t in enumerate(binding.inputs, start=1)
        ],
        outputs=[
            TensorSpec(t.name or f"OUTPUT_{i}", tuple(t.shape), t.dtype)
            for i, t in enumerate(binding.outputs, start=1)
        ],
        response_cache=ResponseCache(enable=True) if config.response_cache else None,
    )


def inject_triton_context(binding: Binding, func: Any, config: TritonModelConfig) -> None:
    """What PyTriton's `Model.setup` does before serving the callable."""
    binding.context.model_configs[func] = config
    if hasattr(func, "__self__"):
        func.__self__.__triton_context__ = binding.context
    else:
        func.__triton_context__ = binding.context
