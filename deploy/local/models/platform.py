"""The MME platform: what SageMaker does around Triton on a multi-model endpoint.

On the first invocation of a TargetModel: fetch its archive from the store,
verify the manifest's sha256 and extract it safely to `<work>/<hash>/model/`,
adapt models this Triton cannot run natively, make room within the count and
byte budgets by unloading least-recently-used models, then `POST /models` to
Triton's SageMaker frontend. A load answered 507 (Triton's out-of-memory
signal) unloads the LRU model and is retried once.

The front end calls from many threads; these rules keep it race-free:

- One lock per TargetModel (its gate) serializes whatever changes that
  model's folder or its state in Triton: extract + load, unload + delete.
  Concurrent first invocations load once, and a model is never loaded while
  its folder is being deleted.
- The budget counts models loaded, loading and unloading. A load reserves
  its place before `POST /models`, in arrival order, so concurrent first
  loads never exceed `max_models` / `max_bytes`.
- A call pins its model (`acquire` / `release`). Eviction takes unpinned
  models first; otherwise it drains one (no new pins, calls in flight
  finish) instead of unloading it under a running call. A model nobody has
  called since its load is spared for a moment, so its callers get to it.
- Every wait is bounded by the caller's deadline (`load_timeout`): a gate
  held too long, no room in time, Triton slow to load or unload are a
  `LoadTimeoutError` for that call. Requests to Triton run on the platform's
  own small pool, whose worker finishes a late answer (registers the model,
  or deletes it) and only then releases the gate and the reserved budget.
  `listing()` waits for none of this.

Invocations go straight from the front end to Triton; the platform only
says which name a TargetModel has (a dict lookup under a short lock).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import re
import shutil
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from deploy.errors import LocalEndpointError
from deploy.local.models.adapters import adapt_folder
from deploy.local.models.archive import DEFAULT_MAX_EXTRACTED_BYTES, extract_archive
from deploy.local.models.bundled import BundleClashError, BundleLedger
from deploy.local.models.store import DirectoryStore, S3Store, check_target_model
from deploy.local.triton.listener import VerifiedServer

log = logging.getLogger(__name__)

FRESH_S = 2.0  # a model nobody has called since its load is not evicted this long
_RECHECK_S = 0.25  # loads waiting for room look again this often


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
            f"environment (list {package} in the model's requirements.txt, which deploy "
            "package builds into one named by the EXECUTION_ENV_PATH parameter) and re-package"
        )
    return "read the tritonserver log; `deploy validate` the model's repository"


class ServerNotReadyError(LocalEndpointError):
    """tritonserver is not running (restarting after a crash, or stopped)."""


class LoadTimeoutError(LocalEndpointError):
    """A load or unload did not finish within the caller's wait (it may go on)."""


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
    pins: int = 0  # calls in flight (acquire/release)
    draining: bool = False  # chosen for eviction: takes no new calls
    fresh: bool = True  # not called since it was loaded
    registered: float = field(default_factory=time.monotonic)

    def describe(self) -> dict[str, Any]:
        return {
            "target_model": self.target_model,
            "hash": self.hash,
            "bytes": self.bytes,
            "load_seconds": round(self.load_seconds, 3),
            "loaded_at": self.loaded_at,
            "last_used": self.last_used,
            "adapted": self.adapted,
            "calls_in_flight": self.pins,
            **{key: round(value, 3) for key, value in self.phases.items()},
        }


class TritonServer(VerifiedServer, Protocol):
    """What the platform needs from the supervisor (its verified port and readiness)."""

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
        load_timeout: float = 120.0,
        triton_timeout: float = 600.0,
        cuda_devices: int | None = None,
        auto_complete: bool = False,
    ) -> None:
        self.store = store
        self.work_dir = work_dir
        self.server = server
        self.max_models = max_models
        self.max_bytes = max_bytes
        self.max_archive_bytes = max_archive_bytes
        self.load_timeout = load_timeout  # one caller's wait for a load or an unload
        self.triton_timeout = triton_timeout  # a request to Triton on the platform's pool
        self.cuda_devices = cuda_devices
        self.auto_complete = auto_complete
        self.loads: dict[str, int] = {}  # TargetModel -> times loaded (for status and tests)
        self.evictions = 0
        self._loaded: OrderedDict[str, LoadedModel] = OrderedDict()  # LRU order, oldest first
        self._state = threading.Condition()  # guards everything below; held only briefly
        self._gates: dict[str, threading.Lock] = {}  # per TargetModel: load, unload, delete
        self._loading: dict[str, int] = {}  # admitted loads: TargetModel -> bytes
        self._unloading: dict[str, int] = {}  # unloads under way: TargetModel -> bytes
        self._queue: deque[str] = deque()  # loads waiting for room, first come first served
        self._pending_reload: list[str] = []
        self.bundles = BundleLedger()  # bundled BLS models tritonserver holds (`bundled`)
        # Requests to Triton run here, so a caller can stop waiting while the answer
        # is still handled (a late load is registered, a late unload finished).
        self._triton = ThreadPoolExecutor(max_workers=8, thread_name_prefix="triton-admin")
        self.on_load: list[Callable[[LoadedModel], None]] = []

    # -- hot path -------------------------------------------------------------
    @staticmethod
    def hash_for(target_model: str) -> str:
        return hashlib.sha256(target_model.encode()).hexdigest()[:32]

    def acquire(self, target_model: str) -> LoadedModel | None:
        """Pin a loaded TargetModel for one call (marks it used); None if not loaded.

        A pinned model is not unloaded until `release`; one being drained for
        eviction takes no new pins (its callers load it again).
        """
        with self._state:
            model = self._loaded.get(target_model)
            if model is None or model.draining:
                return None
            self._pin(model, 1)
            return model

    def _pin(self, model: LoadedModel, count: int) -> None:
        """Call with `_state` held."""
        if model.target_model in self._loaded:
            self._loaded.move_to_end(model.target_model)
        model.pins += count
        model.last_used = time.time()
        if count and model.fresh:
            model.fresh = False
            self._state.notify_all()  # an unload may wait for this first call

    def add_pins(self, model: LoadedModel, count: int) -> None:
        """More pins on a model already pinned (one per caller that waited for its load)."""
        with self._state:
            self._pin(model, count)

    def release(self, model: LoadedModel) -> None:
        with self._state:
            model.pins -= 1
            if model.pins == 0 and (model.draining or self._queue):
                self._state.notify_all()

    # -- loading -----------------------------------------------------------------
    def ensure_loaded(self, target_model: str, timeout: float | None = None) -> str:
        """Load `target_model` unless it is loaded; returns its Triton name.

        Waits at most `timeout` (default `load_timeout`) seconds, then raises
        `LoadTimeoutError`; a load Triton is still busy with goes on.
        """
        return self._ensure(target_model, timeout, pin=False).hash

    def load_and_acquire(self, target_model: str, timeout: float | None = None) -> LoadedModel:
        """`ensure_loaded`, returning the model pinned (as `acquire` does) from the moment
        it is registered, so no eviction can come between its load and its first call."""
        return self._ensure(target_model, timeout, pin=True)

    def _ensure(self, target_model: str, timeout: float | None, *, pin: bool) -> LoadedModel:
        check_target_model(target_model)
        deadline = time.monotonic() + (self.load_timeout if timeout is None else timeout)
        with self._state:
            model = self._loaded.get(target_model)
            if model is not None and not model.draining:
                self._pin(model, 1 if pin else 0)
                return model
            gate = self._gates.setdefault(target_model, threading.Lock())
        self._take(gate, target_model, deadline)
        with self._state:
            model = self._loaded.get(target_model)  # loaded while we waited at the gate
            if model is not None:
                self._pin(model, 1 if pin else 0)
        if model is not None:
            gate.release()
            return model
        return self._load(target_model, gate, deadline, pin=pin)

    def _take(self, gate: threading.Lock, target_model: str, deadline: float) -> None:
        if not gate.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise LoadTimeoutError(
                "it is still being loaded or unloaded by an earlier request",
                where=f"TargetModel {target_model}",
                fix="retry the request shortly",
            )

    def _expected_sha(self, target_model: str) -> str | None:
        # Read on every cold load: `deploy up --local` publishes new manifests live.
        manifest = self.store.manifest()
        models = manifest.models.values() if manifest is not None else ()
        for model in models:  # the live version's archive, or its canary's
            if model.target_model == target_model:
                return model.sha256 or None
            if model.canary is not None and model.canary.target_model == target_model:
                return model.canary.sha256 or None
        return None

    def _extract(self, target_model: str, folder: Path, phases: dict[str, float]) -> None:
        started = time.perf_counter()
        model_dir = folder / "model"
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
            phases["extract_s"] = time.perf_counter() - started - phases["fetch_s"]
            # Before adaptation rewrites anything: the digests `deploy package` records.
            from deploy.packaging.bundles import folder_bundles

            (folder / "bundles.json").write_text(json.dumps(folder_bundles(model_dir)))
            try:
                report = adapt_folder(
                    model_dir, cuda_devices=self.cuda_devices, auto_complete=self.auto_complete
                )
            except LocalEndpointError as exc:
                # A model this endpoint cannot serve fails to load, as Triton would fail it.
                where = f"{exc.where}: " if exc.where else ""
                error = ModelLoadError(
                    target_model,
                    400,
                    f"load failed for model {target_model!r}: {where}{exc.message}",
                    fix=exc.fix,
                )
                log.error("%s", error)
                raise error from exc
            (folder / "adapted.json").write_text(json.dumps(report.adapted))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            if isinstance(self.store, S3Store):
                archive.unlink(missing_ok=True)

    def _load(
        self, target_model: str, gate: threading.Lock, deadline: float, *, pin: bool
    ) -> LoadedModel:
        """Load with `gate` held; releases it (or hands it to a late answer's handler)."""
        started = time.perf_counter()
        name = self.hash_for(target_model)
        folder = self.work_dir / name
        model_dir = folder / "model"
        handed_off = False
        admitted = False
        try:
            if not self.server.wait_ready(max(0.0, min(30.0, deadline - time.monotonic()))):
                raise ServerNotReadyError(
                    "tritonserver is not running", where="local endpoint", fix="retry shortly"
                )
            phases: dict[str, float] = {}
            if not model_dir.is_dir():
                self._extract(target_model, folder, phases)
            adapted = json.loads((folder / "adapted.json").read_text())
            size = sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file())
            claimed = self._claim_bundles(target_model, folder)
            try:
                self._admit(target_model, size, deadline)
            except BaseException:
                self.bundles.release(target_model, claimed)  # Triton was not asked
                raise
            admitted = True
            model = LoadedModel(target_model, name, model_dir, size, 0.0, adapted=adapted)
            posted = time.perf_counter()
            request = json.dumps({"model_name": name, "url": str(model_dir)}).encode()
            future = self._submit("POST", "/models", target_model, request)
            answer = self._answer(future, deadline)
            if answer is not None and answer[0] == 507:
                log.warning("tritonserver is out of memory loading %s; evicting and retrying", name)
                self._evict_one(keep=target_model, deadline=deadline)
                future = self._submit("POST", "/models", target_model, request)
                answer = self._answer(future, deadline)
            if answer is None:
                handed_off = True
                future.add_done_callback(lambda done: self._late_load(done, model, gate))
                raise LoadTimeoutError(
                    f"tritonserver is still loading it after "
                    f"{time.perf_counter() - started:.0f}s; the load goes on",
                    where=f"TargetModel {target_model}",
                    fix="retry the request shortly",
                )
            status, message = answer
            if status not in (200, 409):  # 409: already loaded (a reload after a race)
                shutil.rmtree(folder, ignore_errors=True)
                error = ModelLoadError(target_model, status, message)
                log.error("%s", error)
                raise error
            phases["triton_load_s"] = time.perf_counter() - posted
            model.phases = phases
            model.load_seconds = time.perf_counter() - started
            self._register(model, pin=pin)
            return model
        except BaseException:
            if admitted and not handed_off:
                self._unreserve(target_model)
            raise
        finally:
            if not handed_off:
                gate.release()

    def _claim_bundles(self, target_model: str, folder: Path) -> list[str]:
        """Claim the archive's bundled models, or refuse it as a failed load (`bundled`)."""
        bundles = json.loads((folder / "bundles.json").read_text())
        try:
            return self.bundles.claim(target_model, bundles)
        except BundleClashError as exc:
            error = ModelLoadError(target_model, 400, exc.message, fix=exc.fix)
            log.error("%s", error)
            raise error from None

    def _register(self, model: LoadedModel, *, pin: bool = False) -> None:
        with self._state:
            self._loading.pop(model.target_model, None)
            self._loaded[model.target_model] = model
            if pin:
                self._pin(model, 1)
            self.loads[model.target_model] = self.loads.get(model.target_model, 0) + 1
            self._state.notify_all()
        log.info("loaded %s as %s in %.2fs", model.target_model, model.hash, model.load_seconds)
        for callback in self.on_load:
            callback(model)

    def _unreserve(self, target_model: str) -> None:
        with self._state:
            self._loading.pop(target_model, None)
            self._state.notify_all()

    def _late_load(
        self, done: Future[tuple[int, str]], model: LoadedModel, gate: threading.Lock
    ) -> None:
        """Triton answered a load its caller stopped waiting for: finish it either way."""
        try:
            status, message = done.result()
        except Exception as exc:  # the server died meanwhile
            status, message = 0, str(exc)
        try:
            if status in (200, 409):
                model.load_seconds = time.time() - model.loaded_at
                model.loaded_at = model.last_used = time.time()
                self._register(model)
            else:
                log.error("late load of %s failed (%s): %s", model.target_model, status, message)
                shutil.rmtree(model.path.parent, ignore_errors=True)
                self._unreserve(model.target_model)
        finally:
            gate.release()

    # -- the budget ----------------------------------------------------------
    def _fits(self, incoming_bytes: int) -> bool:
        count = len(self._loaded) + len(self._loading) + len(self._unloading)
        if count == 0:
            return True  # alone it must be tried, however big
        total = (
            sum(m.bytes for m in self._loaded.values())
            + sum(self._loading.values())
            + sum(self._unloading.values())
        )
        if self.max_models is not None and count + 1 > self.max_models:
            return False
        return self.max_bytes is None or total + incoming_bytes <= self.max_bytes

    def _admit(self, target_model: str, size: int, deadline: float) -> None:
        """Reserve room for a load, in arrival order, evicting LRU models as needed."""
        with self._state:
            self._queue.append(target_model)
            try:
                while True:
                    if self._queue[0] == target_model:
                        if self._fits(size):
                            self._loading[target_model] = size
                            return
                        victim = self._pick_victim(keep=target_model)
                        if victim is not None:
                            self._state.release()
                            try:
                                self._evict(victim, deadline)
                            finally:
                                self._state.acquire()
                            self.evictions += 1
                            continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise LoadTimeoutError(
                            f"no room for it in time: {len(self._loaded)} models loaded, "
                            f"{len(self._loading)} loading, {len(self._unloading)} unloading, "
                            f"{len(self._queue) - 1} other loads waiting (--max-loaded-models "
                            f"{self.max_models}, --max-loaded-mb budget "
                            f"{self.max_bytes and self.max_bytes // 2**20})",
                            where=f"TargetModel {target_model}",
                            fix="retry the request; raise the limits if this persists",
                        )
                    # Re-checked now and then: a model just loaded becomes evictable.
                    self._state.wait(min(remaining, _RECHECK_S))
            finally:
                self._queue.remove(target_model)
                self._state.notify_all()

    def _pick_victim(self, *, keep: str) -> LoadedModel | None:
        """The least recently used evictable model, its gate taken and marked draining.

        Models with no call in flight come first; a model nobody has called since
        it was loaded is spared for FRESH_S. Call with `_state` held.
        """
        now = time.monotonic()
        candidates = [
            model
            for target, model in self._loaded.items()
            if target != keep
            and not model.draining
            and not (model.fresh and now - model.registered < FRESH_S)
        ]
        for model in sorted(candidates, key=lambda m: m.pins > 0):  # stable: LRU within
            gate = self._gates.setdefault(model.target_model, threading.Lock())
            if gate.acquire(blocking=False):  # busy: being loaded or unloaded by someone
                model.draining = True
                return model
        return None

    def _evict_one(self, *, keep: str, deadline: float) -> bool:
        with self._state:
            victim = self._pick_victim(keep=keep)
        if victim is None:
            return False
        self._evict(victim, deadline)
        with self._state:
            self.evictions += 1
        return True

    def _evict(self, model: LoadedModel, deadline: float) -> None:
        """Unload a draining model whose gate is held: wait for its calls, DELETE, delete
        its folder. Releases the gate (or hands it to a late answer's handler)."""
        target = model.target_model
        gate = self._gates[target]
        handed_off = False
        try:
            with self._state:
                while model.pins > 0:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        model.draining = False
                        self._state.notify_all()
                        raise LoadTimeoutError(
                            f"calls to {target} did not finish in time to unload it",
                            where=f"TargetModel {target}",
                            fix="retry the request shortly",
                        )
                    self._state.wait(remaining)
                if self._loaded.get(target) is model:
                    del self._loaded[target]
                self._unloading[target] = model.bytes
            log.info("unloading %s", target)
            future = self._submit("DELETE", f"/models/{model.hash}", target)
            try:
                answer = self._answer(future, deadline)
            except ServerNotReadyError:
                answer = (0, "")  # a dead server holds nothing
            if answer is None:
                handed_off = True
                future.add_done_callback(lambda _: self._unloaded(model, gate))
                raise LoadTimeoutError(
                    f"tritonserver did not finish unloading {target} in time; it goes on",
                    where=f"TargetModel {target}",
                    fix="retry the request shortly",
                )
            self._unloaded(model, None)
        finally:
            if not handed_off:
                gate.release()

    def _unloaded(self, model: LoadedModel, gate: threading.Lock | None) -> None:
        try:
            shutil.rmtree(model.path.parent, ignore_errors=True)
            with self._state:
                self._unloading.pop(model.target_model, None)
                self._state.notify_all()
        finally:
            if gate is not None:
                gate.release()

    def unload(self, target_model: str) -> bool:
        """Unload a model from Triton and delete its extracted folder.

        Waits (within `load_timeout`) for the calls in flight and, for a model just
        loaded, for its first call: the callers that asked for it get their answer.
        """
        deadline = time.monotonic() + self.load_timeout
        with self._state:
            gate = self._gates.setdefault(target_model, threading.Lock())
        self._take(gate, target_model, deadline)
        with self._state:
            model = self._loaded.get(target_model)
            while model is not None and model.fresh:
                spared = model.registered + FRESH_S - time.monotonic()
                if spared <= 0 or deadline <= time.monotonic():
                    break
                self._state.wait(min(spared, deadline - time.monotonic()))
            if model is not None:
                model.draining = True
        if model is None:
            gate.release()
            return False
        self._evict(model, deadline)
        return True

    def forget(self, target_model: str, model: LoadedModel | None = None) -> None:
        """Drop a model Triton no longer has (it answered 404); keep its files."""
        with self._state:
            current = self._loaded.get(target_model)
            if current is not None and not current.draining and model in (None, current):
                del self._loaded[target_model]
                self._state.notify_all()

    # -- requests to Triton ----------------------------------------------------
    def _submit(
        self, method: str, path: str, target_model: str, body: bytes | None = None
    ) -> Future[tuple[int, str]]:
        return self._triton.submit(self._request, method, path, target_model, body)

    @staticmethod
    def _answer(future: Future[tuple[int, str]], deadline: float) -> tuple[int, str] | None:
        """The future's answer, or None when it does not come before `deadline`."""
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeoutError:
            return None

    def _request(
        self, method: str, path: str, target_model: str, body: bytes | None = None
    ) -> tuple[int, str]:
        headers = {"X-Amzn-SageMaker-Target-Model": target_model}
        if body is not None:
            headers["Content-Type"] = "application/json"
        connection = None
        try:
            port, token = self.server.verified()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=self.triton_timeout)
            connection.connect()
            if not self.server.still_verified(token):  # the port may be another's now
                raise ConnectionRefusedError("tritonserver stopped while the connection opened")
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
            if connection is not None:
                connection.close()
        try:
            message = json.loads(text).get("error", text) if text else ""
        except (ValueError, AttributeError):
            message = text
        return response.status, str(message)

    # -- supervisor callbacks -------------------------------------------------
    def server_crashed(self) -> None:
        self.bundles.clear()  # the server that held them is gone
        with self._state:
            self._pending_reload = list(self._loaded)
            self._loaded.clear()
            self._state.notify_all()

    def server_restarted(self) -> None:
        """Reload what was loaded before the crash (files are still extracted)."""
        with self._state:
            pending, self._pending_reload = self._pending_reload, []
        for target_model in pending:
            try:
                self.ensure_loaded(target_model)
            except LocalEndpointError as exc:
                log.error("could not reload %s after a restart: %s", target_model, exc)

    # -- status ----------------------------------------------------------------
    def listing(self) -> dict[str, Any]:
        """Loaded and available models; waits on no load (only the short state lock)."""
        with self._state:
            loaded = [m.describe() for m in reversed(self._loaded.values())]
            loading = sorted(self._loading)
            unloading = sorted(self._unloading)
        manifest = self.store.manifest()
        models = manifest.models.values() if manifest is not None else ()
        available = sorted(model.target_model for model in models)
        return {
            "store": self.store.location,
            "triton_port": self.server.port,
            "loaded": loaded,
            "loading": loading,
            "unloading": unloading,
            "available": available,
            "evictions": self.evictions,
            "bundled": self.bundles.held(),  # bundled BLS model -> the TargetModel that loaded it
            "loads_total": sum(self.loads.values()),
            "max_models": self.max_models,
            "max_bytes": self.max_bytes,
        }

    def close(self) -> None:
        """Stop the pool of requests to Triton (at shutdown; Triton is stopping too)."""
        self._triton.shutdown(wait=False, cancel_futures=True)

    def clear(self) -> None:
        """Forget every model and delete the extracted folders (at shutdown)."""
        with self._state:
            self._loaded.clear()
        self.close()
        shutil.rmtree(self.work_dir, ignore_errors=True)
