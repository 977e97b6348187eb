"""The local SageMaker multi-model endpoint.

    triton.py       where the tritonserver binary and its python backend live
    supervisor.py   starts, watches, restarts and stops tritonserver
    guard.py        keeps tritonserver's port to the front end (builds triton_guard.c)
    archive.py      safe extraction of model archives
    store.py        reading archives from a directory or s3://, and the manifest
    adapters.py     python-backend adapters for TorchScript and ONNX models
    adapter_model.py.tmpl  the adapter's model.py (copied into adapted models)
    platform.py     the MME platform: lazy load, load-once, LRU eviction
    wire.py         AWS error shapes and the SageMaker runtime wire constants
    frontend.py     the asyncio HTTP/1.1 front end (SageMaker runtime data plane)
    connections.py  the front end's connection bounds: timeouts, head size, count
    json_limits.py  JSON nesting and json-header-size checks before Triton parses a body
    endpoint.py     composes the above into one running endpoint
    serve.py        `deploy serve`: an endpoint in the foreground until SIGINT/SIGTERM
    single_model.py single-model mode (the inf1 layout behind a router)

Nothing here imports boto3, torch or onnxruntime at module level.
"""
