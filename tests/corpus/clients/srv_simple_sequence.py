"""Triton's sequence client through InvokeEndpoint: two sequences of single INT32 values, each
request carrying its sequence id and start/end flags.

Source: github.com/triton-inference-server/client,
src/python/examples/simple_http_sequence_sync_infer_client.py @ 58a44caa0dce (BSD-3-Clause;
Copyright (c) 2020-2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.), `sync_send` and
the two integer sequences of its `__main__` (`-d` picks the dyna model). Changes:
`triton_client.infer(...)` becomes `generate_request_body(..., sequence_id=, sequence_start=,
sequence_end=)` + `invoke_endpoint` + `parse_response_body`.
"""

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def sync_send(runtime, endpoint_name, target_model, model_name, values, batch_size, sequence_id):
    calls = []
    count = 1
    for value in values:
        # Create the tensor for INPUT
        value_data = np.full(shape=[batch_size, 1], fill_value=value, dtype=np.int32)
        inputs = []
        inputs.append(httpclient.InferInput("INPUT", value_data.shape, "INT32"))
        # Initialize the data
        inputs[0].set_data_from_numpy(value_data)
        outputs = []
        outputs.append(httpclient.InferRequestedOutput("OUTPUT"))
        # Issue the synchronous sequence inference.
        parameters = {
            "sequence_id": sequence_id,
            "sequence_start": (count == 1),
            "sequence_end": (count == len(values)),
        }
        result = infer(runtime, endpoint_name, target_model, inputs, outputs, **parameters)
        calls.append(
            {
                "model": model_name,
                "inputs": {"INPUT": value_data},
                "outputs": {"OUTPUT": result.as_numpy("OUTPUT")},
                "parameters": parameters,
            }
        )
        count = count + 1
    return calls


def run_sequences(runtime, endpoint_name, target_model, model_name):
    values = [11, 7, 5, 3, 2, 0, 1]
    # Will use two sequences and send them synchronously. Note the
    # sequence IDs should be non-zero because zero is reserved for
    # non-sequence requests.
    return sync_send(
        runtime, endpoint_name, target_model, model_name, [0, *values], 1, 1000
    ) + sync_send(
        runtime, endpoint_name, target_model, model_name, [100] + [-1 * v for v in values], 1, 1001
    )


def run(runtime, endpoint_name, target_models):
    return run_sequences(
        runtime, endpoint_name, target_models["simple_sequence"], "simple_sequence"
    )
