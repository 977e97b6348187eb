"""Models bundled into BLS archives: which one tritonserver holds under each plain name.

A BLS archive's `initialize` loads each bundled model with
`pb_utils.load_model` under the name its BLS code calls, outside any
archive's namespace (`deploy.packaging.bundles` says why). SageMaker checks
nothing here: on a real multi-model endpoint the second archive that bundles
a different `preprocess` either gets the first one's (same config: Triton
keeps the loaded copy; seen with tritonserver 2.51) or replaces it under the
first archive's callers (different config). Wrong answers, no error.

This endpoint cannot load such archives side by side in a way that keeps
them apart: the BLS code names the callee, so the bundle cannot be renamed,
and the SageMaker frontend unloads only TargetModels, so a bundled model
stays loaded after the archive that loaded it is evicted. It therefore
refuses instead, before Triton is asked: a load whose archive bundles a model
under a name this tritonserver already holds with other contents fails as a
model that fails to load does on SageMaker (ModelError, OriginalStatusCode
400), naming both archives, the model and the fix. Identical bundles (same
digest) load as before. The ledger lives as long as the tritonserver process:
a restarted server holds nothing, and a load refused before Triton was asked
claims nothing; one that reached Triton keeps its claim even if it failed, as
its `initialize` may have loaded the bundle before failing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # deploy.packaging loads its whole package: only when a clash is told
    from deploy.packaging.bundles import BundleConflict


class BundleLedger:
    """Bundled model name -> (digest, the TargetModel whose load brought it)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def claim(self, target_model: str, bundles: Mapping[str, str]) -> list[str]:
        """Record `target_model`'s bundles; returns the names it newly claimed.

        Raises `BundleClashError` (claiming nothing) when one is held with other contents.
        """
        with self._lock:
            for name, digest in sorted(bundles.items()):
                held = self._held.get(name)
                if held is not None and held[0] != digest:
                    from deploy.packaging.bundles import BundleConflict

                    raise BundleClashError(BundleConflict(name, held[1], target_model))
            claimed = [name for name in sorted(bundles) if name not in self._held]
            for name in claimed:
                self._held[name] = (bundles[name], target_model)
            return claimed

    def release(self, target_model: str, names: list[str]) -> None:
        """Undo a claim whose load never reached Triton."""
        with self._lock:
            for name in names:
                if self._held.get(name, ("", ""))[1] == target_model:
                    del self._held[name]

    def clear(self) -> None:
        """tritonserver stopped: it holds nothing any more."""
        with self._lock:
            self._held.clear()

    def held(self) -> dict[str, str]:
        """Bundled model name -> the TargetModel that loaded it (for status)."""
        with self._lock:
            return {name: target for name, (_, target) in self._held.items()}


class BundleClashError(Exception):
    """A load would bring a bundled model whose name this server holds with other contents."""

    def __init__(self, conflict: BundleConflict) -> None:
        super().__init__(conflict.message)
        self.conflict = conflict

    @property
    def message(self) -> str:
        c = self.conflict
        return (
            f"refused: this archive bundles a model called {c.name!r} whose contents differ "
            f"from the {c.name!r} that TargetModel {c.first} loaded on this endpoint. Bundled "
            "models load under their plain names and stay loaded after their caller is "
            f"unloaded, so this archive's BLS calls would reach the other {c.name!r} (on "
            "SageMaker, without any error)"
        )

    @property
    def fix(self) -> str:
        return (
            f"{self.conflict.fix}; to serve the other archive here meanwhile, restart the "
            "endpoint (`deploy down --local` and `deploy up --local`, or stop and rerun "
            "`deploy serve`)"
        )
