"""Triton's `simple_string` HTTP client through InvokeEndpoint: integers as UTF-8 strings,
INPUT0 binary and INPUT1 as JSON, OUTPUT0 binary and OUTPUT1 as JSON.

Source: github.com/triton-inference-server/client,
src/python/examples/simple_http_string_infer_client.py @ 58a44caa0dce (BSD-3-Clause; Copyright
(c) 2020-2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.), `simple_string_inference`.
Changes: `triton_client.infer(...)` becomes `generate_request_body` + `invoke_endpoint` +
`parse_response_body`; the checks return the tensors instead of printing.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def run(runtime, endpoint_name, target_models):
    inputs = []
    outputs = []
    inputs.append(httpclient.InferInput("INPUT0", [1, 16], "BYTES"))
    inputs.append(httpclient.InferInput("INPUT1", [1, 16], "BYTES"))

    # Create the data for the two input tensors. Initialize the first
    # to unique integers and the second to all ones.
    in0 = np.arange(start=0, stop=16, dtype=np.int32)
    in0 = np.expand_dims(in0, axis=0)
    in1 = np.ones(shape=(1, 16), dtype=np.int32)

    in0n = np.array([str(x).encode("utf-8") for x in in0.reshape(in0.size)], dtype=np.object_)
    input0_data = in0n.reshape(in0.shape)
    in1n = np.array([str(x).encode("utf-8") for x in in1.reshape(in1.size)], dtype=np.object_)
    input1_data = in1n.reshape(in1.shape)

    # Initialize the data
    inputs[0].set_data_from_numpy(input0_data, binary_data=True)
    inputs[1].set_data_from_numpy(input1_data, binary_data=False)

    outputs.append(httpclient.InferRequestedOutput("OUTPUT0", binary_data=True))
    outputs.append(httpclient.InferRequestedOutput("OUTPUT1", binary_data=False))

    results = infer(runtime, endpoint_name, target_models["simple_string"], inputs, outputs)
    return [
        {
            "model": "simple_string",
            "inputs": {"INPUT0": input0_data, "INPUT1": input1_data},
            "outputs": {
                "OUTPUT0": results.as_numpy("OUTPUT0"),
                "OUTPUT1": results.as_numpy("OUTPUT1"),
            },
        }
    ]
