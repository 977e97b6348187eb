"""perf_analyzer's requests, as the Triton tutorials run it, sent through InvokeEndpoint.

`perf_analyzer -m text_recognition -b <batch> --shape input.1:1,32,100 --concurrency-range <n>`
(triton-inference-server/tutorials Conceptual_Guide Part_2 and Part_4 README.md @ e84895253165,
BSD-3-Clause; NVIDIA CORPORATION & AFFILIATES) keeps <n> requests of <batch> random inputs in
flight. Here: <n> threads each send one binary request of seeded random data (built with
tritonclient's `generate_request_body`, as AWS's notebooks do), so the endpoint sees concurrent
requests it may batch together; each answer must be its own request's.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tritonclient.http as httpclient

from tests.corpus.clients.pb_add_sub import infer


def run_concurrently(runtime, endpoint_name, target_model, model, batch, concurrency):
    def one(index):
        data = np.random.default_rng(index).random((batch, 1, 32, 100), dtype=np.float32)
        inputs = [httpclient.InferInput("input.1", list(data.shape), "FP32")]
        inputs[0].set_data_from_numpy(data)
        result = infer(runtime, endpoint_name, target_model, inputs, None)
        return {
            "model": model,
            "inputs": {"input.1": data},
            "outputs": {"308": result.as_numpy("308")},
        }

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, range(concurrency)))
