"""A python model's `requirements.txt`, packaged as its execution environment.

A python model folder with `requirements.txt` at its root gets, in its
archive, `<model>/python-env.tar.gz` (`deploy.envs.build_environment` for the
SageMaker image's Python and platform, taken from the environment cache when
unchanged) and a `config.pbtxt` whose `EXECUTION_ENV_PATH` names it relative
to the model folder, as SageMaker extracts archives wherever it likes:

    parameters { key: "EXECUTION_ENV_PATH"
                 value { string_value: "$$TRITON_MODEL_DIRECTORY/python-env.tar.gz" } }

Every copy of the model in the archive gets both: the folder at the archive's
root (the model itself, an ensemble's step) and each bundle under `deps/` of
a BLS model that calls it (`layout`), whose `deps/<model>.json` (the config
the caller hands `pb_utils.load_model`) names the environment too. Triton
writes the files the caller passes to a folder of its own and makes that the
bundled model's `$$TRITON_MODEL_DIRECTORY`, so the caller's loader puts the
bundle's folder in its place (`model_packages/examples/bls_addsub`). Identical
bundles stay identical (the same cached environment and config), so their
digests (`bundles`) stay equal.

The requirements file lists specifiers only, and pip installs wheels from the
index the user chose (`deploy.envs.requirements`, `deploy.envs.installer`).
The repository itself is not changed.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path, PurePosixPath
from typing import Any

from deploy.catalogue.images import ImagePython
from deploy.envs.build import cached_environment
from deploy.errors import EnvBuildError, PackagingError
from deploy.packaging.layout import (
    DEPS_FOLDER,
    FILE_MODE,
    RECENT_NS,
    Entry,
    change_key_of,
    config_json,
    named_config,
)
from deploy.repository import CONFIG_FILE, Model, Repository, format_config

REQUIREMENTS_FILE = "requirements.txt"
ENV_FILE = "python-env.tar.gz"
ENV_PARAMETER = "EXECUTION_ENV_PATH"
ENV_VALUE = f"$$TRITON_MODEL_DIRECTORY/{ENV_FILE}"


def needs_environment(model: Model) -> bool:
    return model.backend == "python" and (model.path / REQUIREMENTS_FILE).is_file()


def with_environments(
    repository: Repository,
    entries: list[Entry],
    contains: list[str],
    image: ImagePython,
    *,
    cache_dir: Path | None = None,
    index: str | None = None,
) -> list[Entry]:
    """`entries` of an archive, with an environment for each model folder that asks for one."""
    result = list(entries)
    for name in contains:
        model = repository.models[name]
        if not needs_environment(model):
            continue
        copies = _copies(result, model)
        if ENV_PARAMETER in model.config.parameters:
            raise PackagingError(
                f"model {name!r} has both {REQUIREMENTS_FILE} and an {ENV_PARAMETER} parameter",
                where=str(model.path / REQUIREMENTS_FILE),
                fix=f"keep one: remove {ENV_PARAMETER} (deploy package builds the environment "
                f"from {REQUIREMENTS_FILE}) or remove {REQUIREMENTS_FILE}",
            )
        if (model.path / ENV_FILE).exists():
            raise PackagingError(
                f"{ENV_FILE} is the name deploy package gives the environment it builds",
                where=str(model.path / ENV_FILE),
                fix=f"rename or remove {ENV_FILE}",
            )
        env = _build(model, image, cache_dir, index)
        config = named_config(model)
        config.parameters[ENV_PARAMETER].string_value = ENV_VALUE
        generated = {str(root / CONFIG_FILE): _config_text(config) for root in copies}
        for root in copies:
            if root.parent.name == DEPS_FOLDER:  # bundled: its caller loads it with this config
                generated[str(root.parent / f"{name}.json")] = config_json(config)
        result = [e for e in result if e.arcname not in generated]
        result += [
            Entry(arcname=arcname, kind="file", mode=FILE_MODE, size=len(data), data=data)
            for arcname, data in generated.items()
        ]
        result += [_file_entry(env, root / ENV_FILE) for root in copies]
    return sorted(result, key=lambda e: e.arcname)


def _copies(entries: list[Entry], model: Model) -> list[PurePosixPath]:
    """Every folder of the archive that holds the model: at the archive's root, and
    under `deps/` of each model that bundles it (beside the `<name>.json` that
    `layout` generates, which no repository file can be)."""
    members = {entry.arcname: entry for entry in entries}
    top = members.get(model.name)
    roots = [PurePosixPath(model.name)] if top is not None and top.kind == "dir" else []
    for entry in entries:
        path = PurePosixPath(entry.arcname)
        if entry.data is not None and path.parent.name == DEPS_FOLDER:
            roots += [path.parent / model.name] if path.name == f"{model.name}.json" else []
    for root in roots or [PurePosixPath(model.name)]:
        if str(root / REQUIREMENTS_FILE) not in members:
            raise PackagingError(
                f"{REQUIREMENTS_FILE} of model {model.name!r} is not in its archive",
                where=str(model.path / REQUIREMENTS_FILE),
                fix="make it a regular file in the model folder",
            )
    return roots


def _build(model: Model, image: ImagePython, cache_dir: Path | None, index: str | None) -> Path:
    try:
        built = cached_environment(
            model.path / REQUIREMENTS_FILE,
            python=image.python,
            glibc=image.glibc,
            cache_dir=cache_dir,
            index=index,
        )
    except EnvBuildError as exc:
        raise PackagingError(
            f"model {model.name!r}: {exc.message}", where=exc.where, fix=exc.fix
        ) from None
    return built.path


def _config_text(config: Any) -> bytes:
    header = (
        f"# {ENV_PARAMETER} names the environment deploy package built from {REQUIREMENTS_FILE}\n"
    )
    return (header + format_config(config)).encode("utf-8")


def _file_entry(path: Path, arcname: PurePosixPath) -> Entry:
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise PackagingError("not a regular file", where=str(path), fix="build it again")
    return Entry(
        arcname=str(arcname),
        kind="file",
        mode=FILE_MODE,
        size=info.st_size,
        source=path,
        stat_key=(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns),
        change_key=change_key_of(info),
        recent=info.st_ctime_ns > time.time_ns() - RECENT_NS,
    )
