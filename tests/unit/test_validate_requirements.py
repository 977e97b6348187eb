"""A python model's requirements.txt answers the warning about imports the image lacks."""

from __future__ import annotations

from pathlib import Path

from deploy.validation import validate_repository

MODEL = """\
import numpy as np
import sklearn
import torch
import transformers
"""
CONFIG = """
name: "m"
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [1] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [1] } ]
"""


def test_only_imports_requirements_txt_does_not_list_are_warned(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL)
    (folder / "config.pbtxt").write_text(CONFIG)
    (folder / "requirements.txt").write_text("Scikit_Learn==1.5.2  # the pip name\ntorch\n")
    warnings = [d for d in validate_repository(tmp_path).warnings if "imports" in d.message]
    assert [d.message.split('"')[1] for d in warnings] == ["transformers"]
    assert "(requirements.txt does not list it)" in warnings[0].message
    assert warnings[0].fix.startswith("add transformers to m/requirements.txt")
