"""The runtime model of one profile: the selected candidate plus its calibrated upper bound.

Predictions are made for jobs that rarely say everything the profile
measured. What the job leaves out is filled from the profile, and
``assumptions`` names each value so filled:

- the global batch: the profile's typical per-worker batch
  (``batch_per_worker_``) times the job's workers, i.e. the per-worker batch
  is held, as Ray Train scripts do;
- the CPUs of a node (``node_cpus``, which decide whether CPU workers wait
  for cores: ``design.crowding``): the profile's;
- the node count, from the job's placement hint (``placement``: ``packed``,
  ``spread`` or ``one-per-node``; none means packed ``workers_per_node_`` to a
  node as the profile was), see ``nodes``;
- the epochs: 1 (one pass over the dataset).

Every prediction is finite and at least ``floor`` (``predictor``), is
anchored on the profile's runs of the same configuration, and its bound and
probabilities come from the residuals of its configuration band, widened
with the distance beyond the profile (``calibration``).

The candidates are combined per kind of question (``combination``): a
candidate that collapses on a row is left out of it. ``estimate`` answers
the planner's three questions (median, bound, chance) in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rayjob_advisor.models import calibration, design, evaluation
from rayjob_advisor.models.combination import Combined
from rayjob_advisor.models.design import Runlike
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.models.predictor import Estimates, Predictor
from rayjob_advisor.models.startup import StartupCurve
from rayjob_advisor.observations import Observation

_FREEZABLE = (design.EPOCHS, design.CPUS, design.GPUS, design.NODES)
RELIABLE_EXTRAPOLATION = 2.0
"""How many times the most profiled workers a prediction has been shown reliable at on data held out of every
choice: the farthest question of ``benchmarks.accuracy`` whose 0.9 bound covers at least 0.85 of the held-out runs,
one worker count beyond the profile (``workers-next``: 1, 2 and 4 GPUs asked about 8, the next node count; held out,
8.6 % off, covering 0.86). At 4x (``workers-x4``) the held-out bound covers 0.66, against 0.89 on the data the
settings were chosen on (docs/accuracy.md, "At a glance", 2026-12-07). ``enforce`` does not resize beyond it by
default (``application.Policy.max_extrapolation``); 4 until 2026-12-07."""


class RuntimeModel:
    """Combines the candidates by cross-validation (or selects the one they reduce to), refits on all runs,
    calibrates the bound.

    Selection (``evaluation.select_candidate``) scores every candidate
    without nested calibration; the held-out predictions of what is selected
    are its calibration data. ``candidate`` forces one candidate (by name)
    instead of combining.
    Fitted attributes: ``selected_`` (a candidate, or ``combined``), ``predictor_`` (``predictor.Predictor``),
    ``cv_mape_`` (mean over splits), ``evaluation_`` (without coverage), ``n_samples_``,
    ``workers_per_node_`` (the most workers the profile ran on one node: how
    tightly a job without a placement hint is assumed packed),
    ``max_nodes_`` (the most nodes a profiled run spanned: a ``spread`` job spans up to that many),
    ``max_workers_`` (the most workers a profiled run had: how far a plan reaches beyond the profile),
    ``batch_per_worker_`` (the profile's median per-worker batch, for jobs that give no batch),
    ``node_cpus_`` (the CPUs of the profile's nodes, ``design.typical_node_cpus``: a job's, which it does not
    say, on CPU workers; 0 where the runs did not record them),
    ``startup_curve_`` (``startup.StartupCurve``: the median start-up per worker count of the runs that
    measured one; ``startup`` reads it),
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
        runs = evaluation.Runs.from_observations(observations)
        return self.fit_selection(observations, evaluation.select_candidate(runs, candidates))

    def fit_selection(self, observations: Sequence[Observation], selection: evaluation.Selection) -> RuntimeModel:
        """``fit`` with the selection on ``observations`` made already (a benchmark compares settings of the
        combination on one cross-validation: ``evaluation.combine``)."""
        runs = selection.validation.runs
        self.evaluation_ = selection.evaluation
        self.selected_ = selection.point.name
        self.cv_mape_ = evaluation.mean_mape(self.evaluation_.splits, self.selected_)
        self.predictor_ = Predictor(
            selection.point, calibration.Calibration.from_held_out(selection.held[self.selected_])
        )
        self.fixed_columns_ = {
            column: float(runs.X[0, column]) for column in _FREEZABLE if np.all(runs.X[:, column] == runs.X[0, column])
        }
        self.measured_gpus_ = tuple(float(gpus) for gpus in np.unique(runs.X[:, design.GPUS]))
        self.n_samples_ = len(observations)
        self.startup_curve_ = StartupCurve.from_runs(observations)
        self.workers_per_node_, self.max_nodes_ = design.profiled_packing(runs.X)
        self.max_workers_ = int(np.max(runs.X[:, design.WORKERS]))
        self.batch_per_worker_ = max(1, round(float(np.median(design.local_batch(runs.X)))))
        self.node_cpus_ = design.typical_node_cpus(runs.X)
        return self

    def nodes(self, run: Runlike) -> int:
        """The nodes ``run`` spans: measured (an observation), else from its placement hint (module docstring)."""
        measured: int | None = getattr(run, "nodes", None)
        if measured is not None:
            return measured
        return design.placement_nodes(
            run.workers, getattr(run, "placement", None), self.workers_per_node_, self.max_nodes_
        )

    def _job_matrix(self, runs: Sequence[Runlike]) -> np.ndarray:
        """The design rows of the runs as given, the missing global batch filled from the profile."""
        X = design.design_matrix(runs, [self.nodes(run) for run in runs], self.node_cpus_)
        missing = np.array([run.batch_size is None for run in runs], dtype=bool)
        X[missing, design.BATCH] = self.batch_per_worker_ * X[missing, design.WORKERS]
        return X

    def _matrix(self, runs: Sequence[Runlike]) -> np.ndarray:
        X = self._job_matrix(runs)
        for column, value in self.fixed_columns_.items():
            X[:, column] = value
        return X

    def assumptions(self, run: Runlike) -> dict[str, float | str]:
        """What the prediction of ``run`` took from the profile rather than from the job (module docstring), and
        how far beyond the profile it lies (``extrapolation``).

        A profile that never varied the epochs keeps its own for the cost per epoch, but the job's epochs still
        multiply its work: they are not assumed, and not listed.
        """
        actual = self._job_matrix([run])[0]
        assumed: dict[str, float | str] = {
            design.COLUMNS[column]: value
            for column, value in self.fixed_columns_.items()
            if actual[column] != value and column != design.EPOCHS
        }
        if run.epochs is None:
            assumed["epochs"] = 1.0
        if run.batch_size is None:
            assumed["batch_size_per_worker"] = float(self.batch_per_worker_)
        if getattr(run, "node_cpus", None) is None and self.node_cpus_ and not actual[design.GPUS]:
            assumed["node_cpus"] = self.node_cpus_
        if getattr(run, "nodes", None) is None and getattr(run, "placement", None) is None:
            assumed["placement"] = "packed"
            assumed["workers_per_node"] = float(self.workers_per_node_)
        beyond = self.predictor_.point.reach.describe(self._matrix([run]))[0]
        if beyond:
            assumed["extrapolation"] = beyond
        return assumed

    def _scale(self, X: np.ndarray) -> np.ndarray | float:
        """What the predictor's seconds of these rows are multiplied by: 1 for a model of its own runs, the speed
        factor for one transferred from another accelerator's (``transfer``)."""
        return 1.0

    def floor(self, runs: Sequence[Runlike]) -> np.ndarray:
        """The least runtime physically possible for each run (``predictor``)."""
        X = self._matrix(runs)
        return np.asarray(self.predictor_.point.floor(X) * self._scale(X), dtype=float)

    def predict(self, runs: Sequence[Runlike]) -> np.ndarray:
        """Median execution seconds of each run: finite and never below ``floor``."""
        X = self._matrix(runs)
        return np.asarray(self.predictor_.predict(X) * self._scale(X), dtype=float)

    def trend(self, runs: Sequence[Runlike]) -> np.ndarray:
        """Execution seconds of each run by the model's curve alone, anchored on no measured run
        (``predictor.Point.trend``): a model fitted on runs it is then asked about predicts them without their noise.
        """
        X = self._matrix(runs)
        return np.asarray(self.predictor_.point.trend(X) * self._scale(X), dtype=float)

    def _pools(self, runs: Sequence[Runlike]) -> tuple[np.ndarray, list[tuple[np.ndarray, ...]]]:
        """The median of each run and the residual pools that bound it: what the bound and the chances of
        ``predict_upper``, ``probability_within`` and ``estimate`` are all read from (``Predictor.pools``)."""
        X = self._matrix(runs)
        predicted, pools = self.predictor_.pools(X)
        return np.asarray(predicted * self._scale(X), dtype=float), pools

    def predict_upper(self, runs: Sequence[Runlike], confidence: float) -> np.ndarray:
        """Execution seconds each run stays under with probability ``confidence``."""
        return calibration.upper_bounds(*self._pools(runs), confidence)

    def probability_within(self, runs: Sequence[Runlike], seconds: Sequence[float]) -> np.ndarray:
        """Per run, the estimated probability that it runs for at most ``seconds`` (same residuals as the bound)."""
        return calibration.probabilities_within(*self._pools(runs), np.asarray(seconds, dtype=float))

    def estimate(self, runs: Sequence[Runlike], confidence: float, seconds: Sequence[float] | None = None) -> Estimates:
        """``predict``, ``predict_upper`` and, where ``seconds`` are given, ``probability_within`` of the runs at
        once: what the planner asks of every size, from one pass of the model (an admission waits for it)."""
        asked = None if seconds is None else np.asarray(seconds, dtype=float)
        return Estimates.of(*self._pools(runs), confidence, asked)

    def predicted_by(self, run: Runlike) -> str:
        """What predicts ``run``: the selected candidate, or the combination's members with their weights for it
        (``sync-sgd 0.72 + dataparallel 0.28``)."""
        estimator = self.predictor_.point.estimator
        if not isinstance(estimator, Combined):
            return self.selected_
        (members,) = estimator.members(self._matrix([run]))
        return " + ".join(f"{name} {weight:.2f}" for name, weight in sorted(members.items(), key=lambda m: -m[1]))

    def startup(self, runs: Sequence[Runlike]) -> np.ndarray:
        """Expected start-up seconds of each run, from the profile's runs of as many workers (``startup``)."""
        return self.startup_curve_.seconds([run.workers for run in runs])

    def startup_upper(self, runs: Sequence[Runlike]) -> np.ndarray:
        """The start-up each run stays under at ``startup.UPPER_QUANTILE`` (``startup``)."""
        return self.startup_curve_.upper([run.workers for run in runs])
