"""The call of AWS's "Triton on a CPU multi-model endpoint with a TorchScript model" notebook:
a binary input built by tritonclient, outputs requested as JSON (`binary_data=False`).

Source: github.com/aws/amazon-sagemaker-examples, archived/jit_trace/Triton_CPU_JIT_MME.ipynb
@ 2d519b52c3a2 (Apache-2.0; Copyright Amazon.com, Inc. or its affiliates), cells [20], [58],
[60] and [61]. Changes: the endpoint name and TargetModel are parameters; the photo (scaled to
[0, 1] by torchvision's ToTensor) is replaced by seeded random values in [0, 1].
"""

import json

import numpy as np
import tritonclient.http as httpclient


def run(runtime_sm_client, endpoint_name, target_models):
    rng = np.random.default_rng(20)
    input_data = rng.random((1, 3, 224, 224), dtype=np.float32)

    inputs = [httpclient.InferInput("INPUT__0", input_data.shape, "FP32")]
    inputs[0].set_data_from_numpy(input_data, binary_data=True)
    outputs_data = [
        httpclient.InferRequestedOutput(f"OUTPUT__{n}", binary_data=False) for n in range(3)
    ]

    request_body, header_length = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs_data
    )

    response_invoke = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/vnd.sagemaker-triton.binary+json;json-header-size={}".format(
            header_length
        ),
        Body=request_body,
        TargetModel=target_models["jit-resnet-v1-model"],
    )
    header_length_prefix = "application/vnd.sagemaker-triton.binary+json;json-header-size="
    header_length_str = response_invoke["ContentType"][len(header_length_prefix) :]
    if not header_length_str:
        header_length_str = "0"
    binary_response = response_invoke["Body"].read()

    r = json.loads(binary_response.decode())
    bboxes = np.array(r["outputs"][0]["data"])
    bboxes = bboxes.reshape(int(bboxes.shape[0] / 4), 4)

    dtypes = {"FP32": np.float32, "INT64": np.int64}
    outputs = {
        o["name"]: np.array(o["data"], dtypes[o["datatype"]]).reshape(o["shape"])
        for o in r["outputs"]
    }
    return [
        {"model": "jit-resnet-v1-model", "inputs": {"INPUT__0": input_data}, "outputs": outputs}
    ]
