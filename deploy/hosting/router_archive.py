"""The router layout's archive: every model plus the router in one model.tar.gz.

`deploy neuron package` writes it for ml.inf1, and the router layouts
(`deploy.hosting.router`) for single-model, async and serverless endpoints.

A single-model endpoint loads one `model.tar.gz` into /opt/ml/model. It holds
every model folder of the repository plus the generated router at its root;
`manifest.json` next to it says `"hosting": "single-model"` for the SDK and
records the archive's digest and, per model, a digest of its folder. The
archive is written with the packaging component's deterministic tar.gz
writer (ISA-L), so the same repository gives the same bytes.

A python model with a `requirements.txt` gets its execution environment, as
in every layout (`deploy.packaging.environments`): `<model>/python-env.tar.gz`
built for the stage image's Python, named by its config's EXECUTION_ENV_PATH.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from deploy.client.manifest import MANIFEST_NAME, SINGLE_MODEL, ArchiveRef, dump
from deploy.errors import RouterError
from deploy.hosting.router_model import (
    DEFAULT_ROUTER_INSTANCES,
    ROUTER_NAME,
    router_manifest,
    stage_layout,
)

ARCHIVE_NAME = "model.tar.gz"


def _entries(staged: Path) -> list[Any]:
    from deploy.packaging.layout import DIR_MODE, EXEC_MODE, FILE_MODE, Entry
    from deploy.repository.files import skipped

    entries: list[Entry] = []
    # followlinks: the model folders are links into the user's repository.
    for current, dirnames, filenames in os.walk(staged, followlinks=True):
        here = Path(current)
        dirnames[:] = sorted(d for d in dirnames if not skipped(d))
        for name in dirnames:
            arcname = PurePosixPath((here / name).relative_to(staged).as_posix())
            entries.append(Entry(str(arcname), "dir", DIR_MODE))
        for name in sorted(n for n in filenames if not skipped(n)):
            path = here / name
            stat = path.stat()
            mode = EXEC_MODE if stat.st_mode & 0o111 else FILE_MODE
            arcname = PurePosixPath(path.relative_to(staged).as_posix())
            entries.append(Entry(str(arcname), "file", mode, stat.st_size, source=path))
    return sorted(entries, key=lambda entry: entry.arcname)


def _with_environments(
    repository: Path, entries: list[Any], models: list[str], triton_version: str | None
) -> list[Any]:
    """`entries` with an execution environment for each python model with requirements.txt."""
    from deploy.catalogue.images import DEFAULT_TRITON_VERSION, image_python
    from deploy.packaging.environments import REQUIREMENTS_FILE, with_environments
    from deploy.repository import load_repository

    if not any((repository / name / REQUIREMENTS_FILE).is_file() for name in models):
        return entries
    loaded = load_repository(repository)
    image = image_python(triton_version or DEFAULT_TRITON_VERSION)
    return with_environments(
        loaded, entries, [name for name in models if name in loaded.models], image
    )


def model_digests(entries: list[Any], models: list[str]) -> dict[str, tuple[str, int]]:
    """Per model folder: (SHA-256 over its members' paths, modes and contents, bytes).

    The archive's own digest changes with any model (and with the router); these
    say which models changed, for `deploy up`'s plan.
    """
    digests = {name: hashlib.sha256() for name in models}
    sizes = dict.fromkeys(models, 0)
    for entry in entries:
        top = entry.arcname.split("/", 1)[0]
        if top not in digests:
            continue
        content = ""
        if entry.kind == "file" and entry.data is not None:  # generated (a config.pbtxt)
            content = hashlib.sha256(entry.data).hexdigest()
            sizes[top] += entry.size
        elif entry.kind == "file" and entry.source is not None:
            content = hashlib.sha256(Path(entry.source).read_bytes()).hexdigest()
            sizes[top] += entry.size
        digests[top].update(f"{entry.arcname}\0{entry.kind}\0{entry.mode:o}\0{content}\n".encode())
    return {name: (digest.hexdigest(), sizes[name]) for name, digest in digests.items()}


def package_single_model(
    repository: Path,
    out: Path,
    *,
    router: str = ROUTER_NAME,
    router_instances: int = DEFAULT_ROUTER_INSTANCES,
    hosting: str = SINGLE_MODEL,
    triton_version: str | None = None,
) -> dict[str, Any]:
    """Write `out/model.tar.gz` and `out/manifest.json`; returns the manifest.

    `hosting` is the manifest's (any mode that serves the router layout);
    `triton_version` (the SageMaker image, default 24.09) decides the Python a
    model's `requirements.txt` environment is built for."""
    from deploy.packaging.archive import write_archive
    from deploy.packaging.atomic import atomic_file, atomic_write_bytes

    with tempfile.TemporaryDirectory(prefix="deploy-inf1-") as scratch:
        staged = Path(scratch) / "model"
        models = stage_layout(repository, staged, router=router, router_instances=router_instances)
        names = [model.name for model in models]
        entries = _with_environments(repository, _entries(staged), names, triton_version)
        try:
            with atomic_file(out / ARCHIVE_NAME) as archive:
                sha256, size, _ = write_archive(entries, archive.handle)
        except OSError as exc:
            raise RouterError(f"cannot write the archive: {exc}", where=str(out)) from exc
        digests = model_digests(entries, names)
    routed = router_manifest(models, router=router, hosting=hosting)
    manifest = dataclasses.replace(
        routed,
        models={
            name: dataclasses.replace(info, source_digest=digests[name][0], bytes=digests[name][1])
            for name, info in routed.models.items()
        },
        archive=ArchiveRef(ARCHIVE_NAME, sha256, size),
    )
    atomic_write_bytes(out / MANIFEST_NAME, dump(manifest))
    return manifest.to_document()
