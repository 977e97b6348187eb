"""`deploy bind` on scripts that bind badly, and the configs it writes.

Each script really runs (in its own process, under the stand-in); errors must
name the script, its line, the model and the field, and leave nothing written.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.errors import BindError
from deploy.pytriton import bind_script
from deploy.repository import parse_config
from deploy.repository.schema import model_config_pb2 as pb

HEADER = """\
import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, QueuePolicy, Tensor, TimeoutAction
from pytriton.triton import Triton

def infer(requests):
    return [{"y": r["x"]} for r in requests]

X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
"""


def script(tmp_path: Path, body: str, name: str = "server.py") -> Path:
    folder = tmp_path / "app"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(HEADER + textwrap.dedent(body), encoding="utf-8")
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def bind_error(path: Path, out: Path, **kwargs: object) -> str:
    with pytest.raises(BindError) as caught:
        bind_script(path, out, **kwargs)  # type: ignore[arg-type]
    assert not out.exists(), "nothing may be written"
    return str(caught.value)


def test_a_script_that_never_binds_names_the_script_and_its_serve_line(tmp_path: Path) -> None:
    path = script(tmp_path, "with Triton() as triton:\n    triton.serve()\n")
    text = bind_error(path, tmp_path / "repo")
    assert f"server.py:{line_of(path, 'serve()')}" in text
    assert "without calling Triton.bind()" in text


def test_binding_a_name_twice_names_both_lines(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        """
        with Triton() as triton:
            triton.bind("m", infer, X, Y)  # first
            triton.bind("m", infer, X, Y)  # second
        """,
    )
    text = bind_error(path, tmp_path / "repo")
    first, second = line_of(path, "# first"), line_of(path, "# second")
    assert (
        f"server.py:{second}: model 'm' is bound a second time (first at server.py:{first})" in text
    )


def test_a_raising_script_names_the_line_that_raised(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "helper.py").write_text("def load():\n    return 1 / 0\n")
    path = script(tmp_path, "import helper\nhelper.load()\n")
    text = bind_error(path, tmp_path / "repo")
    assert "helper.py:2" in text and "server.py" in text
    assert "ZeroDivisionError: division by zero" in text


def test_a_syntax_error_names_its_line(tmp_path: Path) -> None:
    path = script(tmp_path, "def broken(:\n    pass\n")
    text = bind_error(path, tmp_path / "repo")
    assert f"server.py:{line_of(path, 'def broken(')}" in text
    assert "SyntaxError" in text


def test_a_failing_exit_status_is_an_error_and_exit_0_is_not(tmp_path: Path) -> None:
    path = script(tmp_path, "import sys\nsys.exit(2)\n")
    assert "exited with status 2" in bind_error(path, tmp_path / "repo")
    path = script(
        tmp_path, "import sys\nwith Triton() as t:\n    t.bind('m', infer, X, Y)\nsys.exit(0)\n"
    )
    assert [m.name for m in bind_script(path, tmp_path / "repo").models] == ["m"]


@pytest.mark.parametrize(
    ("tensors", "expected"),
    [
        ("[Tensor(name='x', shape=(-1,))]", "inputs[0] (x): dtype is missing"),
        (
            "[Tensor(dtype=np.complex64, shape=(-1,))]",
            "inputs[0] (INPUT_1): dtype <class 'numpy.complex64'> has no Triton datatype",
        ),
        (
            "[Tensor(dtype=np.str_, shape=(-1,))]",
            "inputs[0] (INPUT_1): dtype <class 'numpy.str_'> has no Triton datatype",
        ),
        (
            "[Tensor(dtype=np.float32, shape=(0,))]",
            "inputs[0] (INPUT_1): shape [0] is not a list of dimensions",
        ),
        ("[]", "inputs is empty"),
        ("X + X", "inputs name 'x' is used twice"),
    ],
)
def test_bad_tensors_name_the_model_and_field(tmp_path: Path, tensors: str, expected: str) -> None:
    path = script(tmp_path, f"with Triton() as t:\n    t.bind('bad', infer, {tensors}, Y)\n")
    text = bind_error(path, tmp_path / "repo")
    assert f"server.py:{line_of(path, 't.bind(')}: model 'bad': {expected}" in text


def test_max_batch_size_below_one_with_batching_names_the_field(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        """
        with Triton() as t:
            t.bind("ok", infer, X, Y)
            t.bind("zero", infer, X, Y, config=ModelConfig(max_batch_size=0))
        """,
    )
    text = bind_error(path, tmp_path / "repo")
    assert "model 'zero': config.max_batch_size is 0; with batching on it must be >= 1" in text
    assert "1 problem(s)" in text  # the good model is not reported, and not written either


def test_existing_models_are_kept_unless_forced(tmp_path: Path) -> None:
    path = script(tmp_path, "with Triton() as t:\n    t.bind('m', infer, X, Y)\n")
    out = tmp_path / "repo"
    (out / "m").mkdir(parents=True)
    (out / "m" / "mine.txt").write_text("keep")
    with pytest.raises(BindError, match="already exist"):
        bind_script(path, out)
    assert (out / "m" / "mine.txt").read_text() == "keep"
    bind_script(path, out, force=True)
    assert not (out / "m" / "mine.txt").exists()
    assert (out / "m" / "1" / "model.py").is_file()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []  # no staging left


def test_a_folder_with_its_own_model_py_is_refused(tmp_path: Path) -> None:
    path = script(tmp_path, "with Triton() as t:\n    t.bind('m', infer, X, Y)\n")
    (path.parent / "model.py").write_text("class Net: pass\n")
    assert "model.py" in bind_error(path, tmp_path / "repo")


def test_a_hanging_script_is_stopped(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        "import time\nwith Triton() as t:\n    t.bind('m', infer, X, Y)\n"
        "    t.serve()\n    time.sleep(60)\n",
    )
    assert "did not finish within 2 s" in bind_error(path, tmp_path / "repo", timeout=2.0)


def test_the_config_follows_what_pytriton_generates(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        """
        import sys
        batcher = DynamicBatcher(
            max_queue_delay_microseconds=100,
            preferred_batch_size=[2, 4],
            priority_levels=2,
            default_priority_level=1,
            default_queue_policy=QueuePolicy(max_queue_size=5),
            priority_queue_policy={2: QueuePolicy(timeout_action=TimeoutAction.DELAY,
                                                  default_timeout_microseconds=7)},
        )
        with Triton() as t:
            t.bind("batched", [infer, infer, infer],
                   [Tensor(dtype=np.bytes_, shape=(1,)),
                    Tensor(dtype=object, shape=(-1,), optional=True),
                    Tensor(dtype=np.dtype("uint16"), shape=(2, 3))],
                   [Tensor(dtype=bool, shape=(1,)), Tensor(dtype="float16", shape=(-1,))],
                   model_version=3,
                   config=ModelConfig(max_batch_size=4, batcher=batcher, response_cache=True))
            t.bind("plain", infer, X, Y, config=ModelConfig(batching=False, decoupled=True))
            t.bind("default", infer, X, Y, config=ModelConfig(batcher=None))
            t.bind(sys.argv[1], infer, X, Y)
        """,
    )
    out = tmp_path / "repo"
    bind_script(path, out, argv=["from_argv"])
    batched = parse_config((out / "batched" / "config.pbtxt").read_text())
    assert (out / "batched" / "3" / "model.py").is_file()
    assert [
        (t.name, pb.DataType.Name(t.data_type), list(t.dims), t.optional) for t in batched.input
    ] == [
        ("INPUT_1", "TYPE_STRING", [1], False),
        ("INPUT_2", "TYPE_STRING", [-1], True),
        ("INPUT_3", "TYPE_UINT16", [2, 3], False),
    ]
    assert [(t.name, pb.DataType.Name(t.data_type)) for t in batched.output] == [
        ("OUTPUT_1", "TYPE_BOOL"),
        ("OUTPUT_2", "TYPE_FP16"),
    ]
    assert batched.max_batch_size == 4 and batched.backend == "python"
    assert [(g.count, pb.ModelInstanceGroup.Kind.Name(g.kind)) for g in batched.instance_group] == [
        (3, "KIND_CPU")
    ]
    dynamic = batched.dynamic_batching
    assert (dynamic.max_queue_delay_microseconds, list(dynamic.preferred_batch_size)) == (
        100,
        [2, 4],
    )
    assert (dynamic.preserve_ordering, dynamic.priority_levels, dynamic.default_priority_level) == (
        False,
        2,
        1,
    )
    assert dynamic.default_queue_policy.max_queue_size == 5
    delayed = dynamic.priority_queue_policy[2]
    assert pb.ModelQueuePolicy.TimeoutAction.Name(delayed.timeout_action) == "DELAY"
    assert delayed.default_timeout_microseconds == 7
    assert batched.response_cache.enable
    plain = parse_config((out / "plain" / "config.pbtxt").read_text())
    assert plain.max_batch_size == 0 and not plain.HasField("dynamic_batching")
    assert plain.model_transaction_policy.decoupled
    default = parse_config((out / "default" / "config.pbtxt").read_text())
    assert default.max_batch_size == 4 and not default.HasField("dynamic_batching")
    bound = json.loads((out / "from_argv" / "1" / "deploy-bind.json").read_text())
    assert bound["argv"] == ["from_argv"]
    assert (out / "from_argv" / "1" / "server.py").is_file()
    assert (out / "from_argv" / "1" / "pytriton" / "decorators.py").is_file()
    assert not (out / "from_argv" / "1" / "pytriton" / "_record.py").exists()


def test_the_command_exits_1_without_a_traceback(tmp_path: Path) -> None:
    path = script(
        tmp_path, "with Triton() as t:\n    t.bind('m', infer, [Tensor(shape=(1,))], Y)\n"
    )
    result = CliRunner().invoke(app, ["bind", str(path), "--out", str(tmp_path / "repo")])
    assert result.exit_code == 1
    assert "dtype is missing" in result.output
    assert "Traceback" not in result.output


def test_a_config_triton_would_refuse_stops_before_anything_is_written(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        """
        batcher = DynamicBatcher(preserve_ordering=True, priority_levels=2)
        with Triton() as t:
            t.bind("m", infer, X, Y, config=ModelConfig(batcher=batcher))
        """,
    )
    out = tmp_path / "repo"
    text = bind_error(path, out)
    assert f"{out}/m/config.pbtxt: dynamic_batching.preserve_ordering" in text
    assert ".bind-" not in text  # the staging folder is not what the user sees


def test_arguments_after_the_double_dash_go_to_the_script(tmp_path: Path) -> None:
    path = script(
        tmp_path, "import sys\nwith Triton() as t:\n    t.bind(sys.argv[1], infer, X, Y)\n"
    )
    out = tmp_path / "repo"
    result = CliRunner().invoke(app, ["bind", str(path), "--out", str(out), "--", "named", "-v"])
    assert result.exit_code == 0, result.output
    bound = json.loads((out / "named" / "1" / "deploy-bind.json").read_text())
    assert bound["argv"] == ["named", "-v"]


def test_the_scripts_requirements_become_the_models(tmp_path: Path) -> None:
    path = script(tmp_path, "with Triton() as t:\n    t.bind('m', infer, X, Y)\n")
    (path.parent / "requirements.txt").write_text("six==1.17.0\n")
    out = tmp_path / "repo"
    bind_script(path, out)
    assert (out / "m" / "requirements.txt").read_text() == "six==1.17.0\n"


def test_warnings_name_files_where_they_are_after_the_bind(tmp_path: Path) -> None:
    # A torch import in a file next to the script: the SageMaker image's Python lacks torch.
    path = script(tmp_path, "with Triton() as t:\n    t.bind('m', infer, X, Y)\n")
    (path.parent / "client.py").write_text("import torch\n")
    out = tmp_path / "repo"
    result = bind_script(path, out)
    warned = [d for d in result.warnings if "torch" in d.message]
    assert warned, result.warnings
    for diagnostic in warned:
        named = Path(str(diagnostic.file).split(":", 1)[0])
        assert named.is_relative_to(out), diagnostic.file
        assert named.exists(), diagnostic.file
