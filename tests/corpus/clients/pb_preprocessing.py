"""python_backend's preprocessing ensemble client through InvokeEndpoint.

Source: github.com/triton-inference-server/python_backend, examples/preprocessing/client.py
@ f9088ff60944 (BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES). Changes: gRPC's `infer` becomes
`generate_request_body` + `invoke_endpoint`; the mug photo's bytes are seeded random bytes (the
ensemble is refused before it would decode them).
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def load_image():
    """Loads an encoded image as an array of bytes."""
    return np.random.default_rng(7).integers(0, 256, size=4096).astype("uint8")


def run(runtime, endpoint_name, target_models):
    inputs = []
    outputs = []
    input_name = "INPUT"
    output_name = "OUTPUT"
    image_data = load_image()
    image_data = np.expand_dims(image_data, axis=0)

    inputs.append(httpclient.InferInput(input_name, image_data.shape, "UINT8"))
    outputs.append(httpclient.InferRequestedOutput(output_name))

    inputs[0].set_data_from_numpy(image_data)
    results = infer(
        runtime, endpoint_name, target_models["ensemble_python_resnet50"], inputs, outputs
    )
    return [
        {
            "model": "ensemble_python_resnet50",
            "inputs": {input_name: image_data},
            "outputs": {output_name: results.as_numpy(output_name)},
        }
    ]
