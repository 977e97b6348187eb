"""PyTriton scripts as Triton model repositories (`deploy bind`).

    from deploy.pytriton import bind_script
    result = bind_script(Path("server.py"), Path("repo"))

The script runs unchanged under a stand-in for PyTriton's API (`standin/`):
`Triton.bind()` is recorded and nothing is served. Each bound model becomes a
python-backend model whose `model.py` re-runs the script inside Triton and
calls the bound callable as PyTriton does; the models need numpy and the
standard library only, as in the SageMaker Triton image.
"""

from __future__ import annotations

from deploy.pytriton.bind import BindResult, bind_script

__all__ = ["BindResult", "bind_script"]
