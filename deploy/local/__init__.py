"""The local SageMaker multi-model endpoint.

    triton.py       where the tritonserver binary and its python backend live
    supervisor.py   starts, watches, restarts and stops tritonserver
    archive.py      safe extraction of model archives
    store.py        reading archives from a directory or s3://, and the manifest
    adapters.py     python-backend adapters for TorchScript and ONNX models
    platform.py     the MME platform: lazy load, load-once, LRU eviction
    wire.py         AWS error shapes and the SageMaker runtime wire constants
    frontend.py     the asyncio HTTP/1.1 front end (SageMaker runtime data plane)
    endpoint.py     composes the above into one running endpoint
    provider.py     `deploy up/status/down --local` (background endpoint + state file)

Nothing here imports boto3, torch or onnxruntime at module level.
"""
