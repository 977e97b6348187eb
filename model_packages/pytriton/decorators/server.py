# Adapted from NVIDIA PyTriton, docs/inference_callables/decorators.md
# ("Stacking multiple decorators", "Sample"),
# github.com/triton-inference-server/pytriton, Apache License 2.0.
# Changes: the callables compute something (the input scaled by the
# temperature, the config's max_batch_size from the Triton context; a doubled
# sequence), the context is read as `triton_context.model_configs[infer]`
# (PyTriton's TritonContext has no `model_config` attribute), and the script
# binds and serves both models.
import numpy as np
from pytriton.decorators import (
    batch,
    fill_optionals,
    first_value,
    group_by_keys,
    group_by_values,
    sample,
    triton_context,
)
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton


@fill_optionals(temperature=np.array([0.7], dtype=np.float32))
@group_by_keys
@batch
@group_by_values("temperature")
@first_value("temperature")
@triton_context
def infer(triton_context, mandatory_input, temperature, opt1=None, opt2=None):
    model_config = triton_context.model_configs[infer]
    scaled = mandatory_input * np.float32(temperature)
    if opt1 is not None:
        scaled = scaled + opt1
    limit = np.full((mandatory_input.shape[0], 1), model_config.max_batch_size, dtype=np.int32)
    return {"scaled": scaled, "max_batch_size": limit}


@sample
def doubled(sequence):
    return {"doubled": np.concatenate([sequence, sequence])}


with Triton() as triton:
    triton.bind(
        model_name="Temperature",
        infer_func=infer,
        inputs=[
            Tensor(name="mandatory_input", dtype=np.float32, shape=(-1,)),
            Tensor(name="temperature", dtype=np.float32, shape=(1,), optional=True),
            Tensor(name="opt1", dtype=np.float32, shape=(-1,), optional=True),
        ],
        outputs=[
            Tensor(name="scaled", dtype=np.float32, shape=(-1,)),
            Tensor(name="max_batch_size", dtype=np.int32, shape=(1,)),
        ],
        config=ModelConfig(max_batch_size=16),
    )
    triton.bind(
        model_name="Doubler",
        infer_func=doubled,
        inputs=[Tensor(name="sequence", dtype=np.int64, shape=(-1,))],
        outputs=[Tensor(name="doubled", dtype=np.int64, shape=(-1,))],
        config=ModelConfig(batching=False),
    )
    triton.serve()
