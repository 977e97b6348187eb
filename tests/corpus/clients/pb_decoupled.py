"""python_backend's decoupled `square_int32` model, called through InvokeEndpoint.

Source: github.com/triton-inference-server/python_backend, examples/decoupled/square_client.py
@ f9088ff60944 (BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES). The published client streams
over gRPC (`start_stream` / `async_stream_infer`), which SageMaker does not offer; its request
(IN = [4], INT32) is sent the way the AWS notebooks send one.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def run(runtime, endpoint_name, target_models):
    in_value = np.array([4], dtype=np.int32)
    inputs = [httpclient.InferInput("IN", in_value.shape, "INT32")]
    inputs[0].set_data_from_numpy(in_value)
    outputs = [httpclient.InferRequestedOutput("OUT")]
    response = infer(runtime, endpoint_name, target_models["square_int32"], inputs, outputs)
    return [
        {
            "model": "square_int32",
            "inputs": {"IN": in_value},
            "outputs": {"OUT": response.as_numpy("OUT")},
        }
    ]
