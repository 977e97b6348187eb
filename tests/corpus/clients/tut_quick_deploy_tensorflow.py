"""The Triton tutorials' Quick_Deploy TensorFlow client through InvokeEndpoint.

Source: github.com/triton-inference-server/tutorials, Quick_Deploy/TensorFlow/client.py
@ e84895253165 (BSD-3-Clause; Copyright (c) 2023, NVIDIA CORPORATION. All rights reserved.).
Changes: `process_image` returns seeded values in the Keras ResNet50 input range (no
TensorFlow here); `triton_client.infer(...)` becomes `generate_request_body` +
`invoke_endpoint` + `parse_response_body`.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def process_image():
    x = np.random.default_rng(224).random((224, 224, 3), dtype=np.float32) * 255
    x = np.expand_dims(x, axis=0)
    return x - np.array([103.939, 116.779, 123.68], np.float32)


def run(runtime, endpoint_name, target_models):
    transformed_img = process_image()
    inputs = httpclient.InferInput("input_1", transformed_img.shape, datatype="FP32")
    inputs.set_data_from_numpy(transformed_img, binary_data=True)
    output = httpclient.InferRequestedOutput("predictions", binary_data=True, class_count=1000)
    results = infer(runtime, endpoint_name, target_models["resnet50"], [inputs], [output])
    return [
        {
            "model": "resnet50",
            "inputs": {"input_1": transformed_img},
            "outputs": {"predictions": results.as_numpy("predictions")},
            "parameters": {"class_count": 1000},
        }
    ]
