"""Start-up seconds per Ray Train worker count, from the profile's runs that measured one.

Start-up (the driver's ``fit()`` until rank 0's first batch: scheduling,
process groups, data loading) grows with the workers: 13 s for 1 and 27 s
for 4 in the shipped ``digits-cnn`` profile. One median for every size made
the planner think a bigger size starts as fast as a small one. So each
measured worker count keeps the median of its runs, and a count between two
measured ones is interpolated linearly between their medians. Outside the
profile the curve errs long, as a deadline is missed by a start-up taken too
short, not too long:

- below the smallest measured count, it holds that count's median (a
  start-up that grows with the workers is at most that there);
- above the largest, it grows with the logarithm of the workers, from the
  largest count's median, at the steeper of the least-squares slope of the
  medians over log counts and the last measured step's (never downward): a
  size bigger than any profiled must not look as quick to start as the
  biggest that was, nor as slow as a straight line would make it far out.
  MLPerf Training's in-job initialisation is about flat up to 64 GPUs and
  2.6x at 512 (the project's decision on start-up beyond the profile:
  grow it with log(workers), erring long).

Beside the median, each count keeps an upper quantile of its runs
(``UPPER_QUANTILE``: the conformal rank, the slowest run where there are
fewer than 9), on the same curve: what a deadline on the start-up alone
(KubeRay's ``preRunningDeadlineSeconds``) must leave room for.

It keys on Ray Train workers, the count both the profile's runs and a job
give. A profile that never measured a
start-up (the Pollux profiles measured steps only) has 0 at every count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from rayjob_advisor.observations import Observation

UPPER_QUANTILE = 0.9
"""The start-up quantile ``upper`` gives: the advisor's reported confidence (``evaluation.REPORTED_CONFIDENCE``)."""


def _upper(seconds: Sequence[float]) -> float:
    """The split-conformal ``UPPER_QUANTILE`` of some runs' start-ups: the ceil((n + 1) q)-th smallest, the largest
    when there are too few."""
    ordered = sorted(seconds)
    return float(ordered[min(len(ordered), math.ceil((len(ordered) + 1) * UPPER_QUANTILE)) - 1])


@dataclasses.dataclass(frozen=True)
class StartupCurve:
    """Median and upper start-up per measured worker count (ascending), and the seconds they grow by per unit of
    log workers beyond the largest."""

    workers: tuple[float, ...]
    medians: tuple[float, ...]
    slope: float
    uppers: tuple[float, ...]

    @classmethod
    def from_runs(cls, observations: Sequence[Observation]) -> StartupCurve:
        measured = [(o.workers, o.startup_seconds) for o in observations if o.startup_seconds is not None]
        counts = sorted({workers for workers, _ in measured})
        per_count = [[s for workers, s in measured if workers == count] for count in counts]
        medians = [float(np.median(seconds)) for seconds in per_count]
        slope = 0.0
        if len(counts) > 1:
            logs = np.log(counts)
            last = (medians[-1] - medians[-2]) / float(logs[-1] - logs[-2])
            slope = max(0.0, float(np.polyfit(logs, medians, 1)[0]), last)
        uppers = tuple(_upper(seconds) for seconds in per_count)
        return cls(tuple(float(count) for count in counts), tuple(medians), slope, uppers)

    def seconds(self, workers: Sequence[int]) -> np.ndarray:
        """The expected start-up of runs of ``workers`` Ray Train workers (module docstring)."""
        return self._curve(self.medians, workers)

    def upper(self, workers: Sequence[int]) -> np.ndarray:
        """The start-up that runs of ``workers`` Ray Train workers stay under ``UPPER_QUANTILE`` of the time."""
        return self._curve(self.uppers, workers)

    def _curve(self, values: Sequence[float], workers: Sequence[int]) -> np.ndarray:
        asked = np.asarray(workers, dtype=float)
        if not self.workers:
            return np.zeros(len(asked))
        largest = self.workers[-1]
        beyond = values[-1] + self.slope * np.log(np.maximum(asked, largest) / largest)
        return np.asarray(np.where(asked > largest, beyond, np.interp(asked, self.workers, values)), dtype=float)
