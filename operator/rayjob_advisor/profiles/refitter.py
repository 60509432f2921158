"""The refitter: stale profiles fitted in one background loop, so that no request ever waits for a fit."""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import time
from collections.abc import Callable

from rayjob_advisor.background import BackgroundLoop
from rayjob_advisor.profiles.profile import Profile
from rayjob_advisor.profiles.store import ProfileStore

REFIT_DUTY = 0.1  # a profile's refits take at most this share of the time while its runs keep changing
LARGE_FIT_RUNS = 512
"""A profile with more runs is fitted on a thread of its own, one such fit at a time: its fit takes a second or
more (up to ``profile.MAX_FIT_RUNS`` runs), and a small profile's first fit must not wait behind it."""


class Refitter(BackgroundLoop):
    """Fits stale profiles in one background loop, so no request ever waits for a fit.

    ``on_fitted`` publishes each new fit (e.g. to the RuntimeProfile's status).
    Refits are debounced: a profile is fitted at most once per ``interval``
    seconds, and at most once per ``1 / duty`` times its last fit's
    duration (fitting takes at most about a tenth of the refitter's time
    while runs keep coming), so a burst of learned runs costs one fit per
    such gap, on all of the runs appended meanwhile (``fits`` counts them).
    Fits are fair across namespaces (``_next``), and a large profile's fit
    runs beside the others (``LARGE_FIT_RUNS``). No exception of a fit or a
    publication ends the loop; ``problem`` says when it is dead anyway, or
    stuck (``stuck_after`` seconds without a progress while profiles wait
    for a fit).
    """

    def __init__(
        self,
        store: ProfileStore,
        on_fitted: Callable[[Profile], None],
        interval: float,
        stuck_after: float | None = None,
        duty: float = REFIT_DUTY,
    ) -> None:
        super().__init__("refit", interval, stuck_after)
        self.store = store
        self.on_fitted = on_fitted
        self.duty = duty
        self.fits = 0
        self._served: dict[str | None, int] = {}  # namespace (None: shipped) -> the turn it was last served at
        self._turns = itertools.count()
        self._large_lane = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="refit-large")
        self._large: tuple[Profile, concurrent.futures.Future[None]] | None = None  # the large fit under way

    def waiting(self) -> str | None:
        stale = self.store.stale()
        return f"{len(stale)} profiles are stale" if stale else None

    def stop(self) -> None:
        super().stop()
        self._large_lane.shutdown(wait=False, cancel_futures=True)

    def step(self) -> float:
        """Fit the stale profiles whose debounce gap has passed, one at a time, each time the one ``_next`` serves
        (a large one on its own thread, which wakes the loop when done); returns how soon the next gap ends."""
        self._end_large_fit()
        wait, done = self.interval, set[int]()
        in_flight = {id(self._large[0])} if self._large is not None else set()
        while (profile := self._next([p for p in self.store.stale() if id(p) not in done | in_flight])) is not None:
            done.add(id(profile))
            if not self.store.fit_due(profile):  # only accelerators jobs wait for: no debouncing
                self._served[profile.namespace] = next(self._turns)
                profile.fit_accelerators()
                self.beat()
                continue
            last = profile.last_fit
            since = time.monotonic() - (last.began if last is not None else -math.inf)
            gap = max(self.interval, (last.seconds if last is not None else 0.0) / self.duty)
            if since < gap:  # fitted a moment ago: coalesce with the changes still to come
                wait = min(wait, gap - since)
                continue
            large = len(profile.observations) > LARGE_FIT_RUNS
            if large and self._large is not None:
                continue  # after the large fit under way
            self._served[profile.namespace] = next(self._turns)
            if large:
                self._large = (profile, self._large_lane.submit(self.store.refit, profile))
                self._large[1].add_done_callback(lambda _: self.wake())
            else:
                self.store.refit(profile)
                self._fitted(profile)
        return wait

    def _end_large_fit(self) -> None:
        """Publish the large fit if it ended (a fit never raises: an exception is a bug, counted)."""
        if self._large is None or not self._large[1].done():
            return
        profile, fit = self._large
        self._large = None
        try:
            fit.result()
        except Exception:  # noqa: BLE001 - as in the loop: counted and logged, the others go on
            self.failed(f"the fit of profile {profile.label}")
        else:
            self._fitted(profile)

    def _next(self, stale: list[Profile]) -> Profile | None:
        """The stale profile to serve next: fair across namespaces, as no fit can be interrupted.

        A profile never fitted first (a new profile's first jobs wait for it), then the namespace served the
        longest ago first (round-robin: one namespace's many profiles delay another's by one fit, not by all of
        theirs). Chosen again after every fit, so a profile that became stale meanwhile is weighed at once.
        """
        return min(
            stale,
            key=lambda profile: (profile.last_fit is not None, self._served.get(profile.namespace, -1)),
            default=None,
        )

    def _fitted(self, profile: Profile) -> None:
        """Count and publish a fit that ended."""
        self.fits += 1
        self.beat()
        try:
            self.on_fitted(profile)
        except Exception:  # noqa: BLE001 - a failed publication stops no fit
            self.failed(f"the publication of profile {profile.label}'s fit")
        else:
            self.succeeded()
