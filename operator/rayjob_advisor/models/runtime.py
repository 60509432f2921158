"""The runtime model of one profile: the selected candidate plus its calibrated upper bound.

Predictions are made for jobs that rarely say everything the profile
measured. What the job leaves out is filled from the profile, and
``assumptions`` names each value so filled:

- the global batch: the profile's typical per-worker batch
  (``batch_per_worker_``) times the job's workers, i.e. the per-worker batch
  is held, as Ray Train scripts do;
- the node count, from the job's placement hint (``placement``: ``packed``,
  ``spread`` or ``one-per-node``; none means packed ``workers_per_node_`` to a
  node as the profile was), see ``nodes``;
- the epochs: 1 (one pass over the dataset).

Every prediction is finite and at least ``floor`` — the runtime of the job's
work at the fastest per-sample rate, per GPU (or worker), that the profile
ever measured, as if it scaled perfectly: no model may claim more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rayjob_advisor.models import calibration, design, evaluation
from rayjob_advisor.models.design import Runlike
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.observations import Observation

_FREEZABLE = (design.EPOCHS, design.CPUS, design.GPUS, design.NODES)
PLACEMENTS = ("packed", "spread", "one-per-node")


def _resources(X: np.ndarray) -> np.ndarray:
    """What the work of a run is split over: its GPUs, or its workers when they have none."""
    return np.asarray(X[:, design.WORKERS] * np.maximum(X[:, design.GPUS], 1.0), dtype=float)


class RuntimeModel:
    """Selects a candidate by cross-validation, refits it on all runs, calibrates its bound.

    Selection scores every candidate without calibrating it (the MAPE does
    not need it); only the selected one is calibrated, once, on all runs.
    ``candidate`` forces one candidate (by name) instead of selecting.
    Fitted attributes: ``selected_``, ``estimator_``, ``residuals_``,
    ``cv_mape_`` (mean over splits), ``evaluation_`` (without coverage), ``n_samples_``,
    ``workers_per_node_`` (the most workers the profile ran on one node: how
    tightly a job without a placement hint is assumed packed),
    ``max_nodes_`` (the most nodes a profiled run spanned: a ``spread`` job spans up to that many),
    ``batch_per_worker_`` (the profile's median per-worker batch, for jobs that give no batch),
    ``seconds_per_sample_`` (the fastest per-sample time of one GPU or worker measured: the floor),
    ``startup_seconds_`` (the median start-up of the runs that measured one,
    0 when none did),
    ``fixed_columns_``: design columns (epochs, CPUs, GPUs, nodes) that never
    varied in the profile. Their effect cannot be learned, so a prediction
    uses the profile's value instead of the job's; ``assumptions`` says so.
    ``measured_gpus_``: the GPUs per worker the profile ran with, ascending
    (one value when GPUs are among ``fixed_columns_``): the planner may choose among them.
    """

    def __init__(self, candidate: str | None = None) -> None:
        if candidate is not None and candidate not in CANDIDATES:
            raise ValueError(f"unknown model {candidate!r}; choose from {', '.join(CANDIDATES)}")
        self.candidate = candidate

    def fit(self, observations: Sequence[Observation]) -> RuntimeModel:
        candidates = (self.candidate,) if self.candidate else tuple(CANDIDATES)
        self.evaluation_ = evaluation.evaluate(observations, candidates=candidates, calibrate=False)
        self.selected_ = self.evaluation_.selected
        self.cv_mape_ = evaluation.mean_mape(self.evaluation_.splits, self.selected_)
        runs = evaluation.Runs.from_observations(observations)
        self.estimator_, self.residuals_ = evaluation.fit_calibrated(self.selected_, runs)
        self.fixed_columns_ = {
            column: float(runs.X[0, column]) for column in _FREEZABLE if np.all(runs.X[:, column] == runs.X[0, column])
        }
        self.measured_gpus_ = tuple(float(gpus) for gpus in np.unique(runs.X[:, design.GPUS]))
        self.n_samples_ = len(observations)
        startups = [o.startup_seconds for o in observations if o.startup_seconds is not None]
        self.startup_seconds_ = float(np.median(startups)) if startups else 0.0
        self.workers_per_node_ = int(max(np.ceil(runs.X[:, design.WORKERS] / runs.X[:, design.NODES])))
        self.max_nodes_ = int(max(runs.X[:, design.NODES]))
        self.batch_per_worker_ = max(1, round(float(np.median(runs.X[:, design.BATCH] / runs.X[:, design.WORKERS]))))
        self.seconds_per_sample_ = float(np.min(runs.y * _resources(runs.X) / runs.X[:, design.WORK]))
        return self

    def nodes(self, run: Runlike) -> int:
        """The nodes ``run`` spans: measured (an observation), else from its placement hint (module docstring)."""
        measured: int | None = getattr(run, "nodes", None)
        if measured is not None:
            return measured
        placement = getattr(run, "placement", None)
        if placement == "spread":
            return min(run.workers, self.max_nodes_)
        if placement == "one-per-node":
            return run.workers
        return design.packed_nodes(run.workers, self.workers_per_node_)

    def _job_matrix(self, runs: Sequence[Runlike]) -> np.ndarray:
        """The design rows of the runs as given, the missing global batch filled from the profile."""
        X = design.design_matrix(runs, [self.nodes(run) for run in runs])
        missing = np.array([run.batch_size is None for run in runs], dtype=bool)
        X[missing, design.BATCH] = self.batch_per_worker_ * X[missing, design.WORKERS]
        return X

    def _matrix(self, runs: Sequence[Runlike]) -> np.ndarray:
        X = self._job_matrix(runs)
        for column, value in self.fixed_columns_.items():
            X[:, column] = value
        return X

    def assumptions(self, run: Runlike) -> dict[str, float | str]:
        """What the prediction of ``run`` took from the profile rather than from the job (module docstring)."""
        actual = self._job_matrix([run])[0]
        assumed: dict[str, float | str] = {
            design.COLUMNS[column]: value for column, value in self.fixed_columns_.items() if actual[column] != value
        }
        if run.epochs is None:
            assumed.setdefault("epochs", 1.0)
        if run.batch_size is None:
            assumed["batch_size_per_worker"] = float(self.batch_per_worker_)
        if getattr(run, "nodes", None) is None and getattr(run, "placement", None) is None:
            assumed["placement"] = "packed"
            assumed["workers_per_node"] = float(self.workers_per_node_)
        return assumed

    def floor(self, runs: Sequence[Runlike]) -> np.ndarray:
        """The least runtime physically possible for each run (module docstring)."""
        X = self._matrix(runs)
        return np.asarray(self.seconds_per_sample_ * X[:, design.WORK] / _resources(X), dtype=float)

    def predict(self, runs: Sequence[Runlike]) -> np.ndarray:
        """Median execution seconds of each run: finite and never below ``floor``."""
        predicted = np.asarray(self.estimator_.predict(self._matrix(runs)), dtype=float)
        floor = self.floor(runs)
        return np.where(np.isfinite(predicted), np.maximum(predicted, floor), floor)

    def predict_upper(self, runs: Sequence[Runlike], confidence: float) -> np.ndarray:
        """Execution seconds each run stays under with probability ``confidence``."""
        return calibration.upper_bound(self.predict(runs), self.residuals_, confidence)

    def probability_within(self, runs: Sequence[Runlike], seconds: Sequence[float]) -> np.ndarray:
        """Per run, the estimated probability that it runs for at most ``seconds`` (same residuals as the bound)."""
        return calibration.probability_within(self.predict(runs), self.residuals_, np.asarray(seconds, dtype=float))
