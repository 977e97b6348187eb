"""The local endpoint of `hosting = "components"`: one inference component per model.

On SageMaker, InvokeEndpoint names a component in the
X-Amzn-SageMaker-Inference-Component header (boto3's `InferenceComponentName`) and
sends no TargetModel; each component runs copies of its one model. Here the
multi-model endpoint's platform holds each model's own archive (the components'
per-model layout is the multi-model one), and a component's copy is its model
loaded in tritonserver. The front end's invoker (`ComponentInvoker`) maps the header
to the model and has the platform serve it as the multi-model endpoint does (read
whole: an invoker's calls take no hot path); the served manifest names each
component (`component_name(endpoint, model)`) with the inference-component addressing.

Copies. Every component starts with one copy (SageMaker creates a component with a
CopyCount of at least 1). A component whose `min_copies` is 0
(`[stages.X.models.NAME]`) and that nobody called for `scale_to_zero_after`
seconds scales in: its model is unloaded. A call to it then gets SageMaker's
no-capacity error and, as the NoCapacityInvocationFailures alarm and step
policy do on AWS, starts a copy; calls succeed once the model is loaded again.

Created components. `deploy up --local` creates, updates and deletes components
before and after it publishes the manifest, as `deploy up` does on SageMaker:
it writes them to the store's `components.json` (`write_created`), which this
endpoint reads with the manifest and which wins over it. A component exists (and
answers its smoke test) before any manifest names its model, and an updated one
serves its new archive before clients are switched to it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from deploy.client.manifest import (
    COMPONENTS,
    MANIFEST_MINOR,
    Invoke,
    Manifest,
)
from deploy.errors import LocalEndpointError
from deploy.hosting.component_sizing import component_name
from deploy.local.http import wire
from deploy.local.http.frontend import FrontEnd, Reply, Request
from deploy.local.models.store import DirectoryStore
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint

log = logging.getLogger(__name__)

INFERENCE_COMPONENT = "x-amzn-sagemaker-inference-component"
_COMPONENT_HEADER = INFERENCE_COMPONENT.encode()
_TARGET_HEADER = wire.TARGET_MODEL.encode()
# SageMaker's answer to a call of a component with no copy (scaled to zero): a
# ValidationError (HTTP 400) with this message, as AWS's "Unlock cost savings with
# the new scale down to zero feature in SageMaker Inference" (re:Invent 2024 blog
# post and its notebooks) shows it. The call counts in NoCapacityInvocationFailures.
NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling "
    "may be in-progress (if configured) or try to increase the capacity by invoking "
    "UpdateInferenceComponentRuntimeConfig API."
)
# SageMaker's ValidationError for an endpoint of components called without the header
# (quoted in boto3 users' reports, e.g. aws-samples/amazon-kendra-langchain-extensions#64).
HEADER_REQUIRED = (
    "Inference Component Name header is required for endpoints to which you plan to "
    "deploy inference components. Please include Inference Component Name header or "
    "consider using SageMaker models."
)
_SCALE_IN_CHECK_S = 0.5
CREATED = "components.json"  # in the store: the components `deploy up --local` made
REFRESH_S = 2.0  # how often the store's manifest is read again


@dataclass(frozen=True)
class Component:
    """One model's inference component on the local endpoint."""

    name: str  # its InferenceComponentName
    model: str  # the logical model
    target_model: str  # the model's archive in the store
    min_copies: int = 1


def served_manifest(manifest: Manifest, endpoint_name: str) -> Manifest:
    """`manifest` as an endpoint of components publishes it: hosting components,
    the inference-component addressing, each model's component named (as the
    manifest names it, else `component_name(endpoint_name, model)`)."""
    models = {
        name: replace(
            info,
            inference_component=info.inference_component or component_name(endpoint_name, name),
        )
        for name, info in manifest.models.items()
    }
    return replace(
        manifest,
        hosting=COMPONENTS,
        models=models,
        format_minor=MANIFEST_MINOR,
        invoke=Invoke.of(COMPONENTS),
    )


def read_created(store: Path) -> dict[str, Component]:
    """The components `deploy up --local` made in the store folder `store` (none: {})."""
    path = store / CREATED
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {
            name: Component(
                name, str(entry["model"]), str(entry["target_model"]), int(entry["min_copies"])
            )
            for name, entry in document["components"].items()
        }
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LocalEndpointError(
            f"cannot read the components `deploy up --local` made: {exc}",
            where=str(path),
            fix="run `deploy up --local` again (it writes the file whole), or delete it",
        ) from exc


def write_created(store: Path, components: Mapping[str, Component]) -> None:
    """Record the components of the store folder `store` (written whole, atomically)."""
    from deploy._files import atomic_write_bytes

    document = {
        "components": {
            name: {
                "model": c.model,
                "target_model": c.target_model,
                "min_copies": c.min_copies,
            }
            for name, c in sorted(components.items())
        }
    }
    store.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(store / CREATED, json.dumps(document, indent=2).encode())


def components_of(manifest: Manifest, min_copies: Mapping[str, int]) -> dict[str, Component]:
    """Each model's component by name; `min_copies` by model (absent: 1)."""
    found = {}
    for name, info in manifest.models.items():
        assert info.inference_component is not None  # `served_manifest` names them all
        found[info.inference_component] = Component(
            info.inference_component, name, info.target_model, min_copies.get(name, 1)
        )
    return found


class Copies:
    """The components the served manifest names, how many copies each has (0 or 1
    here) and which are starting."""

    def __init__(self) -> None:
        self.components: Mapping[str, Component] = {}
        self.manifest: Manifest | None = None  # as served (None: the store has none yet)
        self._lock = threading.Lock()
        self._copies: dict[str, int] = {}
        self._starting: set[str] = set()
        self.scale_outs = 0

    def update(self, manifest: Manifest | None, components: Mapping[str, Component]) -> list[str]:
        """The manifest read now; returns the components new to it (each created with
        one copy, as SageMaker creates them) or whose model changed."""
        with self._lock:
            changed = [
                name
                for name, component in components.items()
                if self.components.get(name) != component
            ]
            for name in changed:
                self._copies.setdefault(name, 1)
            self.components, self.manifest = components, manifest
            return changed

    def count(self, name: str) -> int:
        with self._lock:
            return self._copies.get(name, 0)

    def starting(self, name: str) -> bool:
        with self._lock:
            return name in self._starting

    def scaled_in(self, name: str) -> bool:
        """Record a scale-in to 0; False when the component has no copy to give up."""
        with self._lock:
            if self._copies.get(name, 0) == 0 or name in self._starting:
                return False
            self._copies[name] = 0
            return True

    def claim_start(self, name: str) -> bool:
        """Mark a copy as starting; False when one already is."""
        with self._lock:
            if name in self._starting or self._copies.get(name, 0) > 0:
                return False
            self._starting.add(name)
            self.scale_outs += 1
            return True

    def started(self, name: str, ok: bool) -> None:
        with self._lock:
            self._starting.discard(name)
            if ok:
                self._copies[name] = 1

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {
                name: {
                    "model": component.model,
                    "target_model": component.target_model,
                    "min_copies": component.min_copies,
                    "copies": self._copies.get(name, 0),
                    "starting": name in self._starting,
                }
                for name, component in self.components.items()
            }


class ComponentInvoker:
    """InvokeEndpoint by InferenceComponentName (the front end's `Invoker` for this
    mode); GET /models lists the components and their copies too."""

    headers: frozenset[bytes] = frozenset({_COMPONENT_HEADER})

    def __init__(
        self,
        copies: Copies,
        start_copy: Callable[[Component], None],
        refresh: Callable[[], object],  # re-reads the store's manifest (blocking I/O)
        listing: Callable[[], dict[str, Any]],  # the endpoint's (blocking I/O)
    ) -> None:
        self.copies = copies
        self.start_copy = start_copy
        self.refresh = refresh
        self.listing = listing

    def _component(self, frontend: FrontEnd, request: Request) -> Component | Reply:
        """The component a call names, its TargetModel header set to the component's
        model; or SageMaker's ValidationError."""
        raw = request.headers.get(_COMPONENT_HEADER)
        if not raw:
            return wire.validation_error(HEADER_REQUIRED).encode()
        name = raw.decode("utf-8", "replace")
        component = self.copies.components.get(name)
        if component is None:
            # SageMaker's wording for an unknown component is not documented; the code
            # and status are those of every other request error (ValidationError, 400).
            return wire.validation_error(
                f"Endpoint {frontend.endpoint_name} has no inference component {name}."
            ).encode()
        target = component.target_model.encode()
        given = request.headers.get(_TARGET_HEADER)
        if given is not None and given != target:
            return wire.validation_error(
                f"Endpoint {frontend.endpoint_name} hosts inference components: send no "
                "TargetModel, name the component in InferenceComponentName"
            ).encode()
        request.headers[_TARGET_HEADER] = target
        return component

    async def route(self, frontend: FrontEnd, request: Request, path: bytes) -> Reply | None:
        if path != b"/models" or request.method != b"GET":
            return None
        # GET /models (`deploy status --local`): the components and their copies too.
        listing = await asyncio.get_running_loop().run_in_executor(None, self.listing)
        return 200, [("Content-Type", "application/json")], json.dumps(listing).encode()

    async def invoke(self, frontend: FrontEnd, request: Request, endpoint: str) -> Reply:
        if endpoint != frontend.endpoint_name:
            return await frontend.invoke_platform(request, endpoint)  # endpoint not found
        component = self._component(frontend, request)
        if not isinstance(component, Component) and request.headers.get(_COMPONENT_HEADER):
            # A component the manifest read last did not name: a newer one may.
            await asyncio.get_running_loop().run_in_executor(None, self.refresh)
            component = self._component(frontend, request)
        if not isinstance(component, Component):
            return component
        if self.copies.count(component.name) == 0:  # scaled in (calls in flight finish)
            self.start_copy(component)
            return wire.validation_error(NO_CAPACITY).encode()
        return await frontend.invoke_platform(request, endpoint)

    async def close(self) -> None:
        return None  # the endpoint stops the copies' threads


class ComponentEndpoint(LocalEndpoint):
    """An endpoint of inference components on this machine (start/stop/url as
    `LocalEndpoint`). `min_copies` by model (absent: 1); `scale_to_zero_after`: the
    idle seconds after which a component of min_copies 0 unloads (None: never).

    The store's manifest names the components. It is read at start and again every
    `REFRESH_S` and when a call names a component it lacks (`deploy up --local`
    publishes it after the endpoint starts, and publishes new versions); a new
    component, or one whose model changed, loads its copy in the background.
    """

    def __init__(
        self,
        store: str | Path,
        *,
        work_dir: Path | None = None,
        options: EndpointOptions | None = None,
        min_copies: Mapping[str, int] | None = None,
        scale_to_zero_after: float | None = None,
    ) -> None:
        super().__init__(store, work_dir=work_dir, options=options)
        self.min_copies = dict(min_copies or {})
        self.copies = Copies()
        self.scale_to_zero_after = scale_to_zero_after
        self._refresh_lock = threading.Lock()
        base = self.frontend
        self.frontend = FrontEnd(
            self.platform,
            lambda: self.supervisor.ready,
            lambda: self.supervisor.crashes,
            endpoint_name=self.options.endpoint_name,
            max_payload=self.options.max_payload,
            model_wait=self.options.model_wait,
            invoke_timeout=self.options.invoke_timeout,
            log_path=base.log_stream.removeprefix("file://"),
            manifest=self._served_manifest,
            limits=self.options.connection_limits,
            invoker=ComponentInvoker(self.copies, self._start_copy, self.refresh, self.listing),
        )
        self._stop_scaling = threading.Event()
        self._manager: threading.Thread | None = None

    @property
    def components(self) -> Mapping[str, Component]:
        return self.copies.components

    def refresh(self) -> list[Component]:
        """Read the store's manifest and the components `deploy up --local` made (which
        win); returns the components new or changed since."""
        with self._refresh_lock:
            read = self.store.manifest()
            store = self.store
            created = read_created(store.root) if isinstance(store, DirectoryStore) else {}
            served = served_manifest(read, self.endpoint_name) if read is not None else None
            components = components_of(served, self.min_copies) if served is not None else {}
            if served is not None:
                for name in sorted(set(self.min_copies) - set(served.models)):
                    log.warning("models.%s: min_copies names no model of the store; ignored", name)
            components |= created
            changed = self.copies.update(served, components)
            return [components[name] for name in changed]

    def _served_manifest(self) -> Manifest | None:
        """GET /deploy/manifest.json: the manifest as an endpoint of components publishes it."""
        self.refresh()
        return self.copies.manifest

    def start(self) -> ComponentEndpoint:
        super().start()
        try:
            for component in self.refresh():  # one copy each, as created
                self.platform.ensure_loaded(component.target_model, self.options.model_wait)
        except BaseException:
            self.stop()
            raise
        self._manager = threading.Thread(target=self._manage, name="component-copies", daemon=True)
        self._manager.start()
        return self

    def stop(self) -> None:
        self._stop_scaling.set()
        if self._manager is not None:
            self._manager.join(10)
        super().stop()

    def _start_copy(self, component: Component) -> None:
        """Load a copy of a component that has none, in the background (once)."""
        if not self.copies.claim_start(component.name):
            return
        log.info("component %s has no copy: starting one", component.name)
        self._load_in_background(component, started=True)

    def _load_in_background(self, component: Component, *, started: bool = False) -> None:
        def load() -> None:
            ok = False
            try:
                self.platform.ensure_loaded(component.target_model, self.options.model_wait)
                ok = True
            except Exception as exc:  # the next call tries again
                log.warning("component %s: its copy failed to start: %s", component.name, exc)
            finally:
                if started:
                    self.copies.started(component.name, ok)

        threading.Thread(target=load, name=f"copy-{component.name}", daemon=True).start()

    def _manage(self) -> None:
        """Re-read the manifest every `REFRESH_S`; scale idle components in."""
        idle = self.scale_to_zero_after
        refreshed = time.monotonic()
        while not self._stop_scaling.wait(min(_SCALE_IN_CHECK_S, idle or _SCALE_IN_CHECK_S)):
            if time.monotonic() - refreshed >= REFRESH_S:
                refreshed = time.monotonic()
                try:
                    changed = self.refresh()
                except LocalEndpointError as exc:
                    log.warning("cannot read the store's manifest: %s", exc)
                    changed = []
                for component in changed:
                    log.info("component %s: model %s", component.name, component.target_model)
                    self._load_in_background(component)
            if idle is not None:
                self._scale_in(idle)

    def _scale_in(self, idle: float) -> None:
        """Unload each component of min_copies 0 nobody called for `idle` seconds."""
        loaded = {entry["target_model"]: entry for entry in self.platform.listing()["loaded"]}
        for component in self.components.values():
            entry = loaded.get(component.target_model)
            if component.min_copies > 0 or entry is None or entry["calls_in_flight"]:
                continue
            if time.time() - float(entry["last_used"]) < idle:
                continue
            if not self.copies.scaled_in(component.name):
                continue
            log.info("component %s idle for %gs: scaling in to 0 copies", component.name, idle)
            try:
                self.platform.unload(component.target_model)
            except LocalEndpointError as exc:
                log.warning("component %s: unloading failed: %s", component.name, exc)

    def listing(self) -> dict[str, Any]:
        """The platform's models, the components with their copies, and the idle
        setting (GET /models)."""
        document = super().listing()
        document["hosting"] = COMPONENTS
        document["scale_to_zero_after"] = self.scale_to_zero_after
        document["components"] = self.copies.describe()
        return document


def serve_components_forever(
    location: str,
    options: EndpointOptions,
    ready: threading.Event | None = None,
    *,
    min_copies: Mapping[str, int] | None = None,
    scale_to_zero_after: float | None = None,
    package_dir: Path | None = None,
    state_dir: Path | None = None,
) -> None:
    """`deploy serve --hosting components`: run until SIGINT/SIGTERM, then stop."""
    from deploy.local.modes.serve import (
        _sigterm_interrupts,
        prepare_record,
        record,
        serve_until_signal,
        store_for,
    )

    with _sigterm_interrupts():
        prepare_record(options, state_dir)
        with store_for(location, package_dir=package_dir) as store:

            def started(endpoint: ComponentEndpoint) -> None:
                for name, state in endpoint.copies.describe().items():
                    log.info(
                        "component %s: model %s, min_copies %d",
                        name,
                        state["model"],
                        state["min_copies"],
                    )
                log.info(
                    "endpoint %r of inference components at %s (tritonserver log: %s)",
                    endpoint.endpoint_name,
                    endpoint.url,
                    endpoint.supervisor.log_path,
                )
                if state_dir is not None:
                    record(endpoint, endpoint.store.location, state_dir)

            serve_until_signal(
                lambda: ComponentEndpoint(
                    store,
                    options=options,
                    min_copies=min_copies,
                    scale_to_zero_after=scale_to_zero_after,
                ),
                started,
                ready,
                state_dir=state_dir,
            )
