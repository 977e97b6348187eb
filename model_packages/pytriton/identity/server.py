# Adapted from NVIDIA PyTriton, docs/binding_models.md ("Inference Callable"),
# github.com/triton-inference-server/pytriton, Apache License 2.0.
# Changes: the page's `lambda requests: requests` returns PyTriton 0.7's
# Request objects under the input's name (INPUT_1), which PyTriton refuses as
# responses (it wants one dict per request, keyed by output name), so the
# lambda maps INPUT_1 to OUTPUT_1; the script serves after binding.
import numpy as np
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton

with Triton() as triton:
    triton.bind(
        model_name="Identity",
        infer_func=lambda requests: [{"OUTPUT_1": request["INPUT_1"]} for request in requests],
        inputs=[Tensor(dtype=np.float32, shape=(1,))],
        outputs=[Tensor(dtype=np.float32, shape=(1,))],
        config=ModelConfig(max_batch_size=8),
    )
    triton.serve()
