"""The Triton tutorials' Llama2 vLLM request through InvokeEndpoint.

Source: github.com/triton-inference-server/tutorials, Popular_Models_Guide/Llama2/vllm_guide.md
@ e84895253165 (BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES): `curl -X POST
localhost:8000/v2/models/llama2vllm/generate -d '{"text_input": "What is Triton Inference
Server?", "parameters": {"stream": false, "temperature": 0}}'`. Changes: SageMaker offers no
`generate` route, so the same prompt goes as vLLM backend's `text_input` tensor in a v2 JSON body.
"""

import json

import numpy as np


def run(runtime, endpoint_name, target_models):
    payload = {
        "inputs": [
            {
                "name": "text_input",
                "shape": [1],
                "datatype": "BYTES",
                "data": ["What is Triton Inference Server?"],
            }
        ],
        "parameters": {"stream": False, "temperature": 0},
    }
    response = runtime.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/json",
        Body=json.dumps(payload),
        TargetModel=target_models["llama2vllm"],
    )
    output = json.loads(response["Body"].read())["outputs"][0]
    return [
        {
            "model": "llama2vllm",
            "inputs": {"text_input": np.array([b"What is Triton Inference Server?"], object)},
            "outputs": {"text_output": np.array(output["data"], object)},
        }
    ]
