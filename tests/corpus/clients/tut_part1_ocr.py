"""The Triton tutorials' Conceptual Guide part 1 client through InvokeEndpoint: text detection
on an image, then text recognition on a crop.

Source: github.com/triton-inference-server/tutorials,
Conceptual_Guide/Part_1-model_deployment/client.py @ e84895253165 (BSD-3-Clause; Copyright (c)
2022, NVIDIA CORPORATION. All rights reserved.), its `__main__`. Changes: OpenCV's
preprocessing and the crop between the two models are replaced by seeded arrays of the same
shapes and ranges (no OpenCV here); `client.infer(...)` becomes `generate_request_body` +
`invoke_endpoint` + `parse_response_body`.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def run(runtime, endpoint_name, target_models):
    rng = np.random.default_rng(1)
    # detection_preprocessing: a 640x480 BGR blob minus the channel means, NHWC
    preprocessed_image = (rng.random((1, 480, 640, 3), dtype=np.float32) * 255) - 120

    detection_input = httpclient.InferInput(
        "input_images:0", preprocessed_image.shape, datatype="FP32"
    )
    detection_input.set_data_from_numpy(preprocessed_image, binary_data=True)

    # Query the server
    detection_response = infer(
        runtime, endpoint_name, target_models["text_detection"], [detection_input], None
    )
    scores = detection_response.as_numpy("feature_fusion/Conv_7/Sigmoid:0")
    geometry = detection_response.as_numpy("feature_fusion/concat_3:0")

    # detection_postprocessing: one grey 32x100 crop scaled to [-1, 1]
    cropped_images = (rng.random((1, 1, 32, 100), dtype=np.float32) - 0.5) * 2

    recognition_input = httpclient.InferInput("input.1", cropped_images.shape, datatype="FP32")
    recognition_input.set_data_from_numpy(cropped_images, binary_data=True)

    recognition_response = infer(
        runtime, endpoint_name, target_models["text_recognition"], [recognition_input], None
    )
    return [
        {
            "model": "text_detection",
            "inputs": {"input_images:0": preprocessed_image},
            "outputs": {
                "feature_fusion/Conv_7/Sigmoid:0": scores,
                "feature_fusion/concat_3:0": geometry,
            },
        },
        {
            "model": "text_recognition",
            "inputs": {"input.1": cropped_images},
            "outputs": {"308": recognition_response.as_numpy("308")},
        },
    ]
