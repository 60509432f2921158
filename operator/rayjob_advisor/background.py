"""The operator's background loops (the refitter, the sweep of running jobs): one daemon thread each.

What they share lives here: the thread's lifecycle, the wait between steps,
surviving a step's exception, the count of failed units of work (one
object's failure is that object's, never the loop's: the others go on), and
the heartbeat that the liveness probe reads to tell a dead, stuck or only
failing loop from a working one. What a step does stays with its owner.
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
    comes as usual. A step that works on many objects isolates each one:
    ``failed`` counts (``failures``) and logs an object's failure, ``succeeded``
    an object done. ``problem`` says when the thread is dead anyway, stuck
    (``stuck_after`` seconds without a ``beat`` while ``waiting`` says that work
    waits for it), or only failing (nothing succeeded for ``stuck_after``
    seconds since a failure).
    """

    def __init__(self, name: str, interval: float, stuck_after: float | None = None) -> None:
        self.name = name
        self.interval = interval
        self.stuck_after = stuck_after if stuck_after is not None else max(STUCK_INTERVALS * interval, STUCK_SECONDS)
        self.heartbeat = time.monotonic()  # the last sign of progress: a step began, or a step's unit of work ended
        self.failures = 0  # units of work (or whole steps) that raised, since start: a counter for the metrics
        self._failing_since: float | None = None  # the first failure since the last success; None: not failing
        self._last_failure = ""
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

    def failed(self, what: str, brief: str | None = None) -> None:
        """Record (and log, with its traceback) the failure of one unit of work, from its ``except`` block.

        A failure that is no bug of ours, said in ``brief`` (an API server that refuses: RBAC, a conflict), is one
        log line, and never the loop's ``problem``: a restart would not mend it.
        """
        self.failures += 1
        self._last_failure = what
        if brief is not None:
            logger.warning("the %s loop could not handle %s: %s; it tries again", self.name, what, brief)
        else:
            logger.exception("the %s loop could not handle %s; it goes on with the others", self.name, what)
            if self._failing_since is None:
                self._failing_since = time.monotonic()
        self.beat()  # a failure is not a hang: the loop moves on

    def succeeded(self) -> None:
        """Record a unit of work done: the loop is not only failing."""
        self._failing_since = None
        self.beat()

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
        now = time.monotonic()
        if self._failing_since is not None and now - self._failing_since > self.stuck_after:
            since = now - self._failing_since
            return f"the {self.name} thread has only failed for {since:.0f} s (last: {self._last_failure})"
        silent = now - self.heartbeat
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
            failures = self.failures
            try:
                wait = self.step()
            except Exception:  # noqa: BLE001 - a bug of ours or a failed call must delay the work, never end it
                self.failed("a step")
            else:
                if self.failures == failures:  # a step with no failure (whether it had work or not)
                    self.succeeded()
            self._wake.wait(self.interval if wait is None else wait)
