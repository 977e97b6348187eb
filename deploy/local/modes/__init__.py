"""The local endpoint of each hosting mode, composed from the front end, models and triton.

registry.py     each `HostingMode.local` key → what serves it (`deploy serve`, `up --local`)
endpoint.py     one running endpoint: supervisor + platform + front end (multi-model)
serve.py        `deploy serve`: an endpoint in the foreground until SIGINT/SIGTERM
single_model.py single-model mode (the router layout), its `Invoker` to the front end
async_endpoint.py      asynchronous mode: InvokeEndpointAsync, its `Invoker`
async_invocations.py   the asynchronous mode's queue: S3 in, Triton, S3 out
"""
