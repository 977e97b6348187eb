"""Rules that need the stage's instance and Triton image (`--instance`, `--triton-version`).

- the image cannot run on the instance (Arm host, non-NVIDIA accelerators, a GPU
  older than the image's Triton supports): an error naming both and the fix;
- a type the instance catalogue does not know: a warning naming the assumption;
- config fields newer than the image's Triton: an error naming the release that
  introduced them (the image's server refuses the config, unlike this tool's
  newer schema, which parses it);
- a model version whose files outweigh one GPU's memory (or, without a GPU, the
  instance's memory): a warning, since it cannot be loaded whole.

The facts come from the catalogues (`deploy.catalogue`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from deploy.catalogue.images import (
    TritonImage,
    config_fields_since,
    first_tag_with,
    image,
    incompatibility,
    newest_compatible,
)
from deploy.catalogue.instances import Instance, describe
from deploy.errors import ConfigError
from deploy.repository import Model
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.registry import Context, model_rule, repository_rule

_REPOSITORY = "(repository)"
_GIB = 1024**3


def _instance(context: Context) -> Instance | None:
    if context.instance_type is None:
        return None
    try:
        return describe(context.instance_type)
    except ValueError:
        return None  # the CLI refuses malformed types before validating


def _image(context: Context) -> TritonImage | None:
    if context.triton_version is None:
        return None
    try:
        return image(context.triton_version)
    except ConfigError:
        return None  # reported once by `image_on_instance`


@repository_rule
def image_on_instance(context: Context) -> Iterator[Diagnostic]:
    root = str(context.repository.root)
    if context.triton_version is not None:
        try:
            image(context.triton_version)
        except ConfigError as exc:
            yield error(_REPOSITORY, root, "--triton-version", exc.message, exc.fix or "")
    instance = _instance(context)
    if instance is None:
        return
    if instance.assumption:
        yield warning(
            _REPOSITORY,
            root,
            "--instance",
            instance.assumption,
            "check the instance's accelerators yourself; a newer release of deploy may know it",
        )
    triton_image = _image(context)
    if triton_image is None or instance.is_neuron:
        return  # Inferentia runs its own image (`deploy neuron`)
    reason = incompatibility(triton_image, instance)
    if reason is not None:
        newest = newest_compatible(instance)
        yield error(
            _REPOSITORY,
            root,
            "--instance",
            reason,
            f"use --triton-version {newest} (infra.triton_version) on {instance.instance_type}"
            if newest
            else "pick an x86_64 CPU or NVIDIA GPU instance",
        )


def _sets(message: Any, field: str) -> bool:
    """Whether a config message sets `field` (a singular message: present; else: non-empty)."""
    descriptor = message.DESCRIPTOR.fields_by_name[field]
    if descriptor.message_type is not None and not descriptor.is_repeated:
        return bool(message.HasField(field))
    return bool(getattr(message, field))


def _set_fields(model: Model) -> Iterator[str]:
    """The catalogue-dated field paths (`a.b`) this model's config sets."""
    for path in config_fields_since():
        *parents, leaf = path.split(".")
        message = model.config
        for part in parents:
            if not _sets(message, part):
                break
            message = getattr(message, part)
        else:
            if _sets(message, leaf):
                yield path


@model_rule
def fields_newer_than_image(context: Context, model: Model) -> Iterator[Diagnostic]:
    triton_image = _image(context)
    if triton_image is None:
        return
    since = config_fields_since()
    for path in _set_fields(model):
        introduced = since[path]
        if triton_image.triton >= introduced:
            continue
        version = ".".join(map(str, introduced))
        first = first_tag_with(introduced)
        yield error(
            model.name,
            context.file_of(model),
            path,
            f"{path} was introduced in Triton {version}; image {triton_image.tag} runs Triton "
            f"{triton_image.triton_text}, which refuses the config",
            f"remove {path}, or set infra.triton_version to {first} or newer"
            if first
            else f"remove {path}",
        )


@model_rule
def model_fits_the_instance(context: Context, model: Model) -> Iterator[Diagnostic]:
    instance = _instance(context)
    if instance is None or not model.versions:
        return
    if instance.has_gpu and instance.gpu_memory_gib:
        limit, what = instance.gpu_memory_gib, f"one {_model(instance)}'s memory"
    elif instance.memory_gib:
        limit, what = instance.memory_gib, f"{instance.instance_type}'s memory"
    else:
        return
    for version in model.versions:
        size = sum((version.path / f).stat().st_size for f in version.files)
        if size > limit * _GIB:
            yield warning(
                model.name,
                str(version.path),
                "files",
                f"version {version.number} holds {size / _GIB:.1f} GiB of files, more than "
                f"{what} ({limit:g} GiB) on {instance.instance_type}",
                "pick an instance with more memory per GPU, or split or quantize the model",
            )


def _model(instance: Instance) -> str:
    return instance.accelerator.model if instance.accelerator else "GPU"
