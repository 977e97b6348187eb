# Adapted from NVIDIA PyTriton, docs/binding_configuration.md ("Response cache"),
# github.com/triton-inference-server/pytriton, Apache License 2.0.
# Changes: the outputs are named "add" and "sub" (the keys the callable returns;
# unnamed they would be OUTPUT_1 and OUTPUT_2 and PyTriton would drop both),
# and the script serves after binding.
import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

triton_config = TritonConfig(
    cache_config=[f"local,size={1024 * 1024}"],  # 1MB
)


@batch
def _add_sub(**inputs):
    a_batch, b_batch = inputs.values()
    add_batch = a_batch + b_batch
    sub_batch = a_batch - b_batch
    return {"add": add_batch, "sub": sub_batch}


with Triton(config=triton_config) as triton:
    triton.bind(
        model_name="AddSub",
        infer_func=_add_sub,
        inputs=[Tensor(shape=(1,), dtype=np.float32), Tensor(shape=(1,), dtype=np.float32)],
        outputs=[
            Tensor(name="add", shape=(1,), dtype=np.float32),
            Tensor(name="sub", shape=(1,), dtype=np.float32),
        ],
        config=ModelConfig(max_batch_size=8, response_cache=True),
    )
    triton.serve()
