"""Cheap selection against the full evaluation on the Pollux (OSDI'21) traces.

``RuntimeModel().fit`` selects by plain cross-validation and calibrates the
chosen candidate on the same held-out predictions; ``evaluate`` calibrates
every candidate on every fold to report coverage. Per workload: the model each picks, their
cross-validated MAPE, how many estimator fits each made and how long it
took. The two must agree; the tests check the same on the small profiles.

    .venv/bin/python -m benchmarks.selection [--pollux-dir FOLDER]
"""

from __future__ import annotations

import argparse
import pathlib
import time

from benchmarks.pollux import DEFAULT_POLLUX, MODELS, pollux_observations
from rayjob_advisor.models import evaluation
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor_testkit.fits import counting_fits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pollux-dir", type=pathlib.Path, default=DEFAULT_POLLUX)
    args = parser.parse_args()

    print("| workload | runs | selected (RuntimeModel.fit / evaluate) | same | CV MAPE | fits | seconds |")
    print("|---|---|---|---|---|---|---|")
    agree = True
    for model in MODELS:
        observations = pollux_observations(args.pollux_dir, model)
        with counting_fits() as cheap_fits:
            started = time.perf_counter()
            cheap = RuntimeModel().fit(observations)
            cheap_seconds = time.perf_counter() - started
        with counting_fits() as full_fits:
            started = time.perf_counter()
            full = evaluation.evaluate(observations)
            full_seconds = time.perf_counter() - started
        same = cheap.selected_ == full.selected
        agree &= same and cheap.cv_mape_ == evaluation.mean_mape(full.splits, full.selected)
        print(
            f"| {model} | {len(observations)} | {cheap.selected_} / {full.selected} | {'yes' if same else 'NO'} "
            f"| {100 * cheap.cv_mape_:.2f}% / {100 * evaluation.mean_mape(full.splits, full.selected):.2f}% "
            f"| {sum(cheap_fits.values())} / {sum(full_fits.values())} | {cheap_seconds:.1f} / {full_seconds:.1f} |"
        )
    print(f"\nsame model and CV MAPE on every workload: {agree}")


if __name__ == "__main__":
    main()
