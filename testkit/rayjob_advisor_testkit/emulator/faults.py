"""What reached the emulator and what it was told to get wrong: the recorded requests, and injected faults (errors,
delays) that answer the next matching ones instead of the store."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from rayjob_advisor_testkit.emulator.errors import ApiError


@dataclasses.dataclass
class RecordedRequest:
    """One request as it reached the emulator; ``status`` is filled once the answer is known."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    verb: str | None = None  # list, watch, get, create, patch, update, delete; None for discovery
    resource: str | None = None  # plural
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    status: int | None = None


@dataclasses.dataclass
class Fault:
    """The next ``remaining`` requests matching the pattern answer ``status`` instead of being served.

    With ``delay``: they are served (or answer ``status``, if set) only after ``delay`` seconds, a hung server.
    """

    method: str
    resource: str
    name: str | None
    namespace: str | None
    subresource: str | None
    status: int | None
    message: str
    remaining: int
    delay: float = 0.0


def matches(
    record: RecordedRequest,
    method: str | None,
    resource: str | None,
    name: str | None,
    namespace: str | None,
    subresource: str | None,
) -> bool:
    """Request patterns for faults and queries: None matches anything, subresource "" the main resource."""
    return (
        (method is None or method.upper() in (record.method, (record.verb or "").upper()))
        and (resource is None or resource == record.resource)
        and (name is None or name == record.name)
        and (namespace is None or namespace == record.namespace)
        and (subresource is None or subresource == (record.subresource or ""))
    )


class Traffic:
    """The recorded requests and the pending faults: the emulator's loop writes them while tests read and add, so
    under a lock."""

    def __init__(self) -> None:
        self._records: list[RecordedRequest] = []
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._records.append(request)

    def records(self) -> list[RecordedRequest]:
        """Every request so far, oldest first."""
        with self._lock:
            return list(self._records)

    def add_fault(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    async def act_out_fault(self, record: RecordedRequest) -> None:
        """The first pending fault matching ``record``, if any: wait its delay, then raise its error (if it has one)."""
        fault = self._take_fault(record)
        if fault is not None and fault.delay:
            await asyncio.sleep(fault.delay)
        if fault is not None and fault.status is not None:
            raise ApiError(fault.status, fault.message, details={"name": record.name, "kind": record.resource})

    def _take_fault(self, record: RecordedRequest) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and matches(
                    record, fault.method, fault.resource, fault.name, fault.namespace, fault.subresource
                ):
                    fault.remaining -= 1
                    return fault
        return None
