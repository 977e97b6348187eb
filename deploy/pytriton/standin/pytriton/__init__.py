"""A stand-in for NVIDIA PyTriton's public API, for running PyTriton scripts without a server.

`deploy bind` runs a PyTriton script with this package first on `sys.path`:
`Triton.bind()` records each model, `serve()` and `run()` return at once. The
same package travels in every generated model's version folder, where the
python backend re-runs the script to obtain the bound callable and calls it
as PyTriton does (`pytriton._backend`).

It mirrors the names and behaviour of PyTriton 0.7 (Apache-2.0,
github.com/triton-inference-server/pytriton): `pytriton.triton.Triton`,
`pytriton.model_config` (`Tensor`, `ModelConfig`, `DynamicBatcher`, ...),
`pytriton.decorators`, `pytriton.exceptions`, `pytriton.proxy.types`. It
needs the standard library and numpy only (what the SageMaker Triton image
has), and runs on Python 3.10 or newer (the oldest SageMaker Triton image).
"""

__version__ = "0.7.0+deploy"
