"""python_backend's pytorch example, called with its add_sub-style client through InvokeEndpoint.

Source: github.com/triton-inference-server/python_backend, examples/pytorch/client.py
@ f9088ff60944 (BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES). Its request is add_sub's (two
FP32 [4] tensors, OUTPUT0 and OUTPUT1); the call is the one in `pb_add_sub.py`.
"""

from tests.corpus.clients.pb_add_sub import add_sub


def run(runtime, endpoint_name, target_models):
    return [add_sub(runtime, endpoint_name, target_models["pytorch"], "pytorch", [4])]
