"""Small ONNX models (built with onnx.helper) and their Triton configs.

Each writes `<folder>/config.pbtxt` and `<folder>/1/model.onnx` and returns
the folder. They exercise what the onnxruntime backend does beyond plain
float tensors: string tensors, the sequence batcher's control inputs with
implicit state, optional inputs, and dynamic batching (a model that reports
the batch size it was called with).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

OPSET = 20  # StringConcat


def _save(folder: Path, config: str, graph: Any) -> Path:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(config)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    return folder


STRING_CONFIG = """
name: "strings"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "SHOUTED" data_type: TYPE_STRING dims: [ -1 ] },
         { name: "IS_YES" data_type: TYPE_BOOL dims: [ -1 ] } ]
"""


def string_model(folder: Path) -> Path:
    """SHOUTED = TEXT + "!", IS_YES = (TEXT == "yes"): string in, string and bool out."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("StringConcat", ["TEXT", "bang"], ["SHOUTED"]),
            helper.make_node("Equal", ["TEXT", "yes"], ["IS_YES"]),
        ],
        "strings",
        [helper.make_tensor_value_info("TEXT", TensorProto.STRING, ["n", "k"])],
        [
            helper.make_tensor_value_info("SHOUTED", TensorProto.STRING, ["n", "k"]),
            helper.make_tensor_value_info("IS_YES", TensorProto.BOOL, ["n", "k"]),
        ],
        [
            helper.make_tensor("bang", TensorProto.STRING, [1], [b"!"]),
            helper.make_tensor("yes", TensorProto.STRING, [1], [b"yes"]),
        ],
    )
    return _save(folder, STRING_CONFIG, graph)


SEQUENCE_CONFIG = """
name: "accumulate"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "SEEN" data_type: TYPE_UINT64 dims: [ 1 ] },
         { name: "FLAGS" data_type: TYPE_INT32 dims: [ 3 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ {
    input_name: "SUM_IN"
    output_name: "SUM_OUT"
    data_type: TYPE_FP32
    dims: [ 1 ]
    initial_state { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "zero" }
  } ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def sequence_model(folder: Path) -> Path:
    """A running sum kept in implicit state.

    SUM = SUM_IN * (1 - START) + X (also the new state SUM_OUT); SEEN echoes
    CORRID; FLAGS = [START, END, READY] as the model received them.
    """
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["START"], ["start"], to=TensorProto.FLOAT),
            helper.make_node("Sub", ["one", "start"], ["keep"]),
            helper.make_node("Mul", ["SUM_IN", "keep"], ["kept"]),
            helper.make_node("Add", ["kept", "X"], ["SUM"]),
            helper.make_node("Identity", ["SUM"], ["SUM_OUT"]),
            helper.make_node("Identity", ["CORRID"], ["SEEN"]),
            helper.make_node("Concat", ["START", "END", "READY"], ["FLAGS"], axis=1),
        ],
        "accumulate",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 1]),
            helper.make_tensor_value_info("START", TensorProto.INT32, ["n", 1]),
            helper.make_tensor_value_info("END", TensorProto.INT32, ["n", 1]),
            helper.make_tensor_value_info("READY", TensorProto.INT32, ["n", 1]),
            helper.make_tensor_value_info("CORRID", TensorProto.UINT64, ["n", 1]),
            helper.make_tensor_value_info("SUM_IN", TensorProto.FLOAT, ["n", 1]),
        ],
        [
            helper.make_tensor_value_info("SUM", TensorProto.FLOAT, ["n", 1]),
            helper.make_tensor_value_info("SUM_OUT", TensorProto.FLOAT, ["n", 1]),
            helper.make_tensor_value_info("SEEN", TensorProto.UINT64, ["n", 1]),
            helper.make_tensor_value_info("FLAGS", TensorProto.INT32, ["n", 3]),
        ],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])],
    )
    return _save(folder, SEQUENCE_CONFIG, graph)


OPTIONAL_CONFIG = """
name: "scaled"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] },
        { name: "SCALE" data_type: TYPE_FP32 dims: [ 2 ] optional: true } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""
DEFAULT_SCALE = np.array([[2.0, -3.0]], dtype=np.float32)


def optional_model(folder: Path) -> Path:
    """Y = X * SCALE; SCALE is a graph input with a default (an overridable initializer)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "SCALE"], ["Y"])],
        "scaled",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 2]),
            helper.make_tensor_value_info("SCALE", TensorProto.FLOAT, ["m", 2]),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", 2])],
        [numpy_helper.from_array(DEFAULT_SCALE, "SCALE")],
    )
    return _save(folder, OPTIONAL_CONFIG, graph)


BATCH_CONFIG = """
name: "counted"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] },
         { name: "BATCH" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 5000000 }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def batch_counting_model(folder: Path) -> Path:
    """Y = tanh(X @ W); BATCH = the batch size of the call, repeated on every row."""
    from onnx import TensorProto, helper, numpy_helper

    weight = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "W"], ["m"]),
            helper.make_node("Tanh", ["m"], ["Y"]),
            helper.make_node("Mul", ["X", "zero"], ["zeros"]),
            helper.make_node("Add", ["zeros", "one"], ["ones"]),
            helper.make_node("Slice", ["ones", "first", "second", "columns"], ["column"]),
            helper.make_node("ReduceSum", ["column", "rows"], ["total"], keepdims=1),
            helper.make_node("Shape", ["column"], ["column_shape"]),
            helper.make_node("Expand", ["total", "column_shape"], ["BATCH"]),
        ],
        "counted",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 3])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", 2]),
            helper.make_tensor_value_info("BATCH", TensorProto.FLOAT, ["n", 1]),
        ],
        [
            numpy_helper.from_array(weight, "W"),
            helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]),
            helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]),
            helper.make_tensor("first", TensorProto.INT64, [1], [0]),
            helper.make_tensor("second", TensorProto.INT64, [1], [1]),
            helper.make_tensor("columns", TensorProto.INT64, [1], [1]),
            helper.make_tensor("rows", TensorProto.INT64, [1], [0]),
        ],
    )
    return _save(folder, BATCH_CONFIG, graph)


VARIABLE_BATCH_CONFIG = """
name: "widths"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] },
         { name: "BATCH" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 5000000 }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def variable_batch_counting_model(folder: Path) -> Path:
    """Y = 2 * X for rows of any width; BATCH = the batch size of the call."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Add", ["X", "X"], ["Y"]),
            helper.make_node("Mul", ["X", "zero"], ["zeros"]),
            helper.make_node("Add", ["zeros", "one"], ["ones"]),
            helper.make_node("Slice", ["ones", "first", "second", "columns"], ["column"]),
            helper.make_node("ReduceSum", ["column", "rows"], ["total"], keepdims=1),
            helper.make_node("Shape", ["column"], ["column_shape"]),
            helper.make_node("Expand", ["total", "column_shape"], ["BATCH"]),
        ],
        "widths",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", "k"])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", "k"]),
            helper.make_tensor_value_info("BATCH", TensorProto.FLOAT, ["n", 1]),
        ],
        [
            helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]),
            helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]),
            helper.make_tensor("first", TensorProto.INT64, [1], [0]),
            helper.make_tensor("second", TensorProto.INT64, [1], [1]),
            helper.make_tensor("columns", TensorProto.INT64, [1], [1]),
            helper.make_tensor("rows", TensorProto.INT64, [1], [0]),
        ],
    )
    return _save(folder, VARIABLE_BATCH_CONFIG, graph)
