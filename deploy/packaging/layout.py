"""What goes into a model's archive, checked for safety (no I/O beyond stat/readlink).

An archive holds model folders at its root (`<model>/config.pbtxt`,
`<model>/<version>/...`):

- a model: its own folder;
- an ensemble: its folder and every composing model's folder side by side
  (SageMaker's Triton picks the folder whose config says `platform: "ensemble"`);
- a BLS model (declares `deploy.dependencies`): its folder, with each
  dependency packaged under `<model>/deps/<dependency>/` plus
  `<model>/deps/<dependency>.json`, the dependency's config in Triton's JSON
  form, which the model's `initialize` passes to `pb_utils.load_model`
  (see docs/architecture.md, "BLS models").

Symlinks are followed only while they stay inside the repository and do not
lead back to a folder being walked (a loop); devices, sockets and FIFOs are
refused from `lstat`/`stat` alone, before anything opens them.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from google.protobuf import json_format

from deploy.errors import PackagingError
from deploy.repository import (
    COMPLETED_CONFIG_HEADER,
    CONFIG_FILE,
    Model,
    Repository,
    format_config,
)
from deploy.repository.files import model_entries, printable
from deploy.repository.golden import GOLDEN_FOLDER

DEPS_FOLDER = "deps"
# File times tick coarsely (a few ms on Linux, 1-2 s on some file systems): a
# file changed less than this before it was stat'ed may change again without
# moving its times, so its archived bytes are checked by a second read.
RECENT_NS = 2_000_000_000
DIR_MODE = 0o755
EXEC_MODE = 0o755
FILE_MODE = 0o644


@dataclass(frozen=True)
class Entry:
    """One archive member: a folder, a file read from `source`, or generated `data`."""

    arcname: str
    kind: str  # "dir" or "file"
    mode: int
    size: int = 0
    source: Path | None = None
    data: bytes | None = None
    stat_key: tuple[int, int, int, int] | None = None  # (dev, ino, size, mtime_ns)
    change_key: tuple[int, ...] | None = None  # stat_key and ctime_ns: must hold while archived
    recent: bool = False  # changed so lately that a further change may keep the same times


def change_key_of(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def archive_entries(repo: Repository, name: str) -> tuple[list[Entry], list[str]]:
    """Members of `name`'s archive, sorted by arcname, and the model folders it holds."""
    model = _require(repo, name, referrer=None)
    entries: list[Entry] = []
    contains: list[str] = []
    tops = _ensemble_closure(repo, model) if model.kind == "ensemble" else [model.name]
    for top in tops:
        _add_model(repo, _require(repo, top, referrer=model), PurePosixPath(top), entries, contains)
    files = [e.arcname for e in entries if e.kind == "file"]
    if len(set(files)) != len(files):
        raise PackagingError(
            "two archive members have the same path",
            where=f"model {name!r}",
            fix="rename the clashing model or dependency folders",
        )
    # Every parent folder gets its own member, so extraction sets its mode too.
    folders = {e.arcname for e in entries if e.kind == "dir"}
    for arcname in files + list(folders):
        folders.update(str(parent) for parent in PurePosixPath(arcname).parents if parent.name)
    members = [e for e in entries if e.kind == "file"]
    members += [Entry(arcname=f, kind="dir", mode=DIR_MODE) for f in folders]
    members.sort(key=lambda e: e.arcname)
    return members, sorted(set(contains))


def _require(repo: Repository, name: str, referrer: Model | None) -> Model:
    _check_name(name, referrer)
    model = repo.models.get(name)
    if model is None:
        where = f"{referrer.config_path or referrer.path}" if referrer else str(repo.root)
        raise PackagingError(
            f"model {name!r} is not in the repository",
            where=where,
            fix=f"add the folder {name}/ to the repository or remove the reference",
        )
    return model


def _check_name(name: str, referrer: Model | None) -> None:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or len(path.parts) != 1:
        where = str(referrer.config_path or referrer.path) if referrer else name
        raise PackagingError(
            f"model name {name!r} is not a plain folder name",
            where=where,
            fix="reference models by their folder name (no '/', '..' or absolute paths)",
        )


def _ensemble_closure(repo: Repository, model: Model) -> list[str]:
    seen: list[str] = []
    pending = [model.name]
    while pending:
        current = pending.pop(0)
        if current in seen:
            continue
        seen.append(current)
        step_model = _require(repo, current, referrer=model)
        pending.extend(step.model_name for step in step_model.ensemble_steps)
    return sorted(seen)


def _add_model(
    repo: Repository,
    model: Model,
    arcroot: PurePosixPath,
    entries: list[Entry],
    contains: list[str],
    chain: tuple[str, ...] = (),
) -> None:
    if model.name in chain:
        raise PackagingError(
            f"BLS dependencies form a cycle: {' -> '.join((*chain, model.name))}",
            where=str(model.config_path or model.path),
            fix="remove one of the deploy.dependencies entries",
        )
    contains.append(model.name)
    _check_relative_fields(model)
    root = repo.root.resolve()
    entries.append(Entry(arcname=str(arcroot), kind="dir", mode=DIR_MODE))
    _add_tree(model.path, arcroot, root, entries, leave_out=(GOLDEN_FOLDER,))
    if model.auto_completed:
        # The config its auto_complete_config completes (from config.pbtxt when there is
        # one, as Triton does), written in place of config.pbtxt so the archive loads
        # with auto-completion off too and shows what Triton will load.
        config_arcname = str(arcroot / CONFIG_FILE)
        entries[:] = [entry for entry in entries if entry.arcname != config_arcname]
        data = _completed_config_text(model)
        entries.append(
            Entry(
                arcname=config_arcname,
                kind="file",
                mode=FILE_MODE,
                size=len(data),
                data=data,
            )
        )
    if model.dependencies:
        deps = arcroot / DEPS_FOLDER
        if (model.path / DEPS_FOLDER).exists():
            raise PackagingError(
                f"the folder {DEPS_FOLDER}/ is reserved for bundled BLS dependencies",
                where=str(model.path / DEPS_FOLDER),
                fix=f"rename {DEPS_FOLDER}/ in this model",
            )
        entries.append(Entry(arcname=str(deps), kind="dir", mode=DIR_MODE))
        for dependency in model.dependencies:
            dep = _require(repo, dependency, referrer=model)
            _add_model(repo, dep, deps / dep.name, entries, contains, (*chain, model.name))
            data = config_json(named_config(dep))
            entries.append(
                Entry(
                    arcname=str(deps / f"{dep.name}.json"),
                    kind="file",
                    mode=FILE_MODE,
                    size=len(data),
                    data=data,
                )
            )


def _completed_config_text(model: Model) -> bytes:
    config = named_config(model)
    return (COMPLETED_CONFIG_HEADER + "\n" + format_config(config)).encode("utf-8")


def named_config(model: Model) -> Any:
    """A copy of the model's config, named as its folder."""
    config = type(model.config)()
    config.CopyFrom(model.config)
    config.name = model.name
    return config


def config_json(config: Any) -> bytes:
    """A config in Triton's JSON form (what `pb_utils.load_model` takes: `deps/<name>.json`)."""
    document = json_format.MessageToDict(config, preserving_proto_field_name=True)
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8")


def _check_relative_fields(model: Model) -> None:
    where = str(model.config_path or model.path)
    paths = [("default_model_filename", model.config.default_model_filename)]
    paths += [("output.label_filename", t.label_filename) for t in model.outputs]
    for field, value in paths:
        if value and (PurePosixPath(value).is_absolute() or ".." in PurePosixPath(value).parts):
            raise PackagingError(
                f"{field} {value!r} points outside the model folder",
                where=f"{where}: {field}",
                fix="use a path relative to the model folder; SageMaker extracts archives "
                "to a folder of its own",
            )


def _add_tree(
    folder: Path,
    arcroot: PurePosixPath,
    root: Path,
    entries: list[Entry],
    inside: tuple[Path, ...] = (),
    leave_out: tuple[str, ...] = (),
) -> None:
    """Add `folder`'s files; `inside` holds the resolved folders being walked (link loops).

    `leave_out` names top-level entries that are not model content (golden/).
    """
    inside = (*inside, folder.resolve())
    for relative in model_entries(folder):
        if relative.parts[0] in leave_out:
            continue
        path = folder / relative
        arcname = arcroot / relative.as_posix()
        _add_path(path, arcname, root, entries, inside)


def _add_path(
    path: Path,
    arcname: PurePosixPath,
    root: Path,
    entries: list[Entry],
    inside: tuple[Path, ...],
) -> None:
    # Only lstat/stat and readlink here: nothing is opened before its type is known.
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            target = _link_target(path, root)
            if target.is_dir():
                walked = (*inside, path.parent.resolve())
                if any(folder.is_relative_to(target) for folder in walked):
                    raise PackagingError(
                        f"symlink to a folder that contains it (-> {printable(path.readlink())}): "
                        "packaging it would never end",
                        where=printable(path),
                        fix="remove the link, or link to a folder that is not one of its parents",
                    )
                entries.append(Entry(arcname=str(arcname), kind="dir", mode=DIR_MODE))
                _add_tree(target, arcname, root, entries, inside)
                return
            path = target
            info = path.stat()
    except OSError as exc:
        raise PackagingError(
            f"cannot read: {exc.strerror or exc}",
            where=printable(path),
            fix="make it readable by the user that runs deploy (e.g. chmod u+rX), or remove it",
        ) from None
    if stat.S_ISDIR(info.st_mode):
        entries.append(Entry(arcname=str(arcname), kind="dir", mode=DIR_MODE))
        return
    if not stat.S_ISREG(info.st_mode):
        raise PackagingError(
            "not a regular file (device, socket or FIFO)",
            where=printable(path),
            fix="remove it from the model folder",
        )
    entries.append(
        Entry(
            arcname=str(arcname),
            kind="file",
            mode=EXEC_MODE if info.st_mode & stat.S_IXUSR else FILE_MODE,
            size=info.st_size,
            source=path,
            stat_key=(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns),
            change_key=change_key_of(info),
            recent=info.st_ctime_ns > time.time_ns() - RECENT_NS,
        )
    )


def _link_target(link: Path, root: Path) -> Path:
    """Where `link` leads, if that is an existing path inside the repository."""
    target = Path(os.path.realpath(link))  # never raises; stops at a loop
    shown = printable(link.readlink())
    if not target.is_relative_to(root):
        raise PackagingError(
            f"symlink leaves the repository (-> {shown})",
            where=printable(link),
            fix="copy the file into the model folder, or link inside the repository",
        )
    try:
        link.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PackagingError(
                f"symlinks form a loop (-> {shown})",
                where=printable(link),
                fix="point the link at a file or folder, not at a link that leads back to it",
            ) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise PackagingError(
                f"broken symlink (-> {shown})",
                where=printable(link),
                fix="fix or remove the link",
            ) from None
        raise
    return target
