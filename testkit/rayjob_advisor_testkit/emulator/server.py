"""The emulator as tests use it: the strict API server in a background thread and event loop, with synchronous
accessors (objects, recorded requests, injected faults, violations) and a wait for conditions."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

import kmock

from rayjob_advisor_testkit.emulator.admission import Violation
from rayjob_advisor_testkit.emulator.faults import Fault, RecordedRequest, matches
from rayjob_advisor_testkit.emulator.routing import ApiServer
from rayjob_advisor_testkit.emulator.specs import KUBE_RESOURCES, ResourceSpec, Validator
from rayjob_advisor_testkit.emulator.store import Store

T = TypeVar("T")


class Emulator:
    """The strict API server in a background thread and loop, with synchronous accessors for tests.

    Use as a context manager; ``url`` is where clients (kopf) connect. Python-side writes go through
    the same admission, resourceVersion and watch machinery as HTTP requests, and raise ``ApiError``.
    """

    def __init__(
        self,
        resources: Iterable[ResourceSpec] = KUBE_RESOURCES,
        *,
        validators: Mapping[str, Validator | None] | None = None,
    ):
        """``validators`` replaces the validators of the named resources (by plural); None disables one."""
        specs = list(resources)
        index = {spec.plural: i for i, spec in enumerate(specs)}
        for plural, validate in (validators or {}).items():
            if plural not in index:
                raise KeyError(f"no served resource {plural!r} to validate")
            specs[index[plural]] = dataclasses.replace(specs[index[plural]], validate=validate)
        self.resources: tuple[ResourceSpec, ...] = tuple(specs)
        self._activity = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._api: ApiServer | None = None
        self._http: kmock.Server | None = None

    def __enter__(self) -> Emulator:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="k8s-emulator", daemon=True)
        self._thread.start()
        self._wait(self._open())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        assert self._loop is not None and self._thread is not None
        self._wait(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        if self._server.crashes and exc_type is None:
            raise RuntimeError(
                f"the emulator failed on {len(self._server.crashes)} request(s)"
            ) from self._server.crashes[0]

    async def _open(self) -> None:
        self._api = ApiServer(specs=self.resources, on_activity=self._notify)
        await self._api.__aenter__()
        self._http = kmock.Server(self._api)
        await self._http.__aenter__()

    async def _close(self) -> None:
        assert self._api is not None and self._http is not None
        self._api.store.close()
        await self._http.__aexit__(None, None, None)
        await self._api.__aexit__(None, None, None)

    def _notify(self) -> None:
        with self._activity:
            self._activity.notify_all()

    def _run(self, fn: Callable[[], T], timeout: float = 10) -> T:
        """Call ``fn`` in the emulator's loop, where all state lives."""

        async def call() -> T:
            return fn()

        return self._wait(call(), timeout)

    def _wait(self, work: Coroutine[Any, Any, T], timeout: float = 10) -> T:
        """Run ``work`` in the emulator's loop and wait for its result."""
        assert self._loop is not None, "the emulator is not started: use it as a context manager"
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    @property
    def url(self) -> str:
        assert self._http is not None
        return str(self._http.url).rstrip("/")

    @property
    def revision(self) -> int:
        """The global resourceVersion: that of the latest write."""
        return self._run(lambda: self._store.revision)

    @property
    def _server(self) -> ApiServer:
        assert self._api is not None, "the emulator is not started: use it as a context manager"
        return self._api

    @property
    def _store(self) -> Store:
        """Only for calls in the emulator's loop (``_run``)."""
        return self._server.store

    # ---- objects ----------------------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create any object (resource chosen by apiVersion/kind), as a client would; returns it as stored."""
        return self._run(lambda: self._store.create_object(obj))[0]

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
        )

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object (a copy); ApiError 404 if absent."""
        return self._run(lambda: self._store.read_object(self._store.spec_for(resource), namespace, name))

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """All stored objects of a resource (copies), by namespace and name."""
        listing = self._run(lambda: self._store.list_objects(self._store.spec_for(resource), namespace, {}))
        items: list[dict[str, Any]] = listing["items"]
        return items

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """A merge patch (dict) or JSON patch (list), as a client would send it."""
        content_type = "application/merge-patch+json" if isinstance(patch, dict) else "application/json-patch+json"
        return self._run(
            lambda: self._store.patch_object(
                self._store.spec_for(resource), namespace, name, patch, content_type, subresource
            )
        )[0]

    def patch_status(self, resource: str, namespace: str | None, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge ``status`` through the status subresource, as the owning controller would (MODIFIED event)."""
        return self.patch(resource, namespace, name, {"status": status}, subresource="status")

    def delete(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        return self._run(lambda: self._store.delete_object(self._store.spec_for(resource), namespace, name, None))

    # ---- requests, faults, violations -----------------------------------------------------------------

    def requests(
        self,
        method: str | None = None,
        resource: str | None = None,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> list[RecordedRequest]:
        """Recorded requests, oldest first; ``method`` is an HTTP method or a verb ("watch"); subresource "" = main."""
        return [r for r in self._server.traffic.records() if matches(r, method, resource, name, namespace, subresource)]

    def inject_fault(
        self,
        method: str,
        resource: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        status: int | None = 500,
        times: int = 1,
        message: str = "injected by the test",
        delay: float = 0.0,
    ) -> Fault:
        """Answer the next ``times`` matching requests with ``status`` (a Status body); then serve normally.

        ``delay``: answer them only after so many seconds (``status=None``: then serve them as usual),
        as a hung or overloaded API server does.
        """
        fault = Fault(method, resource, name, namespace, subresource, status, message, times, delay)
        self._server.traffic.add_fault(fault)
        return fault

    @property
    def violations(self) -> list[Violation]:
        """Schema violations seen so far: rejected objects and pruned unknown fields."""
        return self._run(lambda: list(self._store.violations))

    def wait_until(self, condition: Callable[[], T], timeout: float = 5.0) -> T:
        """Re-check ``condition`` after every request and write (and every 0.1 s) until it is truthy."""
        deadline = time.monotonic() + timeout
        while not (result := condition()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"condition not met within {timeout} s")
            with self._activity:
                self._activity.wait(min(0.1, remaining))
        return result
