"""Model names and TargetModels that every layer can serve.

A model's folder name travels far: into its archive's name
(`<name>-<16 hex>.tar.gz`), the SageMaker `X-Amzn-SageMaker-Target-Model`
header (printable ASCII, at most 1024 characters), S3 keys, paths on disk,
and the command line tritonserver's python backend starts each model's stub
with, which is run by `bash -c` unquoted (python_backend
`src/stub_launcher.cc`): a space splits it, a newline or `$(...)` runs
something else. So names are kept to characters that mean nothing to any of
them.
"""

from __future__ import annotations

import re

from deploy.hosting.limits import MAX_TARGET_MODEL

MODEL_NAME_CHARACTERS = "letters A-Z and a-z, digits, '_', '.' and '-' (not first)"
TARGET_MODEL_CHARACTERS = f"{MODEL_NAME_CHARACTERS} and '/' between folders"
# `<name>-<16 hex>.tar.gz` and its hidden partial file must fit a file name (255 bytes).
MAX_MODEL_NAME = 200

_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_TARGET_MODEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*")
_ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/")


def _offending(name: str, allowed: frozenset[str]) -> str:
    found = list(dict.fromkeys(c for c in name if c not in allowed))
    return ", ".join(repr(c) for c in found[:5])


def model_name_problem(name: str) -> str | None:
    """Why `name` cannot name a served model, or None when it can."""
    if not name:
        return "the model name is empty"
    if len(name) > MAX_MODEL_NAME:
        return f"the model name is {len(name)} characters long, over {MAX_MODEL_NAME}"
    if _MODEL_NAME.fullmatch(name):
        return None
    bad = _offending(name, _ALLOWED - {"/"})
    if bad:
        return f"the model name {name!r} has characters a served model cannot have: {bad}"
    return f"the model name {name!r} starts with {name[0]!r}"


def target_model_problem(target_model: str) -> str | None:
    """Why the model server cannot serve this TargetModel, or None when it can."""
    if len(target_model) > MAX_TARGET_MODEL:
        return f"TargetModel is {len(target_model)} characters long, over {MAX_TARGET_MODEL}"
    if _TARGET_MODEL.fullmatch(target_model):
        return None
    bad = _offending(target_model, _ALLOWED)
    if bad:
        return f"TargetModel {target_model!r} has characters the model server cannot serve: {bad}"
    return f"TargetModel {target_model!r} starts with {target_model[:1]!r}"
