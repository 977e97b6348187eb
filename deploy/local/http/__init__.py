"""The front end: SageMaker's runtime data plane over HTTP/1.1.

frontend.py     the asyncio HTTP/1.1 front end, and `Invoker`: a mode's hook into it
connections.py  the front end's connection bounds: timeouts, head size, count
wire.py         AWS error shapes and the SageMaker runtime wire constants
json_limits.py  JSON nesting and json-header-size checks before Triton parses a body
metrics.py      per-model call metrics, served at GET /metrics
memory.py       keeps freed memory of large bodies mapped for the next request
"""
