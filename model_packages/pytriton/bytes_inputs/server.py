# Adapted from NVIDIA PyTriton, docs/binding_models.md ("Binding Models to
# Triton"), github.com/triton-inference-server/pytriton, Apache License 2.0.
# Changes: the placeholder `model(input1, input2)` is a function of the bytes
# (how many times the single word occurs in each vector of words), a second
# output returns bytes, and the script serves after binding.
import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton


def model(words: np.ndarray, texts: np.ndarray):
    counts = np.array(
        [[float(sum(t == w[0] for t in row))] for w, row in zip(words, texts, strict=True)],
        dtype=np.float32,
    )
    first = np.array([[w[0].upper()] for w in words], dtype=np.bytes_)
    return counts, first


@batch
def infer_fn(**inputs: np.ndarray):
    input1, input2 = inputs.values()
    counts, upper = model(input1, input2)
    return [counts, upper]


with Triton() as triton:
    triton.bind(
        model_name="ModelName",
        infer_func=infer_fn,
        inputs=[
            Tensor(shape=(1,), dtype=np.bytes_),  # sample containing single bytes value
            Tensor(shape=(-1,), dtype=np.bytes_),  # sample containing vector of bytes
        ],
        outputs=[
            Tensor(shape=(-1,), dtype=np.float32),
            Tensor(shape=(1,), dtype=np.bytes_),
        ],
        config=ModelConfig(max_batch_size=8),
        strict=True,
    )
    triton.serve()
