"""Triton's sequence client with `-d` (the dyna sequence model), through InvokeEndpoint.

Source: github.com/triton-inference-server/client,
src/python/examples/simple_http_sequence_sync_infer_client.py @ 58a44caa0dce (BSD-3-Clause;
NVIDIA CORPORATION & AFFILIATES); the calls are the ones in `srv_simple_sequence.py`.
"""

from tests.corpus.clients.srv_simple_sequence import run_sequences


def run(runtime, endpoint_name, target_models):
    return run_sequences(
        runtime, endpoint_name, target_models["simple_dyna_sequence"], "simple_dyna_sequence"
    )
