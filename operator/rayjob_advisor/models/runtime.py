"""The runtime model of one profile: the selected candidate plus its calibrated upper bound."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rayjob_advisor.models import calibration, design, evaluation
from rayjob_advisor.models.design import Runlike
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.observations import Observation

_FREEZABLE = (design.EPOCHS, design.CPUS, design.GPUS, design.NODES)


class RuntimeModel:
    """Selects a candidate by cross-validation, refits it on all runs, calibrates its bound.

    Selection scores every candidate without calibrating it (the MAPE does
    not need it); only the selected one is calibrated, once, on all runs.
    ``candidate`` forces one candidate (by name) instead of selecting.
    Fitted attributes: ``selected_``, ``estimator_``, ``residuals_``,
    ``cv_mape_`` (mean over splits), ``evaluation_`` (without coverage), ``n_samples_`` and
    ``workers_per_node_`` (the most workers the profile ran on one node:
    a job whose node count is unknown is assumed packed that tightly),
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
        single_node = [o.workers for o in observations if (o.nodes or 1) == 1]
        self.workers_per_node_ = max(single_node, default=1)
        return self

    def _matrix(self, runs: Sequence[Runlike]) -> np.ndarray:
        X = design.design_matrix(runs, [design.packed_nodes(run.workers, self.workers_per_node_) for run in runs])
        for column, value in self.fixed_columns_.items():
            X[:, column] = value
        return X

    def assumptions(self, run: Runlike) -> dict[str, float]:
        """Design values of ``run`` replaced by the profile's (see ``fixed_columns_``)."""
        actual = design.design_matrix([run], [design.packed_nodes(run.workers, self.workers_per_node_)])[0]
        return {
            design.COLUMNS[column]: value for column, value in self.fixed_columns_.items() if actual[column] != value
        }

    def predict(self, runs: Sequence[Runlike]) -> np.ndarray:
        """Median execution seconds of each run."""
        return np.asarray(self.estimator_.predict(self._matrix(runs)), dtype=float)

    def predict_upper(self, runs: Sequence[Runlike], confidence: float) -> np.ndarray:
        """Execution seconds each run stays under with probability ``confidence``."""
        return calibration.upper_bound(self.predict(runs), self.residuals_, confidence)
