"""The refitter: stale profiles fitted in one background loop, so that no request ever waits for a fit."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rayjob_advisor.background import BackgroundLoop
from rayjob_advisor.profiles.profile import Profile
from rayjob_advisor.profiles.store import ProfileStore

REFIT_DUTY = 0.1  # a profile's refits take at most this share of the time while its runs keep changing


class Refitter(BackgroundLoop):
    """Fits stale profiles in one background loop, so no request ever waits for a fit.

    ``on_fitted`` publishes each new fit (e.g. to the RuntimeProfile's status).
    Refits are debounced: a profile is fitted at most once per ``interval``
    seconds, and at most once per ``1 / duty`` times its last fit's
    duration (fitting takes at most about a tenth of the refitter's time
    while runs keep coming), so a burst of learned runs costs one fit per
    such gap, on all of the runs appended meanwhile (``fits`` counts them).
    No exception of a fit or a publication ends the loop; ``problem`` says
    when it is dead anyway, or stuck (``stuck_after`` seconds without a
    progress while profiles wait for a fit).
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

    def waiting(self) -> str | None:
        stale = self.store.stale()
        return f"{len(stale)} profiles are stale" if stale else None

    def step(self) -> float:
        """Fit the stale profiles whose debounce gap has passed; returns how soon the next one's ends."""
        wait = self.interval
        for profile in self.store.stale():
            if not self.store.fit_due(profile):  # only accelerators jobs wait for: no debouncing
                profile.fit_accelerators()
                self.beat()
                continue
            last = profile.last_fit
            since = time.monotonic() - (last.began if last is not None else -math.inf)
            gap = max(self.interval, (last.seconds if last is not None else 0.0) / self.duty)
            if since < gap:  # fitted a moment ago: coalesce with the changes still to come
                wait = min(wait, gap - since)
                continue
            self._refit(profile)
        return wait

    def _refit(self, profile: Profile) -> None:
        self.store.refit(profile)
        self.fits += 1
        self.beat()
        try:
            self.on_fitted(profile)
        except Exception:  # noqa: BLE001 - a failed publication stops no fit
            self.failed(f"the publication of profile {profile.label}'s fit")
        else:
            self.succeeded()
