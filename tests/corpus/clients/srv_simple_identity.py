"""Triton's `simple_identity` calls through InvokeEndpoint: a BYTES tensor sent and received
binary, then as JSON.

Source: github.com/triton-inference-server/client,
src/python/examples/simple_http_string_infer_client.py @ 58a44caa0dce (BSD-3-Clause; Copyright
(c) 2020-2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.), `identity_inference` and
the four calls its `__main__` makes. Changes: `triton_client.infer(...)` becomes
`generate_request_body` + `invoke_endpoint` + `parse_response_body`.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def identity_inference(runtime, endpoint_name, target_model, np_array, binary_data):
    inputs = []
    outputs = []

    inputs.append(httpclient.InferInput("INPUT0", np_array.shape, "BYTES"))
    inputs[0].set_data_from_numpy(np_array, binary_data=binary_data)

    outputs.append(httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary_data))

    results = infer(runtime, endpoint_name, target_model, inputs, outputs)
    return {
        "model": "simple_identity",
        "inputs": {"INPUT0": np_array},
        "outputs": {"OUTPUT0": results.as_numpy("OUTPUT0")},
    }


def run(runtime, endpoint_name, target_models):
    target = target_models["simple_identity"]
    calls = []
    # Example using BYTES input tensor with utf-8 encoded string that
    # has an embedded null character.
    null_chars_array = np.array([b"he\x00llo" for _ in range(16)], dtype=np.object_)
    null_char_data = null_chars_array.reshape([1, 16])
    calls.append(identity_inference(runtime, endpoint_name, target, null_char_data, True))
    calls.append(identity_inference(runtime, endpoint_name, target, null_char_data, False))

    # Example using BYTES input tensor with 16 elements, where each
    # element is a 4-byte binary blob with value 0x00010203. Can use
    # dtype=np.bytes_ in this case.
    bytes_data = [b"\x00\x01\x02\x03" for i in range(16)]
    np_bytes_data = np.array(bytes_data, dtype=np.bytes_)
    np_bytes_data = np_bytes_data.reshape([1, 16])
    calls.append(identity_inference(runtime, endpoint_name, target, np_bytes_data, True))
    calls.append(identity_inference(runtime, endpoint_name, target, np_bytes_data, False))
    return calls
