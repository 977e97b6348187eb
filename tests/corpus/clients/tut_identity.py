"""The Triton tutorials' Python API identity request, sent through InvokeEndpoint.

Source: github.com/triton-inference-server/tutorials, Triton_Inference_Server_Python_API/README.md
@ e84895253165 (BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES): `model.infer(inputs=
{"string_input": [["hello world!"]]})`. Changes: the in-process `tritonserver` API becomes a v2
JSON body sent with `invoke_endpoint`; the optional `fp16_input` is left out, as there.
"""

import json

import numpy as np


def run(runtime, endpoint_name, target_models):
    payload = {
        "inputs": [
            {"name": "string_input", "shape": [1, 1], "datatype": "BYTES", "data": ["hello world!"]}
        ]
    }
    response = runtime.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/json",
        Body=json.dumps(payload),
        TargetModel=target_models["identity"],
    )
    outputs = json.loads(response["Body"].read())["outputs"]
    return [
        {
            "model": "identity",
            "inputs": {"string_input": np.array([[b"hello world!"]], dtype=object)},
            "outputs": {
                o["name"]: np.array(o["data"], dtype=object).reshape(o["shape"]) for o in outputs
            },
        }
    ]
