"""Small stand-ins for the files the published examples build or download.

The corpus keeps only the published text (configs, `model.py`, client
code). Weights, engines and label files are written here at test time, never
committed: each stand-in has the tensor names, datatypes and shapes the
published config declares, so the model runs as the original would, with
small seeded weights. Where the published project generates a tiny model
itself (Triton's `simple*` ONNX models come from its QA model generator),
the same graph is rebuilt with `onnx.helper`. Files of backends that cannot
run here (TensorRT plans, TensorFlow graphs, DALI pipelines, FIL models) are
placeholder bytes: only their presence matters, the endpoint refuses them.
"""

from __future__ import annotations

import io
import json
import tarfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20260101


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def placeholder(relative: str) -> Callable[[Path], None]:
    """A file whose bytes do not matter (the backend cannot run here)."""

    def write(repo: Path) -> None:
        _write(repo / relative, f"stand-in for {relative}\n".encode())

    return write


def version_folder(model: str) -> Callable[[Path], None]:
    """An empty version folder (ensembles need one; git keeps no empty folders)."""

    def write(repo: Path) -> None:
        (repo / model / "1").mkdir(parents=True, exist_ok=True)

    return write


def labels(relative: str, count: int) -> Callable[[Path], None]:
    def write(repo: Path) -> None:
        _write(repo / relative, "".join(f"class_{i}\n" for i in range(count)).encode())

    return write


def conda_pack(relative: str) -> Callable[[Path], None]:
    """The execution environment the notebook builds with conda-pack (a tiny tarball here)."""

    def write(repo: Path) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            data = b"# stand-in for a conda-pack environment\n"
            info = tarfile.TarInfo("bin/activate")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        _write(repo / relative, buffer.getvalue())

    return write


def text(relative: str, content: str) -> Callable[[Path], None]:
    def write(repo: Path) -> None:
        _write(repo / relative, content.encode())

    return write


# -- TorchScript ------------------------------------------------------------------


def _save_script(module: Any, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # TorchScript is deprecated; Triton still serves it
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(module).save(str(path))


def torch_image_classifier(relative: str, classes: int = 1000) -> Callable[[Path], None]:
    """[B, 3, H, W] -> [B, classes]: average pool to 4x4, then one linear layer."""

    def write(repo: Path) -> None:
        import torch
        from torch import nn

        torch.manual_seed(SEED)
        module = nn.Sequential(
            nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(3 * 4 * 4, classes)
        ).eval()
        _save_script(module, repo / relative)

    return write


def torch_detector(relative: str, boxes: int = 5) -> Callable[[Path], None]:
    """[B, 3, H, W] -> (boxes [B, 4k] FP32, labels [B, k] INT64, scores [B, k] FP32)."""

    def write(repo: Path) -> None:
        import torch
        from torch import nn

        class Detector(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.features = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten())
                self.boxes = nn.Linear(12, 4 * boxes)
                self.scores = nn.Linear(12, boxes)

            def forward(
                self, batch_img: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
                features = self.features(batch_img)
                scores = torch.sigmoid(self.scores(features))
                labels = (scores * 90).to(torch.int64)
                return self.boxes(features), labels, scores

        torch.manual_seed(SEED)
        _save_script(Detector().eval(), repo / relative)

    return write


def torch_bert(relative: str, hidden: int = 768, vocab: int = 1000) -> Callable[[Path], None]:
    """(ids [B, S] INT32, mask [B, S] INT32) -> (tokens [B, S, hidden], pooled [B, hidden])."""

    def write(repo: Path) -> None:
        import torch
        from torch import nn

        class Bert(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.vocab = vocab
                self.embed = nn.Embedding(vocab, hidden)
                self.pool = nn.Linear(hidden, hidden)

            def forward(
                self, input_ids: torch.Tensor, attention_mask: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
                tokens = self.embed(input_ids.long() % self.vocab)
                tokens = tokens * attention_mask.unsqueeze(-1).to(tokens.dtype)
                return tokens, torch.tanh(self.pool(tokens[:, 0]))

        torch.manual_seed(SEED)
        _save_script(Bert().eval(), repo / relative)

    return write


# -- ONNX ---------------------------------------------------------------------------


def _save_onnx(graph: Any, path: Path) -> None:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def onnx_add_sub(relative: str, elem: str) -> Callable[[Path], None]:
    """Triton's QA `onnx_<t>_<t>_<t>` model (server docs `simple`, `simple_string`):
    OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, computed in INT32."""

    def write(repo: Path) -> None:
        from onnx import TensorProto, helper

        io_type = getattr(TensorProto, elem)
        int32 = TensorProto.INT32
        nodes = []
        for name in ("INPUT0", "INPUT1"):
            if io_type == int32:
                nodes.append(helper.make_node("Identity", [name], [f"_{name}"]))
            else:
                nodes.append(helper.make_node("Cast", [name], [f"_{name}"], to=int32))
        nodes += [
            helper.make_node("Add", ["_INPUT0", "_INPUT1"], ["CAST0"]),
            helper.make_node("Sub", ["_INPUT0", "_INPUT1"], ["CAST1"]),
            helper.make_node("Cast", ["CAST0"], ["OUTPUT0"], to=io_type),
            helper.make_node("Cast", ["CAST1"], ["OUTPUT1"], to=io_type),
        ]

        def values(*names: str) -> list[Any]:
            return [helper.make_tensor_value_info(n, io_type, [None, 16]) for n in names]

        graph = helper.make_graph(
            nodes, "simple", values("INPUT0", "INPUT1"), values("OUTPUT0", "OUTPUT1")
        )
        _save_onnx(graph, repo / relative)

    return write


def onnx_sequence(relative: str, *, dyna: bool) -> Callable[[Path], None]:
    """Triton's QA `onnx_sequence_int32` / `onnx_dyna_sequence_int32` models:
    OUTPUT = READY * (INPUT + START) (+ END * CORRID for the dyna one)."""

    def write(repo: Path) -> None:
        from onnx import TensorProto, helper

        int32 = TensorProto.INT32
        names = ["INPUT", "START", "END", "READY"] if dyna else ["INPUT", "START", "READY"]
        inputs = [helper.make_tensor_value_info(n, int32, [None, 1]) for n in names]
        nodes = [
            helper.make_node("Identity", ["INPUT"], ["_INPUT"]),
            helper.make_node("Add", ["_INPUT", "START"], ["add0"]),
        ]
        if dyna:
            inputs.append(helper.make_tensor_value_info("CORRID", TensorProto.UINT64, [None, 1]))
            nodes += [
                helper.make_node("Cast", ["CORRID"], ["corrid"], to=int32),
                helper.make_node("Mul", ["END", "corrid"], ["mul0"]),
                helper.make_node("Add", ["add0", "mul0"], ["sum0"]),
                helper.make_node("Mul", ["READY", "sum0"], ["CAST"]),
            ]
        else:
            nodes.append(helper.make_node("Mul", ["READY", "add0"], ["CAST"]))
        nodes.append(helper.make_node("Cast", ["CAST"], ["OUTPUT"], to=int32))
        output = helper.make_tensor_value_info("OUTPUT", int32, [None, 1])
        _save_onnx(helper.make_graph(nodes, "sequence", inputs, [output]), repo / relative)

    return write


def _weights(name: str, shape: tuple[int, ...]) -> Any:
    from onnx import numpy_helper

    rng = np.random.default_rng(SEED)
    return numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name)


def onnx_image_classifier(
    relative: str, input_name: str, output_name: str, *, nchw_output: bool
) -> Callable[[Path], None]:
    """[N, 3, H, W] -> global average pool -> 1x1 conv to 1000 classes.

    `nchw_output` keeps the [N, 1000, 1, 1] shape (densenet's `fc6_1`);
    otherwise it is flattened to [N, 1000] (a torchvision resnet export).
    """

    def write(repo: Path) -> None:
        from onnx import TensorProto, helper

        fp32 = TensorProto.FLOAT
        pooled = helper.make_node("GlobalAveragePool", [input_name], ["pooled"])
        conv_out = output_name if nchw_output else "logits"
        nodes = [pooled, helper.make_node("Conv", ["pooled", "w", "b"], [conv_out])]
        out_shape: list[Any] = ["N", 1000, 1, 1]
        if not nchw_output:
            nodes.append(helper.make_node("Flatten", ["logits"], [output_name]))
            out_shape = ["N", 1000]
        graph = helper.make_graph(
            nodes,
            "classifier",
            [helper.make_tensor_value_info(input_name, fp32, ["N", 3, 224, 224])],
            [helper.make_tensor_value_info(output_name, fp32, out_shape)],
            [_weights("w", (1000, 3, 1, 1)), _weights("b", (1000,))],
        )
        _save_onnx(graph, repo / relative)

    return write


def onnx_text_detection(relative: str) -> Callable[[Path], None]:
    """EAST's tensors ([N, H, W, 3] -> [N, H, W, 1] scores and [N, H, W, 5] geometry)."""

    def write(repo: Path) -> None:
        from onnx import TensorProto, helper

        fp32 = TensorProto.FLOAT
        source = "input_images:0"
        score, geometry = "feature_fusion/Conv_7/Sigmoid:0", "feature_fusion/concat_3:0"
        nodes = [
            helper.make_node("MatMul", [source, "w_score"], ["score_logits"]),
            helper.make_node("Sigmoid", ["score_logits"], [score]),
            helper.make_node("MatMul", [source, "w_geometry"], [geometry]),
        ]
        graph = helper.make_graph(
            nodes,
            "text_detection",
            [helper.make_tensor_value_info(source, fp32, ["N", "H", "W", 3])],
            [
                helper.make_tensor_value_info(score, fp32, ["N", "H", "W", 1]),
                helper.make_tensor_value_info(geometry, fp32, ["N", "H", "W", 5]),
            ],
            [_weights("w_score", (3, 1)), _weights("w_geometry", (3, 5))],
        )
        _save_onnx(graph, repo / relative)

    return write


def onnx_text_recognition(relative: str) -> Callable[[Path], None]:
    """The CRNN's tensors: `input.1` [N, 1, 32, 100] -> `308` [N, 26, 37] (N is 1 in part 1)."""

    def write(repo: Path) -> None:
        from onnx import TensorProto, helper

        fp32 = TensorProto.FLOAT
        starts = helper.make_tensor("starts", TensorProto.INT64, [1], [0])
        ends = helper.make_tensor("ends", TensorProto.INT64, [1], [26])
        axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
        squeeze = helper.make_tensor("squeeze_axes", TensorProto.INT64, [1], [1])
        nodes = [
            helper.make_node("Squeeze", ["input.1", "squeeze_axes"], ["rows"]),  # [N, 32, 100]
            helper.make_node("MatMul", ["rows", "w"], ["logits"]),  # [N, 32, 37]
            helper.make_node("Slice", ["logits", "starts", "ends", "axes"], ["sliced"]),
            helper.make_node("LogSoftmax", ["sliced"], ["308"], axis=2),
        ]
        graph = helper.make_graph(
            nodes,
            "text_recognition",
            [helper.make_tensor_value_info("input.1", fp32, ["N", 1, 32, 100])],
            [helper.make_tensor_value_info("308", fp32, ["N", 26, 37])],
            [_weights("w", (100, 37)), starts, ends, axes, squeeze],
        )
        _save_onnx(graph, repo / relative)

    return write


def write_json(relative: str, document: dict[str, Any]) -> Callable[[Path], None]:
    return text(relative, json.dumps(document, indent=4) + "\n")
