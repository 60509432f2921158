"""The background loop the refitter and the sweep share: it outlives its steps' errors, wakes on demand, stops by
joining, and says when it is dead or stuck."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from rayjob_advisor.background import BackgroundLoop


class Steps(BackgroundLoop):
    """Runs ``work`` as its step and records when each step began."""

    def __init__(self, work: Callable[[int], None], interval: float, **kwargs: float) -> None:
        super().__init__("test", interval, **kwargs)
        self.work = work
        self.began: list[float] = []
        self.idle = False

    def step(self) -> None:
        self.began.append(time.monotonic())
        self.work(len(self.began))

    def waiting(self) -> str | None:
        return None if self.idle else "work is due"


def wait_for(condition: Callable[[], object], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_step_that_raises_does_not_end_the_loop():
    def work(n: int) -> None:
        if n <= 2:
            raise RuntimeError(f"step {n} failed")

    loop = Steps(work, interval=0.01)
    loop.start()
    try:
        wait_for(lambda: len(loop.began) >= 4)
        assert loop.problem() is None
    finally:
        loop.stop()


def test_wake_runs_the_next_step_before_the_interval_and_stop_joins_the_step_under_way():
    ended = threading.Event()

    def work(n: int) -> None:
        if n == 2:
            time.sleep(0.3)
            ended.set()

    loop = Steps(work, interval=3600)
    loop.start()
    wait_for(lambda: len(loop.began) == 1)  # the first step comes at once
    loop.wake()
    wait_for(lambda: len(loop.began) == 2)  # not an hour later
    loop.stop()
    assert ended.is_set() and not loop._thread.is_alive()
    assert len(loop.began) == 2 and loop.problem() is None


def test_a_step_that_hangs_is_reported_stuck_after_the_limit_unless_no_work_waits():
    release = threading.Event()
    loop = Steps(lambda n: release.wait(30), interval=0.01, stuck_after=0.3)
    loop.start()
    try:
        wait_for(lambda: loop.began)
        assert loop.problem() is None  # hanging, but not for long yet
        wait_for(lambda: loop.problem() is not None)
        assert time.monotonic() - loop.began[0] >= 0.3
        problem = loop.problem() or ""
        assert problem.startswith("the test thread made no progress for ") and problem.endswith(" s while work is due")
        loop.idle = True
        assert loop.problem() is None  # silent with nothing to do: idle, not stuck
        loop.beat()
        loop.idle = False
        assert loop.problem() is None  # progress within the step resets the clock
    finally:
        release.set()
        loop.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_loop_ended_by_what_no_step_should_raise_is_reported_dead():
    def work(n: int) -> None:
        raise SystemExit  # not an Exception: ends the thread, as nothing should

    loop = Steps(work, interval=0.01)
    loop.start()
    loop._thread.join(10)
    assert loop.problem() == "the test thread is not running"
    loop.stop()
    assert loop.problem() is None  # stopped on purpose


class Units(BackgroundLoop):
    """A loop over units of work, as the sweep's: ``fails(unit)`` says which raise, each isolated."""

    def __init__(self, units: list[str], fails: Callable[[str], bool], stuck_after: float) -> None:
        super().__init__("units", 0.01, stuck_after=stuck_after)
        self.units, self.fails = units, fails
        self.done: list[str] = []

    def step(self) -> None:
        for unit in self.units:
            try:
                if self.fails(unit):
                    raise RuntimeError(f"{unit} is poisoned")
                self.done.append(unit)
            except RuntimeError:
                self.failed(unit)
            else:
                self.succeeded()


def test_one_failing_unit_is_counted_and_the_others_go_on_but_a_loop_that_only_fails_is_reported():
    some = Units(["bad", "good"], lambda unit: unit == "bad", stuck_after=0.2)
    only = Units(["bad", "worse"], lambda unit: True, stuck_after=0.2)
    for loop in (some, only):
        loop.start()
    try:
        wait_for(lambda: some.failures >= 3 and only.failures >= 3)
        assert "good" in some.done
        wait_for(lambda: only.problem() is not None)
        problem = only.problem() or ""  # read once: the loop goes on failing, "last" alternates between its units
        assert re.fullmatch(r"the units thread has only failed for \d+ s \(last: (bad|worse)\)", problem), problem
        time.sleep(0.3)
        assert some.problem() is None  # failing on one unit, succeeding on another: working
    finally:
        for loop in (some, only):
            loop.stop()


class Refused(Units):
    """Every unit refused by the API server (RBAC, say): a failure that is no bug of the loop's."""

    def step(self) -> None:
        for unit in self.units:
            self.failed(unit, brief="HTTP 403 Forbidden")


def test_a_loop_the_api_server_refuses_logs_one_line_a_failure_and_is_no_problem(caplog):
    """A restart would not mend a refusal (the certificate keeper's missing RBAC rule): /healthz stays green."""
    loop = Refused(["secret"], lambda unit: True, stuck_after=0.2)
    loop.start()
    try:
        wait_for(lambda: loop.failures >= 3)
        time.sleep(0.3)
        assert loop.problem() is None
    finally:
        loop.stop()
    refused = [r for r in caplog.records if "could not handle secret: HTTP 403 Forbidden" in r.getMessage()]
    assert refused and not any(r.exc_info for r in refused)
