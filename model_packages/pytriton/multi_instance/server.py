# Adapted from NVIDIA PyTriton, docs/binding_models.md ("Multi-instance model
# inference"), github.com/triton-inference-server/pytriton, Apache License 2.0.
# Changes: torch.nn.Linear(20, 30) on "cuda" and "cpu" becomes a numpy linear
# layer per instance (the SageMaker Triton image has numpy, not PyTorch), with
# fixed weights so every instance computes the same function; the script
# serves after binding.
import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton


class _Linear:
    def __init__(self, in_features: int, out_features: int):
        rng = np.random.default_rng(0)
        self.weight = rng.standard_normal((out_features, in_features)).astype(np.float32)
        self.bias = rng.standard_normal(out_features).astype(np.float32)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x @ self.weight.T + self.bias


class _InferFuncWrapper:
    def __init__(self, model: _Linear, device: str):
        self._model = model
        self._device = device

    @batch
    def __call__(self, **inputs):
        (input1_batch,) = inputs.values()
        output1_batch = self._model(input1_batch)
        return [output1_batch]


def _infer_function_factory(devices):
    infer_fns = []
    for device in devices:
        model = _Linear(20, 30)
        infer_fns.append(_InferFuncWrapper(model=model, device=device))

    return infer_fns


with Triton() as triton:
    triton.bind(
        model_name="Linear",
        infer_func=_infer_function_factory(devices=["cpu", "cpu"]),
        inputs=[
            Tensor(dtype=np.float32, shape=(-1,)),
        ],
        outputs=[
            Tensor(dtype=np.float32, shape=(-1,)),
        ],
        config=ModelConfig(max_batch_size=16),
    )
    triton.serve()
