"""The operator's background loops (the refitter, the sweep of running jobs): one daemon thread each.

What they share lives here: the thread's lifecycle, the wait between steps,
surviving a step's exception, and the heartbeat that the liveness probe
reads to tell a dead or stuck loop from a working one. What a step does
stays with its owner.
"""

from __future__ import annotations

import abc
import logging
import threading
import time

logger = logging.getLogger(__name__)

STUCK_INTERVALS = 30
STUCK_SECONDS = 600.0  # a large profile's fit may take minutes: a stuck loop is one silent longer than this


class BackgroundLoop(abc.ABC):
    """Runs ``step`` in one daemon thread: at ``start``, then ``interval`` seconds after each step (sooner when the
    step asks, or on ``wake``) until ``stop``.

    No exception of a step ends the thread: it is logged and the next step
    comes as usual. ``problem`` says when the thread is dead anyway, or
    stuck: ``stuck_after`` seconds without a ``beat`` while ``waiting`` says
    that work waits for it.
    """

    def __init__(self, name: str, interval: float, stuck_after: float | None = None) -> None:
        self.name = name
        self.interval = interval
        self.stuck_after = stuck_after if stuck_after is not None else max(STUCK_INTERVALS * interval, STUCK_SECONDS)
        self.heartbeat = time.monotonic()  # the last sign of progress: a step began, or a step's unit of work ended
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @abc.abstractmethod
    def step(self) -> float | None:
        """One round of work; returns how soon the next one is due (None: after ``interval``)."""

    def waiting(self) -> str | None:
        """The work that waits for this loop, in words; None: none, so a silent loop is idle, not stuck."""
        return "its next step is due"

    def beat(self) -> None:
        """Record progress: a step that does many slow units of work calls this after each one."""
        self.heartbeat = time.monotonic()

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def wake(self) -> None:
        """Run the next step now rather than after the interval."""
        self._wake.set()

    def stop(self) -> None:
        """End the loop after the current step, and wait for it."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def problem(self) -> str | None:
        """Why this loop cannot be relied on (dead, or stuck while work waits); None when healthy or stopping."""
        if self._stopping.is_set():
            return None  # shutting down on purpose
        if not self._thread.is_alive():
            return f"the {self.name} thread is not running"
        silent = time.monotonic() - self.heartbeat
        if silent > self.stuck_after:
            waiting = self.waiting()
            if waiting is not None:
                return f"the {self.name} thread made no progress for {silent:.0f} s while {waiting}"
        return None

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.beat()
            self._wake.clear()
            wait = None
            try:
                wait = self.step()
            except Exception:  # a bug of ours or a failed call must delay the work, never end it
                logger.exception("the %s loop failed; it goes on", self.name)
            self._wake.wait(self.interval if wait is None else wait)
