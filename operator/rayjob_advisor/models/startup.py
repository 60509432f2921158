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

It keys on Ray Train workers, the count both the profile's runs and a job
give. A profile that never measured a
start-up (the Pollux profiles measured steps only) has 0 at every count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rayjob_advisor.observations import Observation


@dataclasses.dataclass(frozen=True)
class StartupCurve:
    """Median start-up per measured worker count (ascending) and the seconds it grows by per unit of log workers
    beyond the largest."""

    workers: tuple[float, ...]
    medians: tuple[float, ...]
    slope: float

    @classmethod
    def from_runs(cls, observations: Sequence[Observation]) -> StartupCurve:
        measured = [(o.workers, o.startup_seconds) for o in observations if o.startup_seconds is not None]
        counts = sorted({workers for workers, _ in measured})
        medians = [float(np.median([s for workers, s in measured if workers == count])) for count in counts]
        slope = 0.0
        if len(counts) > 1:
            logs = np.log(counts)
            last = (medians[-1] - medians[-2]) / float(logs[-1] - logs[-2])
            slope = max(0.0, float(np.polyfit(logs, medians, 1)[0]), last)
        return cls(tuple(float(count) for count in counts), tuple(medians), slope)

    def seconds(self, workers: Sequence[int]) -> np.ndarray:
        """The expected start-up of runs of ``workers`` Ray Train workers (module docstring)."""
        asked = np.asarray(workers, dtype=float)
        if not self.workers:
            return np.zeros(len(asked))
        largest = self.workers[-1]
        beyond = self.medians[-1] + self.slope * np.log(np.maximum(asked, largest) / largest)
        return np.asarray(np.where(asked > largest, beyond, np.interp(asked, self.workers, self.medians)), dtype=float)
