"""The Triton tutorials' Quick_Deploy PyTorch client through InvokeEndpoint: a [3, 224, 224]
image and all 1000 classes of `output__0` (`class_count=1000`).

Source: github.com/triton-inference-server/tutorials, Quick_Deploy/PyTorch/client.py
@ e84895253165 (BSD-3-Clause; Copyright (c) 2023, NVIDIA CORPORATION. All rights reserved.).
Changes: `rn50_preprocess` returns seeded values normalised as torchvision's Normalize would
(no PIL/torchvision here); `client.infer(...)` becomes `generate_request_body` +
`invoke_endpoint` + `parse_response_body`.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def rn50_preprocess():
    pixels = np.random.default_rng(50).random((3, 224, 224), dtype=np.float32)
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)
    return (pixels - mean) / std


def run(runtime, endpoint_name, target_models):
    transformed_img = rn50_preprocess()

    inputs = httpclient.InferInput("input__0", transformed_img.shape, datatype="FP32")
    inputs.set_data_from_numpy(transformed_img, binary_data=True)

    outputs = httpclient.InferRequestedOutput("output__0", binary_data=True, class_count=1000)

    results = infer(runtime, endpoint_name, target_models["resnet50"], [inputs], [outputs])
    inference_output = results.as_numpy("output__0")
    return [
        {
            "model": "resnet50",
            "inputs": {"input__0": transformed_img},
            "outputs": {"output__0": inference_output},
            "parameters": {"class_count": 1000},
        }
    ]
