"""python_backend's auto_complete models, called through InvokeEndpoint.

Source: github.com/triton-inference-server/python_backend, examples/auto_complete/client.py
@ f9088ff60944 (BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES). The published client reads
each model's completed configuration (max_batch_size 0 and 4, FP32 [4] inputs and outputs);
InvokeEndpoint has no configuration call, so each model is called with add_sub's request in
that shape (the models compute add_sub). The call is the one in `pb_add_sub.py`.
"""

from tests.corpus.clients.pb_add_sub import add_sub


def run(runtime, endpoint_name, target_models):
    return [
        add_sub(
            runtime,
            endpoint_name,
            target_models["nobatch_auto_complete"],
            "nobatch_auto_complete",
            [4],
        ),
        add_sub(
            runtime,
            endpoint_name,
            target_models["batch_auto_complete"],
            "batch_auto_complete",
            [2, 4],
        ),
    ]
