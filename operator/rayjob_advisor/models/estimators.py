"""Candidate runtime estimators, all scikit-learn regressors over ``design.COLUMNS``.

Every candidate is fitted to *relative* error (the metric users judge us by):
the linear ones by weighting each row by 1/runtime, the non-linear ones by
learning the logarithm of the time per sample.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import least_squares, nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor

from rayjob_advisor.models.design import (
    BATCH,
    CPUS,
    EPOCHS,
    GPUS,
    NODES,
    WORK,
    WORKERS,
    crowding,
    local_batch,
    nearest_measured,
    sharing,
    sharing_measured,
)
from rayjob_advisor.models.design import (
    steps as design_steps,
)

_TINY = 1e-9
RIDGE = 1e-4
"""How hard ``SyncSGD``'s fit pulls each parameter, in units of its own scale, towards none (``gamma`` towards 1, the
step's computation and synchronisation added): a residual of ``RIDGE`` per parameter beside the runs' relative errors.
A profile that does not vary what tells two parameters apart (one per-worker batch, few worker counts) leaves a
valley of equally good fits, and where the solver stopped in it depended on the rounding of the machine's BLAS
(the shipped ``digits-cnn`` profile predicted 3-4 workers 2-3 % apart, and a profiling plan 14 % or 30 % off, on
AVX2 and AVX-512 kernels): the pull makes the fit one point, the same on every machine, and is too weak to move a
parameter the runs determine. Chosen leave-one-dataset-out (``python -m benchmarks.lodo --grid ridge``) among 1e-6,
1e-5, 1e-4, 1e-3 and 1e-2: over the 18 datasets (2026-12-04), 1e-5 for 17 of the 18 left-out datasets (1e-6 for
Sia bert A100), 11.68 % mean left-out MAPE; mean over the datasets 11.65 % against 11.68-11.77 % for the others
and 11.68 % with no pull at all (0: chosen for Sia bert A100 alone, in a grid of 0 and 1e-5). Re-run on 2026-12-05
with the step models pricing the workers sharing a node (``SHARED_LINK``): 1e-6 for 17 of 18 (1e-2 for
``digits-cnn``), mean over the datasets 11.26 % against 11.28 % at 1e-5, but choosing so gives 11.31 % left out
against 11.28 % for keeping 1e-5: kept (``benchmarks.lodo``'s rule for a setting in place; the grid is flat, and
the pull is there for one fit per machine). The predictions of ``SyncSGD`` fitted on each dataset's
runs of at most half its most workers then agree within 7e-6 on AVX2 and AVX-512 kernels
(``OPENBLAS_CORETYPE=Haswell`` and ``SkylakeX``; 2026-12-05 at 1e-5, 2e-6 before ``SHARED_LINK``). Re-run with
the crowded cores priced (2026-12-05, evening): 1e-4 for 12 of 18 left-out datasets, 1e-5 for 4, 1e-2 for 2; choosing so
gives 10.90 % left out against 10.84 % for keeping 1e-5 (+0.08 +- 0.06 points over the 14 where it differs): kept;
1e-6 is now 3.8 points worse on ``digits-cnn``. Over the 28 datasets with MLPerf's first family and ``COMPUTE_PULL``
(2026-12-05): 1e-4 for 27 left-out datasets (1e-3 for MLPerf BERT on NVIDIA's H100s), 80.18 % mean left-out MAPE
against 86.58 % at 1e-5; per dataset -6.40 +- 2.72 points (better on 15, worse on 13): the rule's change, to 1e-4.
MLPerf's profiles of one or two per-GPU batches and few node counts leave the widest valleys, and there the stronger
pull decides where the fit lands (not examined parameter by parameter; BERT on Dell's SXM40 A100s 27.2 -> 6.0 %, on the
PCIe ones 23.4 -> 19.9 %; ResNet-50 on the PCIe ones 60.1 -> 15.7 %; worse: ResNet-50 on the SXM40 ones 7.8 -> 11.0 %,
on the SXM80 ones 1.3 -> 3.9 %); the 18 datasets before MLPerf move by 0.03 point at most (10.80 % mean either
way). On a relative scale (decision 1 of the notes) it is t -1.70 over the 13 datasets that differ. Re-run on
converged fits (``FIT_TOLERANCE``, 2026-12-06): 1e-4 for 27 of the 28 left-out datasets (1e-3 with ResNet-50 on
NVIDIA's H100s left out), 10.17 % mean left-out MAPE against 10.11 % in place (1e-6 22.69 %, 1e-5 13.12 %, 1e-3
10.15 %, 1e-2 24.68 % mean over the datasets): kept."""

FIT_TOLERANCE = 1e-14
MAX_EVALUATIONS: int | None = 20_000
"""When ``SyncSGD``'s solver stops: at a relative change of cost, step or gradient of ``FIT_TOLERANCE``, or after
``MAX_EVALUATIONS`` evaluations of the runs' errors. Not tuned on the data: set so that the fit converges, so that
it is the one point of the objective (``RIDGE``) and not where the solver gave up. MLPerf's profiles (a few node
counts, one or two per-GPU batches, 1 % noise) leave a flat valley the solver crosses slowly: at 1e-10 and scipy's
default budget (100 evaluations per parameter) 319 of the 652 fits of their questions' training runs stopped at the
budget, and where the rounding had taken the solver by then decided the fit: the same runs in the opposite order
(as on another BLAS kernel) predicted BERT on NVIDIA's H100s at 4x its GPUs 28 % apart. Now every fit of every
dataset's questions converges, within 1,900 evaluations; the two orders' worst disagreement per dataset is above
1e-3 on 14 of 44 datasets instead of 34 and above 1e-2 on 5 instead of 21 (MLPerf's worst 29 % -> 2.4 %): what is
left are two fits of nearly equal error that a dozen runs admit (docs/accuracy.md, "The same figures on every
machine"). The traces' fits, which converged before, take 5 % longer (``pollux-cifar10``'s questions: 4.6 s of
fitting against 4.3 s). ``RIDGE`` and ``COMPUTE_PULL``, chosen while the early stop was in place, were chosen again
on converged fits and kept (their docstrings); the early stop had been worth 9.65 % against 10.11 % mean left-out
MAPE over the 28 datasets, +1.07 +- 1.15 points per dataset over the 12 that differ, carried by BERT on NVIDIA's
H100s (2.85 -> 15.85 %): where the solver had stopped, not a property of the objective."""

COMPUTE_PULL = 1e-2
"""How hard ``SyncSGD``'s fit pulls its compute per local sample ``b_c`` towards the whole step per local sample
(the step as all computation), in units of that rate: a residual of ``COMPUTE_PULL`` beside the runs' relative
errors. Where the profile varies the per-worker batch, the runs split the step into a fixed and a per-sample part
and the pull barely moves it; where it ran one or two per-worker batches, the split is open, and ``RIDGE`` alone
left about half the step fixed, which prices a much smaller per-worker batch too slow and a larger one too fast
(MLPerf's submissions, whose per-GPU batch falls up to 25x with the scale). Chosen leave-one-dataset-out
(``python -m benchmarks.lodo --grid compute``) among 0, 1e-3, 1e-2 and 1e-1 over the 28 datasets (2026-12-05,
the first MLPerf family among them): 1e-2 for every left-out dataset, 86.58 % mean left-out MAPE against 93.64 %
with none; per dataset -7.06 +- 3.44 points (better on 20, worse on 8): the rule's change. The 18 datasets before
MLPerf barely see it (``digits-cnn`` 15.31 -> 14.58 %, the others within 0.05 point); MLPerf's do (BERT on
NVIDIA's H100s 131.9 -> 55.1 %, on Dell's GB200s 28.2 -> 4.8 %; ResNet-50 on Dell's PCIe A100s 104.8 -> 60.1 %).
Re-run on converged fits (``FIT_TOLERANCE``, 2026-12-06) with 1 added to the grid: 1 for 27 of the 28 left-out
datasets (1e-3 with BERT on Dell's PCIe A100s left out, whose loss is 1.1 % at 1 against 15.3-25.7 % at the
others: it carries the choice), 10.42 % mean left-out MAPE against 10.11 % in place; per dataset +0.308 +- 0.117
points (better on 10, worse on 18): kept."""

SHARED_LINK: tuple[str, ...] = ("dataparallel", "sync-sgd")
"""The candidates that price the workers sharing a node (``design.sharing``): on PCIe machines a node's GPUs share
its host link, and a step syncs as slowly as its busiest node (on Sia's V100s 8 GPUs on one node step 1.9-2.2x
slower than 8 over 5 nodes, and the step grows linearly with the GPUs per node). The price is learned only where
the profile ran a worker count at two packings (``design.sharing_measured``: otherwise it cannot be told from what
more workers cost), and held beyond the most workers a profiled node shared: a denser node than any measured is
priced as the densest that was. Chosen leave-one-dataset-out (``python -m benchmarks.lodo --grid sharing``,
2026-12-05) among none, ``dataparallel`` alone and both: both for 16 of the 18 left-out datasets (``dataparallel``
alone for Sia bert and deepspeech2 on the V100, each the other's one witness of the effect), 11.55 % mean left-out
MAPE against 11.65 % with none; mean over the datasets 11.28 % against 11.35 % and 11.65 %. Against none it would not
pass ``benchmarks.lodo``'s paired rule of 2026-12-05 (-0.36 +- 0.45 points, better on 7 datasets and worse on 8: a
large gain where a node's packing was measured, a loss where it was not); kept as the setting in place (with it the GPU
replay, ``benchmarks.deadlines --parts gpu``, fails 3 of its 8 rows instead of 4). Re-run with the crowded cores priced
(2026-12-05,
evening): both for 16 of 18 as before. Over the 28 datasets with MLPerf's first family, ``COMPUTE_PULL`` and
``RIDGE`` at 1e-4 (2026-12-05): both for 27 left-out datasets (``dataparallel`` alone with Sia bert on the V100 left
out), 79.71 % mean over the datasets against 79.78 % with ``dataparallel`` alone and 79.97 % with none: kept.
Re-run on converged fits (``FIT_TOLERANCE``, 2026-12-06, 19 minutes): both for 27 of 28 again (``dataparallel`` alone
with Sia bert on the V100 left out: 12.74 % then, against 9.42 % with both), 10.11 % mean over the datasets against
10.17 % with ``dataparallel`` alone and 10.36 % with none; 10.23 % left out: kept."""

CROWDED_CORES: tuple[str, ...] = ("dataparallel", "sync-sgd")
"""The candidates whose compute slows where a node's CPU workers run more threads than it has cores
(``design.crowding``: 4 workers of one thread each on a 2-CPU node compute at half speed). A physical factor, not
fitted: it is 1 on GPU workers and on runs that did not record their node's CPUs. Put to leave-one-dataset-out
(``python -m benchmarks.lodo --grid crowding``, 2026-12-05) against none: both for all 18 left-out datasets, mean MAPE
over the datasets 10.84 % against 11.28 %; per dataset -2.65 +- 0.68 points over the three CPU datasets where it acts
(better on all three; the 15 GPU datasets alike), a change by ``benchmarks.lodo``'s rule. The whole step slowed
instead (the fixed cost per step and the all-reduce too) was better on one CPU dataset and worse on two: not taken.
Re-run over the 28 datasets on converged fits (``FIT_TOLERANCE``, 2026-12-06, 13 minutes): both for all 28, 10.11 %
against 10.44 % with none (``digits-cnn`` 17.45 -> 14.73 %, ``ray-digits`` 17.84 -> 14.03 %, ``ray-mlp`` 15.15 ->
12.41 %; the GPU datasets alike): kept."""

BOOSTING_ROUNDS = 100
BOOSTING_DEPTH = 3
BOOSTING_RATE = 0.15
BOOSTING_LEAF = 5
"""``gradient-boosting``'s trees, their depth, its learning rate and the fewest runs of a leaf: set when the
candidate was written, and put to leave-one-dataset-out on 2026-12-05 in two grids, each with the other's settings
in place (``python -m benchmarks.lodo --grid boosting``, ``--grid boosting-rate``). Rounds 50, 100, 200 x depth 2, 3,
4: flat, 11.27-11.33 % mean MAPE over the 18 datasets; 200 rounds at depth 2 for 14 left-out datasets, at depth 3
for 4, 11.31 % mean left-out against 11.28 % for 100 at depth 3: kept (``benchmarks.lodo``'s rule for a setting in
place). Rate 0.075, 0.15, 0.3 x leaf 5, 10 runs: a rate of 0.3 and leaves of 5 for all 18 left-out datasets,
11.26 % mean left-out against 11.28 % for 0.15 (leaves of 10: 11.34-11.37 %). Kept at 0.15: per dataset the
gain is -0.019 +- 0.022 points (better on 7 datasets, worse on 11: three carry it), inside the noise that
``benchmarks.lodo``'s rule now asks a change to beat (``SIGNIFICANCE``); and with 0.3 the GPU replay
(``benchmarks.deadlines --parts gpu``) failed 5 of its 8 rows instead of 3 (Pollux imagenet's tight deadlines met
on 70-75 % of jobs instead of 100 %). Re-run with the crowded cores priced (2026-12-05, evening): rate 0.3 for all
18, -0.035 +- 0.034 points over the 13 datasets where it differs; rounds 200 of depth 3 for all 18, -0.008 +- 0.008
(better on 11, worse on 7): both kept. Rounds x depth over the 28 datasets with the kinds beyond the profile
pooled (2026-12-06, 66 minutes on 2 cores beside other work): flat, 9.63-9.67 % mean over the datasets; 200 rounds
of depth 3 for 23 left-out datasets, 100 of depth 3 for 4, 200 of depth 2 for 1; 9.65 % left out against 9.63 % in
place, +0.016 +- 0.010 points over the 20 where the choice differs: kept. Rate x leaf over the 28 (2026-12-06, 38
minutes on 2 cores beside other grids): a rate of 0.3 and leaves of 5 for all 28 left-out datasets, 9.62 % mean
left-out MAPE against 9.63 % in place; per dataset -0.014 +- 0.019 points over the 24 where it differs (better on 11,
worse on 13): kept. Rate x leaf re-run on converged fits (``FIT_TOLERANCE``, 2026-12-07, 59 minutes on 2 cores): a
rate of 0.3 and leaves of 5 for all 28, 10.10 % left out against 10.11 % in place, -0.014 +- 0.019 points over the
24 where it differs (better on 12, worse on 12): kept. Rounds x depth re-run on converged fits (2026-12-07, 91
minutes on 2 cores alone): flat, 10.11-10.13 % mean over the datasets; 200 rounds of depth 3 for 21 left-out
datasets, 50 of depth 4 for 4, one each for 100 of depth 3, 200 of depth 2 and 50 of depth 3; 10.15 % left out
against 10.11 % in place, +0.044 +- 0.017 points over the 23 where the choice differs (better on 11, worse on 12):
kept."""


def _sharing_limit(name: str, X: np.ndarray) -> float:
    """The most workers sharing a node that candidate ``name`` prices on runs like ``X``: none unless it is in
    ``SHARED_LINK`` and the runs measured the price (``design.sharing_measured``)."""
    return sharing_measured(X) if name in SHARED_LINK else 0.0


def _crowding(name: str, X: np.ndarray) -> np.ndarray:
    """How many times slower candidate ``name`` takes the compute of each run of ``X`` to be: ``design.crowding``
    where it is in ``CROWDED_CORES``, else 1."""
    return crowding(X) if name in CROWDED_CORES else np.ones(len(X))


def _positive(seconds: np.ndarray) -> np.ndarray:
    """Runtimes clipped to a tiny positive value: a model never predicts zero or negative time."""
    return np.asarray(np.maximum(seconds, _TINY), dtype=float)


def _relative_nnls(basis: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising the squared relative error."""
    weights = 1.0 / y
    coef, _ = nnls(basis * weights[:, None], y * weights, maxiter=50 * basis.shape[1])
    return np.asarray(coef, dtype=float)


def _multi_node_counts(X: np.ndarray) -> np.ndarray:
    """The node counts above one that the runs of ``X`` spanned, ascending."""
    return np.unique(X[X[:, NODES] > 1, NODES])


class _BasisNNLS(RegressorMixin, BaseEstimator):
    """Runtime = non-negative combination of a fixed basis of the design columns."""

    def basis(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit(self, X: np.ndarray, y: np.ndarray) -> _BasisNNLS:
        self.node_counts_ = _multi_node_counts(X)
        self.coef_ = _relative_nnls(self.basis(X), np.asarray(y, dtype=float))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return _positive(self.basis(X) @ self.coef_)


class Ernest(_BasisNNLS):
    """Ernest (Venkataraman et al., NSDI'16): NNLS on [1, size/workers, log workers, workers].

    "size" is the work of the run: dataset size x epochs.
    """

    def basis(self, X: np.ndarray) -> np.ndarray:
        workers = X[:, WORKERS]
        return np.column_stack([np.ones(len(X)), X[:, WORK] / workers, np.log(workers), workers])


class DataParallel(_BasisNNLS):
    """Ernest extended with the structure of synchronous data-parallel SGD.

    A run is ``steps`` steps (``epochs x ceil(dataset / batch)``: the last
    batch of an epoch is a step too); a step costs a fixed overhead, the
    compute of ``batch / workers`` samples (split over a worker's CPUs or
    GPUs; slower where CPU workers crowd a node's cores, ``CROWDED_CORES``)
    and a gradient all-reduce whose cost grows with the ring size
    ``(W-1)/W``, with ``log W`` and ``W`` (latency), with the number of
    nodes crossed and with the workers sharing the busiest node
    (``SHARED_LINK``). Each term is a basis column with a non-negative
    coefficient, so the fitted curve keeps its physical shape when asked
    about more workers than it was measured on. Each multi-node count the
    profile measured has its own per-step cost (a free shape over node
    counts: real clusters sync slower on 2 nodes than on 4 with the same
    GPUs); an unmeasured count takes its nearest measured one's. The
    linear latency column put to leave-one-dataset-out on converged fits
    (2026-12-07, branch ``try/ring-latency``): without it, -0.110 +- 0.106
    points per dataset (better on 12, worse on 11: the own Ray sweeps by
    0.7-0.9 points): kept (docs/accuracy.md).
    """

    def fit(self, X: np.ndarray, y: np.ndarray) -> DataParallel:
        self.sharing_limit_ = _sharing_limit("dataparallel", X)
        super().fit(X, y)
        return self

    def basis(self, X: np.ndarray) -> np.ndarray:
        work, epochs, workers = X[:, WORK], X[:, EPOCHS], X[:, WORKERS]
        cpus, gpus, nodes = X[:, CPUS], X[:, GPUS], X[:, NODES]
        steps = design_steps(X)
        slower = _crowding("dataparallel", X)
        ring = (workers - 1.0) / workers
        nearest = nearest_measured(nodes, self.node_counts_) if len(self.node_counts_) else nodes
        per_node_count = [steps * ((nodes > 1) & (nearest == count)) for count in self.node_counts_]
        return np.column_stack(
            [
                np.ones(len(X)),  # fixed start of the training loop
                epochs,  # per-epoch overhead (evaluation, data loader restarts)
                workers,  # per-worker set-up (Ernest)
                steps,  # fixed cost per step
                work / workers * slower,  # compute per sample, data-parallel (on cores shared: ``crowding``)
                work / (workers * cpus) * slower,  # ... that also splits over a worker's CPUs
                work / (workers * np.maximum(gpus, 1.0)),  # ... or over its GPUs
                steps * ring,  # all-reduce bandwidth term
                steps * np.log2(workers),  # tree/hierarchical all-reduce latency
                steps * (workers - 1.0),  # ring all-reduce latency
                steps * ring * (nodes > 1),  # bandwidth lost when crossing nodes
                steps * (nodes - 1.0),  # latency per node crossed
                steps * sharing(X, self.sharing_limit_),  # the busiest node's shared host link
                *per_node_count,  # what crossing exactly this many nodes costs per step
            ]
        )


class _SyncColumns(NamedTuple):
    epochs: np.ndarray
    steps: np.ndarray
    local: np.ndarray  # samples per step per GPU (or CPU)
    growth: np.ndarray  # 2(W - 1) / W - 1: how the ring's traffic per worker grows beyond 2 workers
    sharing: np.ndarray  # the other workers on the busiest node, held at the most measured (``SHARED_LINK``)
    synced: np.ndarray  # more than one worker
    placement: np.ndarray  # index of the sync intercept: 0 on one node, 1 + that of the nearest measured node count


class SyncSGD(RegressorMixin, BaseEstimator):
    """The throughput model of Pollux (Qiao et al., OSDI'21), plus fixed overheads.

    ``time = c0 + c1 * epochs + steps * (T_grad^g + T_sync^g)^(1/g)`` with
    ``T_grad = a_c + b_c * local_batch / r`` (``r``: the worker's GPUs, or
    CPUs when it has none, over how crowded its node's cores are:
    ``CROWDED_CORES``) and ``T_sync`` zero for one worker, else
    ``a_k + b * (2(W - 1) / W - 1) + d * s`` on ``k`` nodes (``s``: the
    workers sharing the busiest node, ``SHARED_LINK``): each node count the
    profile measured has its own intercept ``a_k`` (a free shape: a 2-node
    ring may be slower than a 4-node one; an unmeasured count takes its
    nearest measured one's; without single-node multi-worker runs one node
    takes the fewest nodes'), and one slope ``b`` for all. The growth is a
    ring all-reduce's bandwidth term, ``2(W - 1) / W`` times the gradient over
    the slowest link, relative to 2 workers: bounded, as a ring's traffic per
    worker is. Pollux grows ``T_sync`` linearly in ``W - 2``; fitted on 1-4
    GPUs and asked about 12-16 on the Pollux and Sia traces, the linear growth
    is 90 % off on average, a logarithm 20 % and the ring's bound 11 %
    (``benchmarks.accuracy``, workers x4). ``g >= 1`` blends computation and
    synchronisation from fully added (``g = 1``) to fully overlapped (large
    ``g``). Fitted by bounded non-linear least squares on relative error, from
    a few fixed starting points (deterministic).

    Synced runs at one worker count (2 workers, or any one count) cannot
    show how ``T_sync`` grows: they measure one value of the growth, where
    the slope and the intercepts add up to one sum, and a slope the data
    does not constrain wanders anywhere while fitting. So there ``b`` is not
    fitted but tied, while fitting and after, to what the ring's bandwidth
    term has it, ``b = a``: the least measured sync intercept. Nor
    can runs of one epoch count tell ``c1`` from ``c0``: there ``c1`` is 0,
    the overhead counted per run (the project's own Ray runs, at 1 and 2
    epochs, fit ``c1 = 0`` too). Nor can a profile that packed every worker
    count one way tell ``d`` from ``b`` and ``a_k``: there ``d`` is 0. What
    else the runs leave undetermined is pulled towards none by ``RIDGE``, so
    that the fit is one point; and a step the runs cannot split into fixed
    and per-sample parts is taken as computation (``COMPUTE_PULL``).
    """

    _GAMMA_STARTS = (1.0, 3.0)
    _SHARED = 7  # c0, c1, a_c, b_c, gamma, b, d; then a_1 and one a_k per measured multi-node count

    def _prepare(self, X: np.ndarray) -> _SyncColumns:
        """The columns the model reads, computed once per fit or prediction (the fit evaluates it often)."""
        workers, gpus, nodes = X[:, WORKERS], X[:, GPUS], X[:, NODES]
        resources = np.where(gpus > 0, gpus, X[:, CPUS])
        counts = self.node_counts_
        across = 1 + np.searchsorted(counts, nearest_measured(nodes, counts)) if len(counts) else 0
        return _SyncColumns(
            epochs=X[:, EPOCHS],
            steps=design_steps(X),
            local=local_batch(X) / resources * _crowding("sync-sgd", X),
            growth=2.0 * (1.0 - 1.0 / np.maximum(workers, 2.0)) - 1.0,
            sharing=sharing(X, self.sharing_limit_),
            synced=workers > 1,
            placement=np.where(nodes > 1, across, 0),
        )

    def _time(self, theta: np.ndarray, columns: _SyncColumns) -> np.ndarray:
        c0, c1, a_c, b_c, gamma, b, d = theta[: self._SHARED]
        grad = a_c + b_c * columns.local
        sync = theta[self._SHARED :][columns.placement] + b * columns.growth + d * columns.sharing
        sync = np.where(columns.synced, np.maximum(sync, 0.0), 0.0)
        step = (grad**gamma + sync**gamma) ** (1.0 / gamma)
        return np.asarray(c0 + c1 * columns.epochs + columns.steps * step, dtype=float)

    def fit(self, X: np.ndarray, y: np.ndarray) -> SyncSGD:
        y = np.asarray(y, dtype=float)
        synced = X[:, WORKERS] > 1
        self.node_counts_ = _multi_node_counts(X[synced])
        self.sharing_limit_ = _sharing_limit("sync-sgd", X)
        columns = self._prepare(X)
        step = float(np.median(y / columns.steps))
        per_sample = float(np.median(y / columns.steps / columns.local))
        size = self._SHARED + 1 + len(self.node_counts_)
        lower, upper = np.zeros(size), np.full(size, np.inf)
        lower[4], upper[4] = 1.0, 10.0
        growing = len(np.unique(columns.growth[columns.synced])) > 1
        if not growing:
            upper[5] = 1e-12  # b: tied to the least measured intercept (class docstring)
        # without synced runs on one node, one node takes the fewest nodes' intercept (class docstring)
        borrowed = bool(len(self.node_counts_)) and not np.any(synced & (X[:, NODES] == 1))
        measured = self._SHARED + int(borrowed)  # the first intercept the runs measure

        def tied(theta: np.ndarray) -> np.ndarray:
            if growing:
                return theta
            return np.concatenate([theta[:5], [np.min(theta[measured:])], theta[6:]])

        shared = self.sharing_limit_ > 0
        if not shared:
            upper[6] = 1e-12  # d: fixed below
        one_epoch_count = len(np.unique(columns.epochs)) < 2
        if one_epoch_count:
            upper[1] = 1e-12  # c1: fixed below (class docstring)
        runtime = float(np.median(y))
        scale = np.array([runtime, runtime, step, per_sample, 1.0, step, step, step] + [step] * len(self.node_counts_))
        reference = np.zeros(size)
        reference[4] = 1.0
        best = None
        for gamma in self._GAMMA_STARTS:
            slopes = [step / 20 if growing else 0.0, step / 20 if shared else 0.0]  # b, d
            intercepts = [step / 2] + [step] * len(self.node_counts_)  # a_1, a_k
            start = np.array([0.0, 0.0, step / 2, per_sample / 2, gamma, *slopes, *intercepts])
            # run to convergence (``FIT_TOLERANCE``), not to where the rounding left the solver
            fitted = least_squares(
                lambda t: np.concatenate(
                    [
                        self._time(tied(t), columns) / y - 1.0,
                        RIDGE * (t - reference) / scale,
                        [COMPUTE_PULL * (t[3] / per_sample - 1.0)],
                    ]
                ),
                start, bounds=(lower, upper), method="trf", x_scale=scale, ftol=FIT_TOLERANCE,
                xtol=FIT_TOLERANCE, gtol=FIT_TOLERANCE, max_nfev=MAX_EVALUATIONS,
            )  # fmt: skip
            if best is None or fitted.cost < best.cost:
                best = fitted
        assert best is not None  # _GAMMA_STARTS is not empty
        self.theta_ = tied(best.x)
        if borrowed:
            self.theta_[self._SHARED] = self.theta_[measured]
        if one_epoch_count:
            self.theta_[1] = 0.0
        if not shared:
            self.theta_[6] = 0.0
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return _positive(self._time(self.theta_, self._prepare(X)))


def _log_features(X: np.ndarray) -> np.ndarray:
    """Log-scaled columns plus the per-worker batch, for the non-linear learners."""
    return np.column_stack(
        [
            np.log(X[:, WORK]),
            np.log(X[:, EPOCHS]),
            np.log(X[:, WORKERS]),
            np.log(X[:, BATCH]),
            np.log(local_batch(X)),
            np.log(X[:, CPUS]),
            np.log1p(X[:, GPUS]),
            np.log(X[:, NODES]),
            np.log(X[:, WORKERS] / X[:, NODES]),
        ]
    )


class _PerSampleLog(RegressorMixin, BaseEstimator):
    """Learns log(seconds per sample), so that runtime scales with work by construction."""

    def make_regressor(self) -> BaseEstimator:
        raise NotImplementedError

    def fit(self, X: np.ndarray, y: np.ndarray) -> _PerSampleLog:
        self.regressor_ = self.make_regressor().fit(_log_features(X), np.log(np.asarray(y, dtype=float) / X[:, WORK]))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(np.exp(self.regressor_.predict(_log_features(X))) * X[:, WORK], dtype=float)


class GradientBoosting(_PerSampleLog):
    """A tree ensemble: strong in interpolation, flat outside what it has seen.

    Histogram-based boosting: on profile-sized data a third of the time of
    the classic implementation (whose per-tree overhead dominates).
    """

    def make_regressor(self) -> BaseEstimator:
        return HistGradientBoostingRegressor(
            max_iter=BOOSTING_ROUNDS,
            max_depth=BOOSTING_DEPTH,
            learning_rate=BOOSTING_RATE,
            min_samples_leaf=BOOSTING_LEAF,
            early_stopping=False,
            random_state=0,
        )


CANDIDATES: dict[str, type[RegressorMixin]] = {
    "ernest": Ernest,
    "dataparallel": DataParallel,
    "sync-sgd": SyncSGD,
    "gradient-boosting": GradientBoosting,
}
"""The candidates, chosen leave-one-dataset-out (``python -m benchmarks.lodo --grid candidates``): over the 18
datasets (re-run on 2026-12-05 with ``SHARED_LINK``), all four for 17 of the 18 left-out datasets (with
``digits-cnn`` left out the others choose all but ``dataparallel``, by 0.02 point), 11.54 % mean left-out MAPE; mean
over the datasets 11.28 % against 11.43-11.52 % without any one of them (over the 17 before ``ray-mlp``: 11.1 %
against 11.3-11.6 %). Two more used to be: an aMLLibrary-style ridge on the features, their inverses and pairwise
products, and an RBF support-vector regression of the time per sample; left out, the combination's mean MAPE fell
from 11.8 % to 11.2 % (the same grid with them, before the prior inside the profile was re-chosen); a fit takes half
the time. Re-run with the crowded cores priced (2026-12-05, evening): all four for all 18, 10.84 % against
10.98-11.56 %. Over the 28 datasets with MLPerf's first family and ``COMPUTE_PULL``: all but ``ernest`` for 27 left-out
datasets, carried by Eos alone (with it left out the others keep all four), +0.15 +- 0.17 points per dataset: kept.
Re-run on converged fits (``FIT_TOLERANCE``, 2026-12-06): all but ``gradient-boosting`` for 26 of 28 left-out datasets
(10.07 % mean over the datasets against 10.11 %), 10.22 % left out against 10.11 % in place, +0.14 +- 0.08 points per
dataset over the 23 where the choice differs (better on 7, worse on 16): kept."""
PER_SAMPLE: tuple[str, ...] = ("gradient-boosting",)
"""Candidates besides the structural ones whose runtime scales with the work beyond the profile: a tree ensemble of
the time per sample (``_PerSampleLog``) holds its value at the edge of the data there, so more work is more time in
proportion (an SVR's kernel decays to its mean instead)."""
STRUCTURAL: tuple[str, ...] = ("ernest", "dataparallel", "sync-sgd")
"""Candidates whose runtime is a sum of non-negative terms: positive wherever they are asked, far outside the data."""
