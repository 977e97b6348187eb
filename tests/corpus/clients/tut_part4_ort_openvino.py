"""Conceptual guide part 4: `perf_analyzer -m text_recognition -b 16 --shape input.1:1,32,100
--concurrency-range 2` (see `perf_analyzer.py`)."""

from tests.corpus.clients.perf_analyzer import run_concurrently


def run(runtime, endpoint_name, target_models):
    target = target_models["text_recognition"]
    return run_concurrently(runtime, endpoint_name, target, "text_recognition", 16, 2)
