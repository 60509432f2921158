"""A big profile's fit, sub-sampled to ``MAX_FIT_RUNS`` runs against all of them, in one run.

A 16,000-run RuntimeProfile (hardly two runs of one configuration, ``large_profile_runs``) is fitted as the
operator fits it now (``Profile.fit``: a sample of ``MAX_FIT_RUNS`` runs by configuration, the newest first)
and, as the baseline measured in the same run, on every run (the model the operator fitted before the cap).
Both models then predict held-out runs of the same law, so the price of the sample is shown beside its speed.
The refitter fits one profile at a time, so the capped fit's time is the longest another namespace's new
profile waits for its first fit.

    .venv/bin/python -m benchmarks.fitting [--runs 16000]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import Observation
from rayjob_advisor.profiles.profile import MAX_FIT_RUNS, Profile
from rayjob_advisor_testkit.profiles import WORKLOAD, large_profile_runs


def median_error(model: RuntimeModel, runs: list[Observation]) -> float:
    """The median absolute percentage error of ``model``'s p50 on ``runs``."""
    actual = np.array([run.execution_seconds for run in runs])
    return float(np.median(np.abs(model.predict(runs) - actual) / actual))


def peak_mib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16000, help="runs in the big profile (default 16000)")
    args = parser.parse_args(argv)
    runs, held_out = large_profile_runs(args.runs), large_profile_runs(2000, seed=1)
    profile = Profile("team-a", "big", WORKLOAD, runs)
    started = time.perf_counter()
    profile.fit()
    capped_seconds, capped_peak = time.perf_counter() - started, peak_mib()
    assert profile.model is not None, profile.last_fit
    started = time.perf_counter()
    full = RuntimeModel().fit(runs)
    full_seconds, full_peak = time.perf_counter() - started, peak_mib()
    print(f"{len(runs)} runs, {len({(run.dataset_size, run.workers, run.batch_size) for run in runs})} configurations")
    print(f"  {'every run (before):':<26}{full_seconds:6.1f} s, peak {full_peak:4.0f} MiB, "
          f"held-out median error {median_error(full, held_out):.1%}")  # fmt: skip
    print(f"  {f'{MAX_FIT_RUNS} sampled (now):':<26}{capped_seconds:6.1f} s, peak {capped_peak:4.0f} MiB, "
          f"held-out median error {median_error(profile.model, held_out):.1%}")  # fmt: skip
    print(f"  the sampled fit takes {capped_seconds / full_seconds:.2f} x the time of the fit on every run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
