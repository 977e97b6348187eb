"""The TensorRT call of AWS's "Run multiple deep learning models on GPU with Amazon SageMaker
multi-model endpoints" notebook: a v2 JSON body sent as application/octet-stream.

Source: github.com/aws/amazon-sagemaker-examples, archived/mme-on-gpu/resnet50_mme_with_gpu.ipynb
@ 2d519b52c3a2 (Apache-2.0; Copyright Amazon.com, Inc. or its affiliates), cells [44], [47]
and [48]. Changes: the endpoint name and TargetModel are parameters; the shiba inu photo is
replaced by seeded random pixels (normalised as in `get_sample_image`).
"""

import json

import numpy as np


def get_sample_image():
    rng = np.random.default_rng(44)
    img = rng.integers(0, 256, size=(224, 224, 3)).astype(np.uint8)
    img = (np.array(img).astype(np.float32) / 255) - np.array(
        [0.485, 0.456, 0.406], dtype=np.float32
    ).reshape(1, 1, 3)
    img = img / np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 1, 3)
    img = np.transpose(img, (2, 0, 1))
    return img.tolist()


def run(runtime_sm_client, endpoint_name, target_models):
    # tensorRT payload
    trt_payload = {
        "inputs": [
            {
                "name": "input",
                "shape": [1, 3, 224, 224],
                "datatype": "FP32",
                "data": get_sample_image(),
            }
        ]
    }
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/octet-stream",
        Body=json.dumps(trt_payload),
        TargetModel=target_models["resnet"],
    )
    output = json.loads(response["Body"].read().decode("utf8"))["outputs"][0]
    return [
        {
            "model": "resnet",
            "inputs": {"input": np.array([get_sample_image()], np.float32)},
            "outputs": {"output": np.array(output["data"], np.float32).reshape(output["shape"])},
        }
    ]
