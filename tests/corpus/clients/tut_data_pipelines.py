"""The Triton tutorials' Data_Pipelines client through InvokeEndpoint: a string, UINT8 and INT8
arrays, an FP32 image and a boolean through a two-step python ensemble.

Source: github.com/triton-inference-server/tutorials, Feature_Guide/Data_Pipelines/client.py
@ e84895253165 (BSD-3-Clause; Copyright 2023, NVIDIA CORPORATION & AFFILIATES. All rights
reserved.). Changes: the COCO photo (downloaded with requests, read with PIL) is a seeded
[480, 640, 3] FP32 array; `client.infer(...)` becomes `generate_request_body` +
`invoke_endpoint` + `parse_response_body`.
"""

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype

from tests.corpus.clients.pb_add_sub import infer


def run(runtime, endpoint_name, target_models):
    # Inputs
    prompts = ["This is a string"]
    text_obj = np.array([prompts], dtype="object")

    image = np.random.default_rng(39769).integers(0, 256, (480, 640, 3)).astype(np.float32)
    uint8_array = np.expand_dims(np.array([1, 2, 3], dtype=np.uint8), axis=0)
    int8_array = np.expand_dims(np.array([-1, 2, -3], dtype=np.int8), axis=0)
    image = np.expand_dims(image, axis=0)
    boolean = np.expand_dims(np.array([True]), axis=0)

    # Set Inputs
    input_tensors = [
        httpclient.InferInput(
            "ensemble_input_string", text_obj.shape, np_to_triton_dtype(text_obj.dtype)
        ),
        httpclient.InferInput("ensemble_input_UINT8_array", uint8_array.shape, datatype="UINT8"),
        httpclient.InferInput("ensemble_input_INT8_array", int8_array.shape, datatype="INT8"),
        httpclient.InferInput("ensemble_input_FP32_image", image.shape, datatype="FP32"),
        httpclient.InferInput("ensemble_input_bool", boolean.shape, datatype="BOOL"),
    ]
    input_tensors[0].set_data_from_numpy(text_obj)
    input_tensors[1].set_data_from_numpy(uint8_array)
    input_tensors[2].set_data_from_numpy(int8_array)
    input_tensors[3].set_data_from_numpy(image)
    input_tensors[4].set_data_from_numpy(boolean)

    # Set outputs
    output = [
        httpclient.InferRequestedOutput("ensemble_output_string"),
        httpclient.InferRequestedOutput("ensemble_output_UINT8_array"),
        httpclient.InferRequestedOutput("ensemble_output_INT8_array"),
        httpclient.InferRequestedOutput("ensemble_output_FP32_image"),
        httpclient.InferRequestedOutput("ensemble_output_bool"),
    ]

    # Query
    query_response = infer(
        runtime, endpoint_name, target_models["ensemble_model"], input_tensors, output
    )
    names = ["string", "UINT8_array", "INT8_array", "FP32_image", "bool"]
    return [
        {
            "model": "ensemble_model",
            "inputs": {
                "ensemble_input_string": text_obj,
                "ensemble_input_UINT8_array": uint8_array,
                "ensemble_input_INT8_array": int8_array,
                "ensemble_input_FP32_image": image,
                "ensemble_input_bool": boolean,
            },
            "outputs": {
                f"ensemble_output_{n}": query_response.as_numpy(f"ensemble_output_{n}")
                for n in names
            },
        }
    ]
