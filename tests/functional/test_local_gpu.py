"""A KIND_GPU TorchScript model runs on the GPU through the local endpoint.

Skipped where no CUDA device is visible. On a machine with an NVIDIA GPU:

    .venv/bin/pytest -q tests/functional/test_local_gpu.py

The adapter keeps the KIND_GPU instance group, loads the TorchScript file
with `map_location=cuda:<id>`, and says so in the tritonserver log; the
outputs equal running the file on CPU with torch directly.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.local.models.adapters import cuda_device_count
from tests.functional.local_models import folder_files, invoke, runtime_client, write_archive
from tests.functional.test_local_adapters import torchscript_model

pytestmark = [
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA device visible"),
]


def test_kind_gpu_torchscript_runs_on_the_gpu(local_endpoint: Any, tmp_path: Path) -> None:
    import torch

    folder = torchscript_model(tmp_path / "ts_gpu")
    config = (folder / "config.pbtxt").read_text().replace('name: "ts"', 'name: "ts_gpu"')
    (folder / "config.pbtxt").write_text(config)
    write_archive(
        local_endpoint.store_dir / "tests" / "ts_gpu.tar.gz", folder_files(folder, "ts_gpu")
    )
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 3)).astype(np.float32)
    b = rng.normal(size=(4, 3)).astype(np.float32)

    _, outputs = invoke(
        runtime_client(local_endpoint.url),
        "local",
        "tests/ts_gpu.tar.gz",
        {"INPUT__0": a, "INPUT__1": b},
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(folder / "1" / "model.pt"))
    expected = module(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(
        outputs["OUTPUT__0"], expected[0].detach().numpy(), rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        outputs["OUTPUT__1"], expected[1].detach().numpy(), rtol=1e-4, atol=1e-5
    )
    log = local_endpoint.endpoint.supervisor.log_path.read_text(errors="replace")
    assert "model 'tests/ts_gpu.tar.gz' (pytorch_libtorch)" in log
    assert "on cuda:0" in log, "the adapter did not put the model on the GPU"
    listing = local_endpoint.endpoint.platform.listing()
    loaded = next(m for m in listing["loaded"] if m["target_model"] == "tests/ts_gpu.tar.gz")
    assert loaded["adapted"] == {"ts_gpu": "pytorch_libtorch"}
