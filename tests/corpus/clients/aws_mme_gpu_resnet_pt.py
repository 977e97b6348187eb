"""The ResNet calls of AWS's "Run multiple deep learning models on GPU with Amazon SageMaker
multi-model endpoints" notebook (PyTorch model): a v2 JSON body sent as
application/octet-stream, and a binary body built by tritonclient's `generate_request_body`.

Source: github.com/aws/amazon-sagemaker-examples, archived/mme-on-gpu/resnet50_mme_with_gpu.ipynb
@ 2d519b52c3a2 (Apache-2.0; Copyright Amazon.com, Inc. or its affiliates), cells [44] and
[50]-[53]. Changes: the endpoint name and TargetModel are parameters; the shiba inu photo is
replaced by seeded random pixels (normalised as in `get_sample_image`).
"""

import json

import numpy as np
import tritonclient.http as httpclient


def get_sample_image():
    rng = np.random.default_rng(44)
    img = rng.integers(0, 256, size=(224, 224, 3)).astype(np.uint8)
    img = (np.array(img).astype(np.float32) / 255) - np.array(
        [0.485, 0.456, 0.406], dtype=np.float32
    ).reshape(1, 1, 3)
    img = img / np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 1, 3)
    img = np.transpose(img, (2, 0, 1))
    return img.tolist()


def _get_sample_image_binary(input_name, output_name):
    inputs = []
    outputs = []
    inputs.append(httpclient.InferInput(input_name, [1, 3, 224, 224], "FP32"))
    input_data = np.array(get_sample_image(), dtype=np.float32)
    input_data = np.expand_dims(input_data, axis=0)
    inputs[0].set_data_from_numpy(input_data, binary_data=True)
    outputs.append(httpclient.InferRequestedOutput(output_name, binary_data=True))
    request_body, header_length = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs
    )
    return request_body, header_length


def run(runtime_sm_client, endpoint_name, target_models):
    calls = []
    image = np.array([get_sample_image()], dtype=np.float32)
    # PyTorch payload
    pt_payload = {
        "inputs": [
            {
                "name": "INPUT__0",
                "shape": [1, 3, 224, 224],
                "datatype": "FP32",
                "data": get_sample_image(),
            }
        ]
    }
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/octet-stream",
        Body=json.dumps(pt_payload),
        TargetModel=target_models["resnet"],
    )
    response = json.loads(response["Body"].read().decode("utf8"))
    output = response["outputs"][0]["data"]
    calls.append(
        {
            "model": "resnet",
            "inputs": {"INPUT__0": image},
            "outputs": {"OUTPUT__0": np.array(output, np.float32).reshape(1, 1000)},
        }
    )

    request_body, header_length = _get_sample_image_binary("INPUT__0", "OUTPUT__0")
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/vnd.sagemaker-triton.binary+json;json-header-size={}".format(
            header_length
        ),
        Body=request_body,
        TargetModel=target_models["resnet"],
    )
    # Parse json header size length from the response
    header_length_prefix = "application/vnd.sagemaker-triton.binary+json;json-header-size="
    header_length_str = response["ContentType"][len(header_length_prefix) :]
    # Read response body
    result = httpclient.InferenceServerClient.parse_response_body(
        response["Body"].read(), header_length=int(header_length_str)
    )
    output0_data = result.as_numpy("OUTPUT__0")
    calls.append(
        {"model": "resnet", "inputs": {"INPUT__0": image}, "outputs": {"OUTPUT__0": output0_data}}
    )
    return calls
