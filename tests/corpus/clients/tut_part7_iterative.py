"""Conceptual guide part 7's iterative-gpt2 request, sent through InvokeEndpoint.

Source: github.com/triton-inference-server/tutorials,
Conceptual_Guide/Part_7-iterative_scheduling/client/client.py @ e84895253165 (BSD-3-Clause;
NVIDIA CORPORATION & AFFILIATES), `run_inferences`. Changes: gRPC streaming
(`async_stream_infer`), which SageMaker does not offer, becomes one request built with
`generate_request_body` (same input and parameters).
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def run(runtime, endpoint_name, target_models):
    prompt1 = "Programming in C++ is like"
    inputs0 = [httpclient.InferInput("text_input", [1, 1], "BYTES")]
    inputs0[0].set_data_from_numpy(np.array([[prompt1]], dtype=np.object_))
    parameters = {"ignore_eos": True, "max_tokens": 4}
    result = infer(
        runtime,
        endpoint_name,
        target_models["iterative-gpt2"],
        inputs0,
        None,
        parameters=parameters,
    )
    return [
        {
            "model": "iterative-gpt2",
            "inputs": {"text_input": np.array([[prompt1]], dtype=np.object_)},
            "outputs": {"text_output": result.as_numpy("text_output")},
        }
    ]
