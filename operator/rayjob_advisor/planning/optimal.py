"""Cost-weighted optimal experiment design for the runtime at the target configurations.

The structural candidates (``models.estimators``) are, near their fit, linear in a few features of a run: Ernest's
``[1, work / resources, log W, W]`` and the per-step terms of synchronous data-parallel SGD (steps, and steps times
the ring's ``(W - 1) / W``, ``log2 W`` and the nodes crossed). Fitted to relative error, each run's row is divided by
its runtime. In that linear model, the variance of the predicted runtime at a target ``t`` (relative to it) is
``t' M^-1 t`` with ``M`` the information matrix of the runs measured so far (``X' X`` of the scaled rows) plus a
weak ridge prior. A candidate run ``c`` lowers the mean of that variance over the targets by
``sum_t (t' M^-1 c)^2 / (1 + c' M^-1 c) / n_targets`` (Sherman-Morrison): the greedy design adds, one at a time,
the candidate with the largest reduction per unit of its predicted cost (an A-optimal design for the predictions
at the targets, "V-optimal", weighted by cost as Ernest's design is).

The features are the structural models' terms, and one a structural model lacks: a time per sample that drifts
with the work (``CURVED``), so that the design does not bet every run on the linearity it assumes. The prior and
that column were chosen by leave-one-dataset-out over the traces the plan is simulated on (``PRIOR``, ``CURVED``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rayjob_advisor.models import design

PRIOR = 0.1
"""Ridge prior on the normalised features: a run's scaled row has squared norm of order one, so this is a tenth of
one run's information, enough to keep ``M`` invertible before the first runs and to tell apart runs whose features
are collinear (a dataset that never varies the GPUs). Chosen by leave-one-dataset-out among 1e-3 and 0.1, with
``sequential.GROWTH`` (``.venv/bin/python -m benchmarks.plan --lodo``): 0.1 for 17 of the 18 left-out traces
(median plan / grid MAPE ratio 0.997 against 1.008), re-run on 2026-12-04 after profiles were fitted from 8 runs
and ``sync-sgd`` to one point, and again with a plan's first run measured alone (the same choices), and on
2026-12-05 with the step models pricing the workers sharing a node (0.1 for 17 of 18, beside a half for
``sequential.GROWTH``: median 1.003 against 1.023 at 1e-3), and beside ``CURVED`` (0.1 for all 18)."""

CURVED = True
"""Whether the design also hedges against a time per sample that drifts with the work (a lack-of-fit column,
``work / resources x log work``): the structural terms are linear in the work, so to them a run of the least work
tells the time per sample as well as one of the most, and being the cheapest the design takes mostly those (on
``sia-bert-v100`` 105 of the plan's 271 runs were of the least work of four, 13 of the most: 103 and 18 with it); a
profile whose time per sample grows with the work is then fitted on the small runs and extrapolated to the targets'
work. Chosen by leave-one-dataset-out with ``PRIOR`` and ``sequential.GROWTH`` (``benchmarks.plan --lodo``,
2026-12-05, 19 minutes on 2 cores): with it for all 18 left-out traces (median plan / grid MAPE ratio 0.993 against
1.010 without, at a third and 0.1), and by ``benchmarks.lodo``'s paired rule on the log ratios the left-out choice
is 1.32 +- 0.59 points better per trace than without (better on 11, worse on 5): changed. Its pull is small:
measured at 1,000-2,000 samples, a run of the targets' 32,000 lowers their variance 8.2 times as much as one more
small run with it, 8.0 without (``tests/test_plan.py``); the traces moved by a few tenths of a point each."""


def features(X: np.ndarray) -> np.ndarray:
    """The linear structural features of each design row (module docstring), and ``CURVED``'s column."""
    workers, nodes = X[:, design.WORKERS], X[:, design.NODES]
    per_worker = np.where(X[:, design.GPUS] > 0, X[:, design.GPUS], X[:, design.CPUS])
    steps = design.steps(X)
    per_resource = X[:, design.WORK] / (workers * per_worker)
    curved = [per_resource * np.log(X[:, design.WORK])] if CURVED else []
    return np.column_stack(
        [
            np.ones(len(X)),
            per_resource,
            np.log(workers),
            workers,
            steps,
            steps * (workers - 1.0) / workers,
            steps * np.log2(workers),
            steps * (nodes - 1.0),
            *curved,
        ]
    )


class TargetVariance:
    """The relative variance of the predictions at the targets, and the greedy choice of runs that lowers it.

    ``measured``, ``candidates``, ``targets``: design rows (``models.design``); ``*_seconds``: their runtimes,
    measured or predicted (what makes the rows relative). Fitted attributes: ``inverse_`` (``M^-1``),
    ``variance_`` (per target).
    """

    def __init__(self, prior: float | None = None) -> None:
        self.prior = PRIOR if prior is None else prior  # read when called: ``benchmarks.plan --lodo`` sets it

    def fit(
        self,
        measured: np.ndarray,
        measured_seconds: np.ndarray,
        candidates: np.ndarray,
        candidate_seconds: np.ndarray,
        targets: np.ndarray,
        target_seconds: np.ndarray,
    ) -> TargetVariance:
        rows = [features(X) / seconds[:, None] for X, seconds in
                ((measured, measured_seconds), (candidates, candidate_seconds), (targets, target_seconds))]  # fmt: skip
        scale = np.sqrt(np.mean(np.vstack(rows) ** 2, axis=0))
        scale[scale == 0] = 1.0
        self.measured_, self.candidates_, self.targets_ = (row / scale for row in rows)
        information = self.prior * np.eye(len(scale)) + self.measured_.T @ self.measured_
        self.inverse_ = np.linalg.inv(information)
        self.variance_ = np.einsum("ij,jk,ik->i", self.targets_, self.inverse_, self.targets_)
        return self

    def gains(self) -> np.ndarray:
        """Per candidate, how much measuring it lowers the mean variance at the targets."""
        cross = self.targets_ @ self.inverse_ @ self.candidates_.T
        own = np.einsum("ij,jk,ik->i", self.candidates_, self.inverse_, self.candidates_)
        return np.asarray((cross**2).mean(axis=0) / (1.0 + own), dtype=float)

    def add(self, candidate: int) -> None:
        """Count candidate ``candidate`` as measured (a rank-one update of ``M^-1``)."""
        row = self.candidates_[candidate]
        projected = self.inverse_ @ row
        self.inverse_ = self.inverse_ - np.outer(projected, projected) / (1.0 + row @ projected)
        self.variance_ = np.einsum("ij,jk,ik->i", self.targets_, self.inverse_, self.targets_)

    def choose(
        self, costs: np.ndarray, available: Sequence[bool], budget: float, count: int,
        charged: np.ndarray | None = None,
    ) -> list[int]:  # fmt: skip
        """Up to ``count`` candidates, greedily by reduction per cost (predicted ``costs``), their ``charged`` costs
        (default: ``costs``) within ``budget``; each is counted as measured before the next is chosen, so a batch
        does not repeat what it has learned."""
        charged = costs if charged is None else charged
        left = np.array(available, dtype=bool)
        chosen: list[int] = []
        for _ in range(count):
            left &= charged <= budget
            if not left.any():
                break
            score = np.where(left, self.gains() / costs, -np.inf)
            best = int(np.argmax(score))
            chosen.append(best)
            left[best] = False
            budget -= float(charged[best])
            self.add(best)
        return chosen
