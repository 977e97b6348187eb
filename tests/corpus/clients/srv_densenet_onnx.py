"""Triton's image client on `densenet_onnx` (the quickstart's `image_client -m densenet_onnx -c 3
-s INCEPTION mug.jpg`) through InvokeEndpoint: a [3, 224, 224] FP32 image, the top 3 classes.

Source: github.com/triton-inference-server/client, src/python/examples/image_client.py
@ 58a44caa0dce (BSD-3-Clause; Copyright (c) 2020-2025, NVIDIA CORPORATION & AFFILIATES. All
rights reserved.), `preprocess` (INCEPTION scaling, NCHW) and `requestGenerator`; the command
line is docs/getting_started/quickstart.md's in triton-inference-server/server. Changes: the mug
photo is seeded random pixels; `infer` becomes `generate_request_body` + `invoke_endpoint`.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def preprocess():
    resized = np.random.default_rng(3).integers(0, 256, size=(224, 224, 3))
    typed = resized.astype(np.float32)
    scaled = (typed / 127.5) - 1
    # Swap to CHW
    return np.transpose(scaled, (2, 0, 1))


def run(runtime, endpoint_name, target_models):
    batched_image_data = preprocess()  # max_batch_size 0: no batch dimension
    inputs = [httpclient.InferInput("data_0", batched_image_data.shape, "FP32")]
    inputs[0].set_data_from_numpy(batched_image_data)
    outputs = [httpclient.InferRequestedOutput("fc6_1", class_count=3)]
    results = infer(runtime, endpoint_name, target_models["densenet_onnx"], inputs, outputs)
    return [
        {
            "model": "densenet_onnx",
            "inputs": {"data_0": batched_image_data},
            "outputs": {"fc6_1": results.as_numpy("fc6_1")},
            "parameters": {"class_count": 3},
        }
    ]
