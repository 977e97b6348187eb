"""Conceptual guide part 2: `perf_analyzer -m text_recognition -b 2 --shape input.1:1,32,100
--concurrency-range 2:16:2`, its highest concurrency (see `perf_analyzer.py`)."""

from tests.corpus.clients.perf_analyzer import run_concurrently


def run(runtime, endpoint_name, target_models):
    target = target_models["text_recognition"]
    return run_concurrently(runtime, endpoint_name, target, "text_recognition", 2, 16)
