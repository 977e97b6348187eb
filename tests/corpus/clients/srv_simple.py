"""Triton's `simple` HTTP client through InvokeEndpoint: INPUT0 as JSON, INPUT1 binary,
OUTPUT0 binary and OUTPUT1 as JSON.

Source: github.com/triton-inference-server/client,
src/python/examples/simple_http_infer_client.py @ 58a44caa0dce (BSD-3-Clause; Copyright (c)
2020-2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.), `test_infer` and its inputs.
Changes: `triton_client.infer(...)` becomes `generate_request_body` + `invoke_endpoint` +
`parse_response_body`; query parameters and compression are not part of InvokeEndpoint.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def test_infer(runtime, endpoint_name, target_model, input0_data, input1_data):
    inputs = []
    outputs = []
    inputs.append(httpclient.InferInput("INPUT0", [1, 16], "INT32"))
    inputs.append(httpclient.InferInput("INPUT1", [1, 16], "INT32"))

    # Initialize the data
    inputs[0].set_data_from_numpy(input0_data, binary_data=False)
    inputs[1].set_data_from_numpy(input1_data, binary_data=True)

    outputs.append(httpclient.InferRequestedOutput("OUTPUT0", binary_data=True))
    outputs.append(httpclient.InferRequestedOutput("OUTPUT1", binary_data=False))
    return infer(runtime, endpoint_name, target_model, inputs, outputs)


def run(runtime, endpoint_name, target_models):
    # Create the data for the two input tensors. Initialize the first
    # to unique integers and the second to all ones.
    input0_data = np.arange(start=0, stop=16, dtype=np.int32)
    input0_data = np.expand_dims(input0_data, axis=0)
    input1_data = np.full(shape=(1, 16), fill_value=-1, dtype=np.int32)

    results = test_infer(runtime, endpoint_name, target_models["simple"], input0_data, input1_data)
    return [
        {
            "model": "simple",
            "inputs": {"INPUT0": input0_data, "INPUT1": input1_data},
            "outputs": {
                "OUTPUT0": results.as_numpy("OUTPUT0"),
                "OUTPUT1": results.as_numpy("OUTPUT1"),
            },
        }
    ]
