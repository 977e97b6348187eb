"""python_backend's add_sub client, its request sent through SageMaker's InvokeEndpoint.

Source: github.com/triton-inference-server/python_backend, examples/add_sub/client.py
@ f9088ff60944 (BSD-3-Clause; Copyright 2020-2025, NVIDIA CORPORATION & AFFILIATES. All rights
reserved.). Changes: `client.infer(...)` becomes tritonclient's `generate_request_body` +
`invoke_endpoint` + `parse_response_body` (the form AWS's notebooks use); the random inputs are
seeded; the checks return the tensors instead of printing.
"""

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype

CONTENT_TYPE = "application/vnd.sagemaker-triton.binary+json;json-header-size={}"


def infer(runtime, endpoint_name, target_model, inputs, outputs, **kwargs):
    body, header_length = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, **kwargs
    )
    response = runtime.invoke_endpoint(
        EndpointName=endpoint_name,
        # No binary input (header_length None): the body is plain JSON.
        ContentType=CONTENT_TYPE.format(header_length) if header_length else "application/json",
        Body=body,
        TargetModel=target_model,
    )
    header_length_str = response["ContentType"][len(CONTENT_TYPE.format("")) :]
    # A response with no binary output is plain JSON (no json-header-size).
    return httpclient.InferenceServerClient.parse_response_body(
        response["Body"].read(), header_length=int(header_length_str) if header_length_str else None
    )


def add_sub(runtime, endpoint_name, target_model, model_name, shape):
    rng = np.random.default_rng(len(model_name))
    input0_data = rng.random(shape, dtype=np.float32)
    input1_data = rng.random(shape, dtype=np.float32)
    inputs = [
        httpclient.InferInput("INPUT0", input0_data.shape, np_to_triton_dtype(input0_data.dtype)),
        httpclient.InferInput("INPUT1", input1_data.shape, np_to_triton_dtype(input1_data.dtype)),
    ]
    inputs[0].set_data_from_numpy(input0_data)
    inputs[1].set_data_from_numpy(input1_data)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0"),
        httpclient.InferRequestedOutput("OUTPUT1"),
    ]
    response = infer(runtime, endpoint_name, target_model, inputs, outputs, request_id=str(1))
    return {
        "model": model_name,
        "inputs": {"INPUT0": input0_data, "INPUT1": input1_data},
        "outputs": {
            "OUTPUT0": response.as_numpy("OUTPUT0"),
            "OUTPUT1": response.as_numpy("OUTPUT1"),
        },
    }


def run(runtime, endpoint_name, target_models):
    return [add_sub(runtime, endpoint_name, target_models["add_sub"], "add_sub", [4])]
