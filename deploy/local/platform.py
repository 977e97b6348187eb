"""The MME platform: what SageMaker does around Triton on a multi-model endpoint.

On the first invocation of a TargetModel: fetch its archive from the store,
verify the manifest's sha256 while extracting it safely to
`<work>/<hash>/model/`, adapt models this Triton cannot run natively, evict
least-recently-used models when a count or byte budget would be exceeded,
then `POST /models` to Triton's SageMaker frontend. Concurrent first
invocations of one TargetModel load it once. A load answered 507 (Triton's
out-of-memory signal) unloads the LRU model and is retried once.

The platform is synchronous and thread-safe; the asyncio front end asks
`lookup()` on its hot path (a dict hit) and runs `ensure_loaded()` in a
worker thread only on a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import logging
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from deploy.errors import LocalEndpointError
from deploy.local.adapters import adapt_folder
from deploy.local.archive import DEFAULT_MAX_EXTRACTED_BYTES, extract_archive
from deploy.local.store import DirectoryStore, S3Store, check_target_model

log = logging.getLogger(__name__)


class ModelLoadError(LocalEndpointError):
    """A model could not be loaded: Triton refused it, or this endpoint cannot serve it.

    Carries the status and message a client gets as OriginalStatusCode and
    OriginalMessage.
    """

    def __init__(
        self, target_model: str, status: int, triton_message: str, *, fix: str | None = None
    ) -> None:
        super().__init__(
            f"the model failed to load ({status}): {triton_message}",
            where=f"TargetModel {target_model}",
            fix=fix or load_failure_fix(triton_message),
        )
        self.status = status
        self.triton_message = triton_message


_MISSING_MODULE = re.compile(r"No module named '([^']+)'")


def load_failure_fix(message: str) -> str:
    """What to do about a load failure, from Triton's message."""
    missing = _MISSING_MODULE.search(message)
    if missing:
        package = missing.group(1).split(".")[0]
        return (
            f"model.py imports {package!r}, which the Python of the SageMaker Triton image "
            "(and of this endpoint's python backend) lacks: ship it in an execution "
            "environment (a conda-pack archive named by the EXECUTION_ENV_PATH parameter) "
            "and re-package"
        )
    return "read the tritonserver log; `deploy validate` the model's repository"


class ServerNotReadyError(LocalEndpointError):
    """tritonserver is not running (restarting after a crash, or stopped)."""


class LoadTimeoutError(LocalEndpointError):
    """A model is still loading after the caller's wait budget."""


@dataclass
class LoadedModel:
    target_model: str
    hash: str
    path: Path
    bytes: int
    load_seconds: float
    loaded_at: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.time)
    adapted: dict[str, str] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # fetch_s, extract_s, triton_load_s

    def describe(self) -> dict[str, Any]:
        return {
            "target_model": self.target_model,
            "hash": self.hash,
            "bytes": self.bytes,
            "load_seconds": round(self.load_seconds, 3),
            "loaded_at": self.loaded_at,
            "last_used": self.last_used,
            "adapted": self.adapted,
            **{key: round(value, 3) for key, value in self.phases.items()},
        }


class TritonServer(Protocol):
    """What the platform needs from the supervisor (a port and readiness)."""

    port: int

    def wait_ready(self, timeout: float) -> bool: ...


class ModelPlatform:
    def __init__(
        self,
        store: DirectoryStore | S3Store,
        work_dir: Path,
        server: TritonServer,
        *,
        max_models: int | None = None,
        max_bytes: int | None = None,
        max_archive_bytes: int = DEFAULT_MAX_EXTRACTED_BYTES,
        load_timeout: float = 600.0,
        cuda_devices: int | None = None,
        auto_complete: bool = False,
    ) -> None:
        self.store = store
        self.work_dir = work_dir
        self.server = server
        self.max_models = max_models
        self.max_bytes = max_bytes
        self.max_archive_bytes = max_archive_bytes
        self.load_timeout = load_timeout
        self.cuda_devices = cuda_devices
        self.auto_complete = auto_complete
        self.loads: dict[str, int] = {}  # TargetModel -> times loaded (for status and tests)
        self.evictions = 0
        self._loaded: OrderedDict[str, LoadedModel] = OrderedDict()  # LRU order, oldest first
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self._pending_reload: list[str] = []
        self.on_load: list[Callable[[LoadedModel], None]] = []

    # -- hot path -------------------------------------------------------------
    @staticmethod
    def hash_for(target_model: str) -> str:
        return hashlib.sha256(target_model.encode()).hexdigest()[:32]

    def lookup(self, target_model: str) -> str | None:
        """The Triton name of a loaded TargetModel (marks it used), else None."""
        with self._lock:
            model = self._loaded.get(target_model)
            if model is None:
                return None
            self._loaded.move_to_end(target_model)
            model.last_used = time.time()
            return model.hash

    # -- loading -----------------------------------------------------------------
    def ensure_loaded(self, target_model: str) -> str:
        """Load `target_model` unless it is loaded; returns its Triton name."""
        check_target_model(target_model)
        with self._lock:
            if target_model in self._loaded:
                self._loaded.move_to_end(target_model)
                return self._loaded[target_model].hash
            gate = self._loading.setdefault(target_model, threading.Lock())
        with gate:  # concurrent first invocations queue here; one of them loads
            name = self.lookup(target_model)
            if name is not None:
                return name
            return self._load(target_model)

    def _expected_sha(self, target_model: str) -> str | None:
        # Read on every cold load: `deploy up --local` publishes new manifests live.
        manifest = self.store.manifest() or {"models": {}}
        for entry in manifest["models"].values():
            if isinstance(entry, dict) and entry.get("target_model") == target_model:
                sha = entry.get("sha256")
                return str(sha) if sha else None
        return None

    def _load(self, target_model: str) -> str:
        started = time.perf_counter()
        name = self.hash_for(target_model)
        folder = self.work_dir / name
        model_dir = folder / "model"
        if not self.server.wait_ready(30.0):
            raise ServerNotReadyError(
                "tritonserver is not running", where="local endpoint", fix="retry shortly"
            )
        phases: dict[str, float] = {}
        if not model_dir.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            archive = self.store.fetch(target_model, self.work_dir / ".downloads")
            phases["fetch_s"] = time.perf_counter() - started
            try:
                extract_archive(
                    archive,
                    model_dir,
                    expected_sha256=self._expected_sha(target_model),
                    max_bytes=self.max_archive_bytes,
                    name=f"TargetModel {target_model}",
                )
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            finally:
                if isinstance(self.store, S3Store):
                    archive.unlink(missing_ok=True)
            phases["extract_s"] = time.perf_counter() - started - phases["fetch_s"]
            try:
                report = adapt_folder(
                    model_dir, cuda_devices=self.cuda_devices, auto_complete=self.auto_complete
                )
            except LocalEndpointError as exc:
                # A model this endpoint cannot serve fails to load, as Triton would fail it.
                shutil.rmtree(folder, ignore_errors=True)
                where = f"{exc.where}: " if exc.where else ""
                error = ModelLoadError(
                    target_model,
                    400,
                    f"load failed for model {target_model!r}: {where}{exc.message}",
                    fix=exc.fix,
                )
                log.error("%s", error)
                raise error from exc
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            (folder / "adapted.json").write_text(json.dumps(report.adapted))
        adapted = json.loads((folder / "adapted.json").read_text())
        size = sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file())
        self._make_room(size, keep=target_model)
        posted = time.perf_counter()
        status, body = self._post_load(target_model, name, model_dir)
        if status == 507:
            log.warning("tritonserver is out of memory loading %s; evicting and retrying", name)
            self._evict_one(keep=target_model)
            status, body = self._post_load(target_model, name, model_dir)
        if status not in (200, 409):  # 409: already loaded (a reload after a race)
            shutil.rmtree(folder, ignore_errors=True)
            error = ModelLoadError(target_model, status, body)
            log.error("%s", error)
            raise error
        phases["triton_load_s"] = time.perf_counter() - posted
        model = LoadedModel(
            target_model,
            name,
            model_dir,
            size,
            time.perf_counter() - started,
            adapted=adapted,
            phases=phases,
        )
        with self._lock:
            self._loaded[target_model] = model
            self.loads[target_model] = self.loads.get(target_model, 0) + 1
        log.info("loaded %s as %s in %.2fs", target_model, name, model.load_seconds)
        for callback in self.on_load:
            callback(model)
        return name

    def _request(
        self, method: str, path: str, target_model: str, body: bytes | None = None
    ) -> tuple[int, str]:
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.server.port, timeout=self.load_timeout
        )
        headers = {"X-Amzn-SageMaker-Target-Model": target_model}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
        except OSError as exc:
            raise ServerNotReadyError(
                f"tritonserver did not answer {method} {path}: {exc}",
                where="local endpoint",
                fix="retry shortly; the supervisor restarts a crashed server",
            ) from exc
        finally:
            connection.close()
        try:
            message = json.loads(text).get("error", text) if text else ""
        except (ValueError, AttributeError):
            message = text
        return response.status, str(message)

    def _post_load(self, target_model: str, name: str, model_dir: Path) -> tuple[int, str]:
        body = json.dumps({"model_name": name, "url": str(model_dir)}).encode()
        return self._request("POST", "/models", target_model, body)

    # -- eviction ------------------------------------------------------------
    def _make_room(self, incoming_bytes: int, *, keep: str) -> None:
        while True:
            with self._lock:
                count = len(self._loaded)
                total = sum(m.bytes for m in self._loaded.values())
            over_count = self.max_models is not None and count + 1 > self.max_models
            over_bytes = self.max_bytes is not None and total + incoming_bytes > self.max_bytes
            if not (over_count or over_bytes) or not self._evict_one(keep=keep):
                return

    def _evict_one(self, *, keep: str) -> bool:
        with self._lock:
            victim = next((tm for tm in self._loaded if tm != keep), None)
        if victim is None:
            return False
        log.info("evicting least-recently-used model %s", victim)
        self.unload(victim)
        self.evictions += 1
        return True

    def unload(self, target_model: str) -> bool:
        """Unload a model from Triton and delete its extracted folder."""
        with self._lock:
            model = self._loaded.pop(target_model, None)
        if model is None:
            return False
        with contextlib.suppress(ServerNotReadyError):  # a dead server holds nothing
            self._request("DELETE", f"/models/{model.hash}", target_model)
        shutil.rmtree(model.path.parent, ignore_errors=True)
        return True

    def forget(self, target_model: str) -> None:
        """Drop a model Triton no longer has (it answered 404); keep its files."""
        with self._lock:
            self._loaded.pop(target_model, None)

    # -- supervisor callbacks -------------------------------------------------
    def server_crashed(self) -> None:
        with self._lock:
            self._pending_reload = list(self._loaded)
            self._loaded.clear()

    def server_restarted(self) -> None:
        """Reload what was loaded before the crash (files are still extracted)."""
        with self._lock:
            pending, self._pending_reload = self._pending_reload, []
        for target_model in pending:
            try:
                self.ensure_loaded(target_model)
            except LocalEndpointError as exc:
                log.error("could not reload %s after a restart: %s", target_model, exc)

    # -- status ----------------------------------------------------------------
    def listing(self) -> dict[str, Any]:
        with self._lock:
            loaded = [m.describe() for m in reversed(self._loaded.values())]
        manifest = self.store.manifest() or {"models": {}}
        available = sorted(
            e["target_model"] for e in manifest["models"].values() if "target_model" in e
        )
        return {
            "store": self.store.location,
            "triton_port": self.server.port,
            "loaded": loaded,
            "available": available,
            "evictions": self.evictions,
            "max_models": self.max_models,
            "max_bytes": self.max_bytes,
        }

    def clear(self) -> None:
        """Forget every model and delete the extracted folders (at shutdown)."""
        with self._lock:
            self._loaded.clear()
        shutil.rmtree(self.work_dir, ignore_errors=True)
