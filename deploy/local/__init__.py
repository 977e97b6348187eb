"""The local SageMaker endpoint, in four rooms and a record.

    http/      the SageMaker runtime front end: HTTP/1.1, wire shapes, request bounds
    models/    the model store and the multi-model platform that loads from it
    triton/    the tritonserver process: its install, supervisor, port guard, envs
    modes/     the local endpoint of each hosting mode, composed from the rooms above
    state.py   where a running endpoint is recorded (standard library only)

The rooms are layered (an import-linter contract in pyproject.toml): modes
use the front end, the front end serves the models, the models run on
tritonserver; none imports a room above it. A mode plugs into the front end
through the front end's public `Invoker` (`deploy.local.http.frontend`).

Nothing here imports boto3, torch or onnxruntime at module level.
"""
