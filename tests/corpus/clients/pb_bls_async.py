"""python_backend's BLS async client through InvokeEndpoint.

Source: github.com/triton-inference-server/python_backend, examples/bls/async_client.py
@ f9088ff60944 (BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES). Its request is add_sub's (two
FP32 [4] tensors); bls_async answers OUTPUT0 from the `pytorch` model and OUTPUT1 from
`add_sub`. The call is the one in `pb_add_sub.py`.
"""

from tests.corpus.clients.pb_add_sub import add_sub


def run(runtime, endpoint_name, target_models):
    return [add_sub(runtime, endpoint_name, target_models["bls_async"], "bls_async", [4])]
