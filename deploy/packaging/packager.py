"""`deploy package`: one archive per deployable model plus `manifest.json`.

Order of work, so an interrupted run never leaves a manifest that names a
missing or partial archive: read the repository; for each model compute its
members and, when every file's hash is cached, its source digest; reuse the
archive if the digest and the archive's hash still match, else stream a new
archive into an unnamed temporary file, then fsync it and link it into place
on a commit thread while the next archive is written; once every commit is
done, write the manifest atomically; then remove archives no entry names.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.catalogue.images import DEFAULT_TRITON_VERSION, image_python
from deploy.client.manifest import MULTI_MODEL, written
from deploy.errors import PackagingError
from deploy.packaging.archive import write_archive
from deploy.packaging.atomic import AtomicFile, remove_stale_partials
from deploy.packaging.bundles import BUNDLES_KEY, archive_bundles, bundle_conflicts
from deploy.packaging.digest import DigestCache, cached_contents, source_digest
from deploy.packaging.environments import needs_environment, with_environments
from deploy.packaging.layout import Entry, archive_entries
from deploy.packaging.manifest import (
    MANIFEST_NAME,
    Manifest,
    ManifestEntry,
    TensorEntry,
    read_manifest,
    write_manifest,
)
from deploy.repository import Model, Repository, load_repository
from deploy.repository.files import printable

ARCHIVE_SUFFIX = ".tar.gz"
_ARCHIVE_NAME = re.compile(r"^(?P<model>.+)-[0-9a-f]{16}\.tar\.gz$")


@dataclass(frozen=True)
class PackagedModel:
    entry: ManifestEntry
    path: Path
    reused: bool  # True when the existing archive was kept (not recompressed)


@dataclass(frozen=True)
class PackageResult:
    out: Path
    manifest_path: Path
    manifest: Manifest
    models: list[PackagedModel] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # stale archives deleted

    @property
    def written(self) -> list[PackagedModel]:
        return [m for m in self.models if not m.reused]

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "manifest": str(self.manifest_path),
            "models": [{**m.entry.to_document(), "reused": m.reused} for m in self.models],
            "removed": self.removed,
        }


def target_name(model: str, digest: str) -> str:
    return f"{model}-{digest[:16]}{ARCHIVE_SUFFIX}"


def package_repository(
    repo: Path,
    out: Path,
    *,
    progress: bool = False,
    threads: int | None = None,
    triton_version: str | None = None,
    index_url: str | None = None,
) -> PackageResult:
    """Package every model of `repo` into `out` (incremental, deterministic, atomic).

    `triton_version` (the SageMaker image, default 24.09) decides the Python a
    model's `requirements.txt` environment is built for; `index_url` the
    package index pip installs it from (None: the `pip_index_url` setting, else PyPI).
    """
    try:
        return _package_repository(
            repo,
            out,
            progress=progress,
            threads=threads,
            triton_version=triton_version,
            index_url=index_url,
        )
    except OSError as exc:
        # Reads of the repository fail with their own messages; what is left
        # is the output folder (cannot create, write or rename in it).
        where = exc.filename if isinstance(exc.filename, str) else str(out)
        raise PackagingError(
            f"cannot write the output: {exc.strerror or exc}",
            where=printable(where),
            fix="pass an --out folder you can write to, on a file system with free space",
        ) from None


def _package_repository(
    repo: Path,
    out: Path,
    *,
    progress: bool,
    threads: int | None,
    triton_version: str | None,
    index_url: str | None,
) -> PackageResult:
    repository = load_repository(repo)
    if repository.problems:
        problem = repository.problems[0]
        raise PackagingError(
            f"model {problem.model!r}: {problem.message}"
            + (
                f" (and {len(repository.problems) - 1} more)"
                if len(repository.problems) > 1
                else ""
            ),
            where=str(problem.file) + (f": {problem.field}" if problem.field else ""),
            fix=problem.fix + "; `deploy validate` lists every problem",
        )
    if not repository.models:
        raise PackagingError(
            "no model folders found",
            where=str(repo),
            fix="pass a Triton model repository (one folder per model with config.pbtxt)",
        )
    _check_out(repo, out)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(out)
    cache = DigestCache.load(out)
    previous = _previous_manifest(out)
    workers = threads if threads is not None else _default_threads()

    plans = [(name, *archive_entries(repository, name)) for name in repository.models]
    if any(needs_environment(model) for model in repository.models.values()):
        image = image_python(triton_version or DEFAULT_TRITON_VERSION)
        plans = [
            (
                name,
                with_environments(repository, entries, contains, image, index=index_url),
                contains,
            )
            for name, entries, contains in plans
        ]
    packaged: list[PackagedModel] = []
    commits: list[tuple[Future[Path], PackagedModel]] = []
    # Finished archives are fsynced and moved into place on another thread
    # while the next one is written; the manifest waits for all of them.
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="archive-commit") as committer,
        _progress_bar(progress, plans, cache, previous) as on_bytes,
    ):
        for name, entries, contains in plans:
            model = repository.models[name]
            result, commit = _package_model(
                model, entries, contains, out, cache, previous, workers, on_bytes, committer
            )
            packaged.append(result)
            if commit is not None:
                commits.append((commit, result))
    for commit, result in commits:
        try:
            commit.result()
        except OSError as exc:
            raise _write_error(result.entry.name, out, exc) from exc
        cache.remember_archive(result.path, str(result.entry.sha256))
    _check_bundles(packaged)
    manifest = written(Manifest(MULTI_MODEL, {p.entry.name: p.entry for p in packaged}))
    manifest_path = write_manifest(out, manifest)
    removed = _remove_unreferenced(out, repository, manifest, previous)
    cache.forget_except(
        {str(e.source) for _, entries, _ in plans for e in entries if e.source is not None},
        {entry.target_model for entry in manifest.models.values()},
    )
    cache.save()
    return PackageResult(out, manifest_path, manifest, packaged, removed)


def _default_threads() -> int:
    # Threads that each read, hash and compress blocks of an archive (the
    # caller's among them); every step releases the GIL.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


def _check_out(repo: Path, out: Path) -> None:
    try:
        repo_resolved, out_resolved = repo.resolve(), out.resolve()
    except RuntimeError:  # Python 3.11 reports a link loop this way
        raise PackagingError(
            "symlinks form a loop", where=str(out), fix="pass a real folder for --out"
        ) from None
    if out_resolved == repo_resolved or out_resolved.is_relative_to(repo_resolved):
        raise PackagingError(
            "the output folder is inside the model repository",
            where=str(out),
            fix="pass an --out folder outside the repository (Triton would read it as a model)",
        )
    if out.is_symlink() and not out.exists():
        raise PackagingError(
            "a broken symlink or a link loop", where=str(out), fix="pass a real folder for --out"
        )
    if out.exists() and not out.is_dir():
        raise PackagingError("not a directory", where=str(out), fix="pass a folder for --out")


def _previous_manifest(out: Path) -> Manifest | None:
    if not (out / MANIFEST_NAME).is_file():
        return None
    try:
        return read_manifest(out)
    except PackagingError:
        return None  # rewritten below; an unreadable manifest only costs a full run


def _reusable(
    name: str,
    entries: list[Entry],
    out: Path,
    cache: DigestCache,
    previous: Manifest | None,
) -> tuple[ManifestEntry, Path] | None:
    if previous is None or name not in previous.models:
        return None
    contents = cached_contents(entries, cache)
    if contents is None:
        return None
    old = previous.models[name]
    digest = source_digest(entries, contents)
    path = out / target_name(name, digest)
    if old.source_digest != digest or old.target_model != path.name:
        return None
    if cache.archive_sha(path) != old.sha256:
        return None
    return old, path


def _package_model(
    model: Model,
    entries: list[Entry],
    contains: list[str],
    out: Path,
    cache: DigestCache,
    previous: Manifest | None,
    threads: int,
    on_bytes: Callable[[int], None] | None,
    committer: ThreadPoolExecutor,
) -> tuple[PackagedModel, Future[Path] | None]:
    reuse = _reusable(model.name, entries, out, cache, previous)
    if reuse is not None:
        old, path = reuse
        fresh = _entry(
            model,
            contains,
            old.target_model,
            str(old.sha256),
            int(old.bytes or 0),
            str(old.source_digest),
            archive_bundles(cached_contents(entries, cache) or {}),
        )
        if on_bytes is not None:
            on_bytes(sum(e.size for e in entries if e.source is not None))
        return PackagedModel(fresh, path, reused=True), None
    # The name depends on the content hashes computed while writing, so the
    # archive goes to an unnamed file first and gets its name at the end.
    file = AtomicFile(out / f"{model.name}{ARCHIVE_SUFFIX}")
    try:
        sha, size, contents = write_archive(
            entries, file.handle, threads=threads, on_bytes=on_bytes
        )
    except BaseException as exc:
        file.discard()
        if isinstance(exc, OSError):
            raise _write_error(model.name, out, exc) from exc
        raise
    digest = source_digest(entries, contents)
    file.target = path = out / target_name(model.name, digest)
    commit = committer.submit(file.commit)
    for entry in entries:
        if entry.source is not None:
            cache.remember_file(entry, contents[entry.arcname])
    bundles = archive_bundles(contents)
    packaged = PackagedModel(
        _entry(model, contains, path.name, sha, size, digest, bundles), path, False
    )
    return packaged, commit


def _write_error(model: str, out: Path, exc: OSError) -> PackagingError:
    return PackagingError(
        f"cannot write the archive of model {model!r}: {exc}",
        where=str(out),
        fix="check the output folder's free space and permissions",
    )


def _check_bundles(packaged: list[PackagedModel]) -> None:
    """No two archives bundle different models of one name (see `bundles`)."""
    conflicts = bundle_conflicts(
        {p.entry.target_model: p.entry.extra.get(BUNDLES_KEY, {}) for p in packaged}
    )
    if conflicts:
        first = conflicts[0]
        more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        raise PackagingError(first.message + more, where=first.first, fix=first.fix)


def _entry(
    model: Model,
    contains: list[str],
    target: str,
    sha: str,
    size: int,
    digest: str,
    bundles: dict[str, str],
) -> ManifestEntry:
    return ManifestEntry(
        name=model.name,
        target_model=target,
        sha256=sha,
        bytes=size,
        source_digest=digest,
        kind=model.kind,
        backend=model.backend,
        platform=model.platform,
        max_batch_size=model.max_batch_size,
        inputs=tuple(
            TensorEntry(t.name, t.datatype, tuple(t.shape), t.optional) for t in model.inputs
        ),
        # A model with optional inputs may leave out the outputs computed from them (the
        # tutorials' identity model answers only fp16_output without string_input).
        outputs=tuple(
            TensorEntry(t.name, t.datatype, tuple(t.shape), any(i.optional for i in model.inputs))
            for t in model.outputs
        ),
        contains=tuple(contains),
        # Models bundled for BLS, by content: see `deploy.packaging.bundles`.
        extra={BUNDLES_KEY: bundles} if bundles else {},
    )


def _remove_unreferenced(
    out: Path, repository: Repository, manifest: Manifest, previous: Manifest | None
) -> list[str]:
    """Delete older archives no entry names: this repository's models' and the old manifest's."""
    keep = {entry.target_model for entry in manifest.models.values()}
    listed = {e.target_model for e in previous.models.values()} if previous else set()
    removed = []
    for path in sorted(out.glob(f"*{ARCHIVE_SUFFIX}")):
        match = _ARCHIVE_NAME.match(path.name)
        ours = path.name in listed or (match is not None and match["model"] in repository.models)
        if ours and path.name not in keep:
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


@contextlib.contextmanager
def _progress_bar(
    enabled: bool,
    plans: list[tuple[str, list[Entry], list[str]]],
    cache: DigestCache,
    previous: Manifest | None,
) -> Iterator[Callable[[int], None] | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    total = sum(e.size for _, entries, _ in plans for e in entries if e.source is not None)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),  # stdout stays for results
        transient=True,
    ) as bar:
        task = bar.add_task("packaging", total=total)
        yield lambda n: bar.advance(task, n)
