"""TorchScript naming: the PyTorch backend binds tensors by `<name>__<index>` names.

Inputs may instead use the traced `forward()` argument names; when input
names break the convention and a `model.pt` is present, the rule reads the
argument names with torch (if installed) to tell which case applies. Names
that follow neither are accepted: the backend then binds tensors by their
order in config.pbtxt (triton-inference-server/pytorch_backend
`GetNamingConvention`, "STRICT_CONFIG_ORDERING", since 22.06), so they are
warnings: a config listed in another order than `forward()` silently swaps
tensors.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator

from deploy.repository import Model
from deploy.validation.diagnostics import Diagnostic, warning
from deploy.validation.registry import Context, model_rule

_CONVENTION = re.compile(r"^.+__\d+$")


@model_rule
def torchscript_names(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.backend != "pytorch":
        return
    file = ctx.file_of(model)
    for index, tensor in enumerate(model.config.output):
        if not _CONVENTION.match(tensor.name):
            yield warning(
                model.name,
                file,
                f"output[{index}].name",
                f'TorchScript output "{tensor.name}" does not follow the <name>__<index> '
                "convention, so the PyTorch backend binds outputs by their order in "
                "config.pbtxt",
                f'rename it to e.g. "OUTPUT__{index}" (index = position in the returned tuple), '
                "or keep the outputs in the order forward() returns them",
            )
            break
    odd = [(i, t.name) for i, t in enumerate(model.config.input) if not _CONVENTION.match(t.name)]
    if not odd:
        return
    arguments = _forward_arguments(model)
    for index, name in odd:
        if arguments is not None and name in arguments:
            continue  # bound by forward()'s argument name
        yield warning(
            model.name,
            file,
            f"input[{index}].name",
            f'TorchScript input "{name}" follows neither <name>__<index> nor the names of '
            "forward()'s arguments"
            + (f" ({', '.join(arguments)})" if arguments else "")
            + ", so the PyTorch backend binds inputs by their order in config.pbtxt",
            f'rename it to e.g. "INPUT__{index}", or to the forward() argument it feeds',
        )
        break


def _forward_arguments(model: Model) -> list[str] | None:
    filename = model.config.default_model_filename or "model.pt"
    for version in reversed(model.versions):
        path = version.path / filename
        if path.is_file():
            try:
                import torch
            except ImportError:
                return None
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # TorchScript is deprecated upstream
                    module = torch.jit.load(str(path), map_location="cpu")  # type: ignore[no-untyped-call]
                schema = module.forward.schema
            except (RuntimeError, AttributeError, ValueError):
                return None
            return [a.name for a in schema.arguments if a.name != "self"]
    return None
