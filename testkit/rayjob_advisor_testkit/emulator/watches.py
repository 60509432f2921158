"""Watch streams as the API server serves them: from a resourceVersion on, or the current state first as synthetic
ADDED events (with sendInitialEvents' bookmark), until the timeout, the client leaves or the emulator closes."""

from __future__ import annotations

import bisect
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp.web

from rayjob_advisor_testkit.emulator.errors import ApiError
from rayjob_advisor_testkit.emulator.selectors import query_selector
from rayjob_advisor_testkit.emulator.specs import ResourceSpec
from rayjob_advisor_testkit.emulator.store import Store


def watch(
    store: Store,
    spec: ResourceSpec,
    namespace: str | None,
    name: str | None,
    query: Mapping[str, str],
    raw_request: aiohttp.web.BaseRequest,
) -> AsyncIterator[Any]:
    """Validate the watch parameters now (to answer 4xx), then stream from the requested revision."""
    select = query_selector(query)
    since = query.get("resourceVersion") or "0"
    if not since.isdigit():
        raise ApiError(400, f"resourceVersion: Invalid value: {since!r}: must be an integer")
    initial = query.get("sendInitialEvents") == "true"
    if initial and query.get("resourceVersionMatch") != "NotOlderThan":
        raise ApiError(422, "sendInitialEvents requires resourceVersionMatch=NotOlderThan")
    timeout = float(query.get("timeoutSeconds") or "inf")

    def wanted(obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        return namespace in (None, meta.get("namespace")) and name in (None, meta["name"]) and select(obj)

    async def stream() -> AsyncIterator[Any]:
        yield b""  # sends the headers at once, as the apiserver does
        deadline = time.monotonic() + timeout
        if since == "0" or initial:
            # "Any"/unset resourceVersion: the current state as synthetic ADDED events, then changes.
            position = len(store.history)
            for obj in store.stored(spec):
                if wanted(obj):
                    yield {"type": "ADDED", "object": obj}
            if initial:
                bookmark = {
                    "apiVersion": spec.api_version,
                    "kind": spec.kind,
                    "metadata": {
                        "resourceVersion": str(store.revision),
                        "annotations": {"k8s.io/initial-events-end": "true"},
                    },
                }
                yield {"type": "BOOKMARK", "object": bookmark}
        else:
            position = bisect.bisect_right(store.history, int(since), key=lambda event: event.revision)
        while True:
            while position < len(store.history):
                event = store.history[position]
                position += 1
                if event.resource == spec.plural and wanted(event.object):
                    yield {"type": event.type, "object": event.object}
            transport = raw_request.transport
            if store.closing or time.monotonic() >= deadline or transport is None or transport.is_closing():
                return
            # Wakes up now and then to notice gone clients.
            await store.next_write(min(1.0, max(0.0, deadline - time.monotonic())))

    return stream()
