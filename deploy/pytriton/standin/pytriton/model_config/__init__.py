"""Model configuration classes, as `pytriton.model_config` exports them."""

from .common import DeviceKind, DynamicBatcher, ModelWarmup, QueuePolicy, TimeoutAction, WarmupInput
from .model_config import ModelConfig
from .tensor import Tensor

__all__ = [
    "DeviceKind",
    "DynamicBatcher",
    "ModelConfig",
    "ModelWarmup",
    "QueuePolicy",
    "Tensor",
    "TimeoutAction",
    "WarmupInput",
]
