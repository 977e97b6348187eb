"""Models bundled into BLS archives, and archives whose bundles cannot share an endpoint.

A BLS model's archive carries each model it calls under `<model>/deps/<name>/`
with `<model>/deps/<name>.json` (see `layout`), and its `initialize` loads
them with `pb_utils.load_model(name, config=..., files=...)`. What Triton then
does decides what can share an endpoint (triton-inference-server/core
`model_repository_manager.cc`, python_backend `model_loader.cc`, and the
SageMaker frontend `src/sagemaker_server.cc`):

- SageMaker registers each archive as a repository of its own and loads only
  its top folder, renamed to the TargetModel; with `--model-namespacing=true`
  an ensemble's steps load inside that archive's namespace, so ensembles do not
  collide.
- A model loaded from override files has no repository: it lands in the empty
  namespace under its plain name. Two archives that bundle `preprocess` load
  the same Triton model. Loading it again with the same config keeps the copy
  already loaded (seen here with tritonserver 2.51: the second archive's
  callers get the first archive's answers); a different config replaces it
  under the first archive's callers. Unloading a BLS model leaves its bundled
  models loaded. Neither says anything.

So two archives on one endpoint may bundle a model under the same name only
when the bundles are identical. A bundle's digest covers the files
`load_model` receives (paths relative to the bundle, contents) and its JSON
config; file modes are left out, as extraction may change them. The manifest
records each archive's bundles under `BUNDLES_KEY` ({name: digest}), so a
later `deploy up` can compare the archives it publishes with those an
earlier run published, and the local endpoint reads the same digests from the
extracted folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from blake3 import blake3

from deploy.client import manifest as contract
from deploy.errors import PackagingError

BUNDLES_KEY = "bundles"  # per-model manifest key: {bundled model name: digest}
DEPS_FOLDER = "deps"  # as `layout.DEPS_FOLDER`
_CONFIG = "config.pbtxt"


def _bundle_roots(files: Iterable[str]) -> dict[PurePosixPath, str]:
    """Bundle folder -> model name: `X/deps/N/` with `X/deps/N.json` and
    `X/deps/N/config.pbtxt`, X being a model folder (it has `X/config.pbtxt`)."""
    present = {PurePosixPath(name) for name in files}
    roots: dict[PurePosixPath, str] = {}
    for path in present:
        parent = path.parent
        if (
            path.suffix == ".json"
            and parent.name == DEPS_FOLDER
            and parent.parent / _CONFIG in present
            and parent / path.stem / _CONFIG in present
        ):
            roots[parent / path.stem] = path.stem
    return roots


def _digest(root: PurePosixPath, files: Iterable[str], content: Callable[[str], str]) -> str:
    digest = blake3(b"deploy-bundle-1\n")
    config = str(root.parent / f"{root.name}.json")
    digest.update(f"config\0{content(config)}\n".encode())
    for name in sorted(files):
        path = PurePosixPath(name)
        if path.is_relative_to(root):
            digest.update(f"{path.relative_to(root)}\0{content(name)}\n".encode())
    return digest.hexdigest()


def bundles_of(files: Mapping[str, Callable[[], str]]) -> dict[str, str]:
    """{name: digest} of the bundles among `files` (archive path -> its content hash,
    computed on demand). Nested bundles count: each loads under its own name."""
    found: dict[str, set[str]] = {}
    for root, name in _bundle_roots(files).items():
        found.setdefault(name, set()).add(_digest(root, files, lambda key: files[key]()))
    # One archive bundling two different models of one name cannot load both.
    return {name: "|".join(sorted(digests)) for name, digests in sorted(found.items())}


def archive_bundles(file_hashes: Mapping[str, str]) -> dict[str, str]:
    """Bundles of an archive being packaged: `file_hashes` maps each file member's
    arcname to its BLAKE3 content hash (what `deploy package` computes anyway)."""

    def known(sha: str) -> Callable[[], str]:
        return lambda: sha

    return bundles_of({name: known(sha) for name, sha in file_hashes.items()})


def folder_bundles(folder: Path) -> dict[str, str]:
    """Bundles of an extracted archive (files only; contents hashed as packaging does)."""
    files = {
        path.relative_to(folder).as_posix(): path
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink()
    }

    def hasher(path: Path) -> Callable[[], str]:
        def content() -> str:
            digest = blake3()
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
            return digest.hexdigest()

        return content

    return bundles_of({name: hasher(path) for name, path in files.items()})


@dataclass(frozen=True)
class BundleConflict:
    """Archives `first` and `second` bundle different models called `name`."""

    name: str
    first: str
    second: str

    @property
    def message(self) -> str:
        if self.first == self.second:
            return (
                f"archive {self.first} bundles two different models called {self.name!r} "
                "(at two depths of deps/); both load under that plain name, so one of them "
                "answers every call to it"
            )
        return (
            f"archives {self.first} and {self.second} both bundle a model called "
            f"{self.name!r}, with different contents; a bundled model loads under its plain "
            "name, so on one endpoint one archive's callers would get the other's "
            f"{self.name!r} without any error"
        )

    @property
    def fix(self) -> str:
        return (
            f"give one of the two {self.name!r} models another name (its folder, its "
            "config's name, the deploy.dependencies entry and the model_name its BLS "
            "callers pass), or bundle identical copies"
        )


def bundle_conflicts(archives: Mapping[str, Mapping[str, str]]) -> list[BundleConflict]:
    """Pairs of archives (name -> {bundled model: digest}) that bundle different
    contents under one model name; identical copies are no conflict. An archive
    that bundles two different models of one name conflicts with itself."""
    conflicts: list[BundleConflict] = []
    seen: dict[str, tuple[str, str]] = {}  # bundled name -> (archive, digest)
    for archive in sorted(archives):
        for name, digest in sorted(archives[archive].items()):
            if "|" in digest:
                conflicts.append(BundleConflict(name, archive, archive))
            earlier = seen.setdefault(name, (archive, digest))
            if earlier[1] != digest:
                conflicts.append(BundleConflict(name, earlier[0], archive))
    return conflicts


def manifest_bundles(document: Mapping[str, object] | None) -> dict[str, dict[str, str]]:
    """TargetModel -> its bundles, as a manifest records them (archives packaged before
    the manifest recorded bundles have none to compare; nor has a manifest that breaks
    the contract)."""
    if document is None:
        return {}
    try:
        models = contract.parse(document, "manifest").models
    except contract.ManifestFormatError:
        return {}
    found: dict[str, dict[str, str]] = {}
    for info in models.values():
        bundles = info.extra.get(BUNDLES_KEY)
        if isinstance(bundles, Mapping):
            found[info.target_model] = {str(k): str(v) for k, v in bundles.items()}
    return found


def check_published_bundles(
    document: Mapping[str, object], published: Mapping[str, object] | None
) -> None:
    """Before `deploy up` uploads anything: the archives it publishes may not bundle a
    model that differs from one of the same name in another archive it publishes, nor
    in an archive the `published` manifest names (an earlier run's, which a running
    endpoint's instances may still hold loaded, its bundled models with it, whatever
    archive asks for them; pass None when no endpoint runs)."""
    new = manifest_bundles(document)
    earlier = {k: v for k, v in manifest_bundles(published).items() if k not in new}
    conflicts = bundle_conflicts(new)
    if not conflicts:
        across = [
            BundleConflict(name, old, fresh)
            for fresh in sorted(new)
            for name, digest in sorted(new[fresh].items())
            for old in sorted(earlier)
            if earlier[old].get(name, digest) != digest
        ]
        if across:
            first = across[0]
            old, fresh = first.first, first.second
            raise PackagingError(
                f"archive {fresh} bundles a model called {first.name!r} that differs from the "
                f"{first.name!r} bundled in {old}, which the published manifest names (an "
                "earlier deploy): an instance that has loaded it keeps that "
                f"{first.name!r} loaded under its plain name, and {fresh} would call it "
                "without any error. Nothing was uploaded",
                where=f"models bundling {first.name!r}",
                fix=f"give the changed {first.name!r} another name (its folder, its config's "
                "name, the deploy.dependencies entry and the model_name its BLS callers "
                "pass), or start the endpoint afresh (`deploy down`, then `deploy up`: a new "
                "endpoint holds nothing)",
            )
        return
    first = conflicts[0]
    more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
    raise PackagingError(first.message + more, where=first.first, fix=first.fix)
