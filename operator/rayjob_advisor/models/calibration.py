"""Upper bounds and probabilities, by split-conformal calibration on relative residuals.

The residuals are ``actual / predicted - 1`` of runs predicted by a model
that did not see them, over every split of ``splits`` applied to the
training data: shuffled K-fold, and the interpolation and extrapolation
folds over worker counts and dataset sizes. Residuals of unseen
configurations widen the bound where the advisor is asked most often — a
worker count or dataset size that was never profiled — instead of assuming
every question looks like a random training run.

One pool does not serve every configuration: a profile fits its 1-node runs
better than its 2-node ones. So the residuals are kept per configuration
band (the node count of the held-out run), and a run is bounded by its
band's residuals (its nearest measured band's; all bands' as well when its
own has fewer than ``MIN_BAND``: a small band is not trusted to be narrow;
all bands' only when it has fewer than ``MIN_SMALL_BAND``).
Nor does one pool serve every kind of question: a random run (K-fold) is
easier than an unseen worker count or dataset size. So each split keeps its
own banded pool, and a bound must hold by each of them: the upper bound is the largest of their conformal quantiles, the
probability of finishing in time the smallest of their estimates (the same
ranks either way). Runs whose configuration the profile measured are
anchored (``anchoring``) and bounded by the residuals of anchored held-out
runs instead, per split and band too.

Beyond the most workers the profile ran, a run is ``d = log(workers / most
profiled)`` away from the data. The held-out runs of the worker
extrapolation folds measure how the residuals spread with that distance:
``growth(p) = (Q_extrapolated(p) - Q_inside(p)) / mean d`` per quantile
``p`` (only ever widening: upwards above the median, downwards below), and
a run at distance ``d`` gets its band's residuals plus ``d * growth`` at the
same ranks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

import numpy as np

from rayjob_advisor.models import design

MIN_BAND = 20
"""Held-out runs a band needs to be bounded by its own residuals (a conformal 0.95 quantile needs 19)."""
MIN_SMALL_BAND = 9
"""Held-out runs a smaller band needs to widen the all-band bound (a conformal 0.9 quantile needs 9)."""
_ROUNDING = 1e-9
"""Relative slack when a runtime is compared with a bound computed from the same residual."""


def relative_margin(residuals: np.ndarray, confidence: float) -> float:
    """The conformal quantile: the ceil((n+1)q)-th smallest residual (the largest when n is small)."""
    rank = min(len(residuals), math.ceil((len(residuals) + 1) * confidence))
    return max(0.0, float(residuals[rank - 1]))


def upper_bound(predicted: np.ndarray, residuals: np.ndarray, confidence: float) -> np.ndarray:
    """Runtimes that runs like the calibration runs stay under with probability ``confidence``."""
    return predicted * (1.0 + relative_margin(residuals, confidence))


def probability_within(predicted: np.ndarray, residuals: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """The conformal estimate of P(runtime <= seconds): the share of the n residuals (out of n + 1) it allows.

    The same ranks as ``relative_margin``: at ``upper_bound(..., q)`` it is at least ``q`` when the
    n residuals are enough for ``q`` (at least ``q / (1 - q)``), else n / (n + 1).
    """
    allowed = np.searchsorted(residuals, seconds / predicted - 1.0 + _ROUNDING, side="right")
    return np.asarray(allowed / (len(residuals) + 1), dtype=float)


def _quantiles(residuals: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """The conformal quantiles of sorted ``residuals`` at each probability."""
    ranks = np.minimum(len(residuals), np.ceil((len(residuals) + 1) * probabilities).astype(int))
    return np.asarray(residuals[np.maximum(ranks, 1) - 1], dtype=float)


@dataclasses.dataclass(frozen=True)
class Banded:
    """Sorted residuals per band (node count), and of every band together."""

    bands: dict[float, np.ndarray]
    pooled: np.ndarray

    @classmethod
    def of(cls, residuals: np.ndarray, nodes: np.ndarray) -> Banded:
        bands = {float(n): np.sort(residuals[nodes == n]) for n in np.unique(nodes)}
        return cls(bands, np.sort(residuals))

    def residuals(self, nodes: float) -> tuple[np.ndarray, ...]:
        """The pools that bound a run on ``nodes`` nodes: its band's, and all bands' too when its own is small."""
        if not self.bands:
            return (self.pooled,)
        nearest = float(design.nearest_measured(np.array([nodes]), np.array(sorted(self.bands)))[0])
        own = self.bands[nearest]
        if len(own) >= MIN_BAND:
            return (own,)
        return (own, self.pooled) if len(own) >= MIN_SMALL_BAND else (self.pooled,)


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """Out-of-sample predictions of runs, for calibration: what a bound learns from."""

    actual: np.ndarray
    predicted: np.ndarray  # anchored where ``anchored``
    unanchored: np.ndarray  # the same runs predicted without their measured configuration
    anchored: np.ndarray
    nodes: np.ndarray
    distance: np.ndarray  # log(workers / most workers trained on), 0 inside the trained range
    collapsed: np.ndarray  # the raw prediction was not finite or far below the physical floor

    @classmethod
    def concatenate(cls, parts: list[HeldOut]) -> HeldOut:
        fields = [f.name for f in dataclasses.fields(cls)]
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))


def _pools_of_splits(
    held: Mapping[str, HeldOut], chosen: Callable[[HeldOut], np.ndarray], residual: Callable[[HeldOut], np.ndarray]
) -> tuple[Banded, ...]:
    """Banded residuals of the ``chosen`` runs, one per split that has at least ``MIN_BAND`` of them."""
    pools = []
    for part in held.values():
        mask = chosen(part)
        if np.sum(mask) >= MIN_BAND:
            pools.append(Banded.of(residual(part)[mask], part.nodes[mask]))
    return tuple(pools)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The residual pools of one fitted model (module docstring)."""

    free: tuple[Banded, ...]
    anchored: tuple[Banded, ...]  # empty: too few anchored held-out runs; anchored runs use ``free``
    inside: np.ndarray  # sorted residuals of every run inside the trained worker range
    extrapolated: np.ndarray  # sorted residuals of the runs beyond it
    mean_distance: float

    @classmethod
    def from_held_out(cls, held: Mapping[str, HeldOut]) -> Calibration:
        """From the held-out runs of each split (module docstring)."""
        every = HeldOut.concatenate(list(held.values()))
        inside, beyond = every.distance <= 0, every.distance > 0
        free_residuals = every.actual[inside] / every.unanchored[inside] - 1.0
        free = _pools_of_splits(held, lambda h: h.distance <= 0, lambda h: h.actual / h.unanchored - 1.0)
        return cls(
            free=free
            or (Banded.of(free_residuals, every.nodes[inside]) if np.any(inside) else Banded({}, np.zeros(1)),),
            anchored=_pools_of_splits(
                held, lambda h: h.anchored & (h.distance <= 0), lambda h: h.actual / h.predicted - 1.0
            ),
            inside=np.sort(free_residuals) if np.any(inside) else np.zeros(1),
            extrapolated=np.sort(every.actual[beyond] / every.unanchored[beyond] - 1.0),
            mean_distance=float(np.mean(every.distance[beyond])) if np.any(beyond) else 0.0,
        )

    def residuals(self, nodes: float, distance: float, anchored: bool) -> tuple[np.ndarray, ...]:
        """The sorted residual pools that bound one run, one per kind of question (module docstring)."""
        if anchored and self.anchored:
            return tuple(own for pool in self.anchored for own in pool.residuals(nodes))
        return tuple(self._widened(own, distance) for pool in self.free for own in pool.residuals(nodes))

    def _widened(self, own: np.ndarray, distance: float) -> np.ndarray:
        if distance <= 0 or not len(self.extrapolated):
            return own
        probabilities = np.arange(1, len(own) + 1) / (len(own) + 1)
        growth = (_quantiles(self.extrapolated, probabilities) - _quantiles(self.inside, probabilities)) / (
            self.mean_distance
        )
        growth = np.where(probabilities >= 0.5, np.maximum(growth, 0.0), np.minimum(growth, 0.0))
        return np.sort(own + distance * growth)

    def pools(self, nodes: np.ndarray, distance: np.ndarray, anchored: np.ndarray) -> list[tuple[np.ndarray, ...]]:
        """``residuals`` of each run (computed once per distinct band, distance and anchoring)."""
        cache: dict[tuple[float, float, bool], tuple[np.ndarray, ...]] = {}
        keys = list(zip(nodes.tolist(), distance.tolist(), anchored.tolist(), strict=True))
        for key in keys:
            if key not in cache:
                cache[key] = self.residuals(*key)
        return [cache[key] for key in keys]


def upper_bounds(predicted: np.ndarray, pools: list[tuple[np.ndarray, ...]], confidence: float) -> np.ndarray:
    """Per run, the runtime it stays under with probability ``confidence`` by each of its pools."""
    return np.array(
        [max(upper_bound(predicted[i : i + 1], pool, confidence)[0] for pool in run) for i, run in enumerate(pools)],
        dtype=float,
    )


def probabilities_within(predicted: np.ndarray, pools: list[tuple[np.ndarray, ...]], seconds: np.ndarray) -> np.ndarray:
    """Per run, the estimated probability that it runs for at most ``seconds``: the least by any of its pools."""
    return np.array(
        [
            min(probability_within(predicted[i : i + 1], pool, seconds[i : i + 1])[0] for pool in run)
            for i, run in enumerate(pools)
        ],
        dtype=float,
    )
