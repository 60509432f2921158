"""Candidates combined per kind of question: what a job is predicted with.

No single candidate wins everywhere: a tree ensemble interpolates best and
flatlines beyond the profile, Ernest extrapolates workers where it has no
batch term, the synchronous data-parallel structures (``sync-sgd``,
``dataparallel``) follow a step's physics. So the advisor does not bet a
job on one of them. A question is of one of four kinds (``splits.QUESTIONS``):
``inside`` the profile, or beyond it in ``workers``, ``size`` (dataset size
x epochs) or per-worker ``batch`` (``design.Reach``); for each kind, the candidates
are weighed by non-negative stacking on the held-out predictions of the
splits that ask it (``splits.question``: fit on up to a quarter of the most
workers and ask about the most, ...), the weights summing to one, so the
combination is never outside the range of its members. A question just
beyond the profile is still mostly one inside it: the kinds share a row by
its distance (``memberships``).

Cross-validation cannot see what it has no runs for: with a dozen runs, or
runs at one or two worker counts, the folds of a kind are few or missing.
The stacking weights are therefore shrunk towards a prior, the structure
of a synchronous data-parallel step (``PRIOR``), as if it had won
``PRIOR_RUNS`` more held-out runs; a kind without any split gets the prior
alone. For more work than profiled, the prior is the inside weights of the
candidates that scale with the work by construction (``prior_of``): the
time per sample is a question inside the profile. Beyond the profile only the physically shaped candidates
(``estimators.STRUCTURAL``) take part (``answers``): a curve fitted inside
the range is no evidence outside it — except, for more work, the learners of
the time per sample (``estimators.PER_SAMPLE``), whose runtime scales with
the work by construction.

A candidate whose raw prediction of a row collapses (not finite, not
positive or under the floor: ``predictor``) is left out of that row, its
weight shared among the others; a row where every member collapses gets the
prior's candidates, floored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import nnls
from sklearn.base import RegressorMixin

from rayjob_advisor.models import design
from rayjob_advisor.models.design import Reach
from rayjob_advisor.models.estimators import PER_SAMPLE, STRUCTURAL
from rayjob_advisor.models.splits import MIN_DISTINCT, QUESTIONS

PRIOR: dict[str, float] = {"sync-sgd": 1.0}
PRIOR_RUNS: dict[str, float] = {"inside": 10.0, **dict.fromkeys(QUESTIONS[1:], 100.0)}
"""The weights a kind of question gets without evidence, the synchronous data-parallel step, and how many held-out
runs they count as, per kind of question. Chosen leave-one-dataset-out (``python -m benchmarks.lodo --grid prior``)
among the priors ``sync-sgd`` and ``sync-sgd`` + ``dataparallel`` halved, and 0, 10 or 100 runs inside the profile
x 30, 100 or infinitely many beyond it. Over the 18 datasets (re-run on 2026-12-05 with the step models pricing the
workers sharing a node, ``estimators.SHARED_LINK``): ``sync-sgd``, 10 inside and 100 beyond for all 18 left-out
datasets, 11.28 % mean left-out MAPE; mean over the datasets 11.28 % against 11.41 % with none or 100 inside, 11.53 %
for the prior alone beyond and 11.90 % at best for the halved prior. Inside the profile the folds ask the question
itself; beyond it, stacking on extrapolation folds alone is worse than the step's structure, as their distance is not
the question's. Against none inside, 10 would not pass ``benchmarks.lodo``'s paired rule of 2026-12-05 (-0.13 +-
0.08 points, better on 9 datasets and worse on 6); kept as the setting in place. Re-run on 2026-12-05 (evening) with
CPU workers' crowded cores priced
(``estimators.CROWDED_CORES``): the same for all 18, 10.84 % (docs/accuracy.md). Over the 28 datasets with
MLPerf's first family and ``estimators.COMPUTE_PULL``: 100 inside for 27 left-out datasets, carried by Eos alone
(with it left out the others keep 10), +0.04 +- 0.28 points per dataset: kept. Re-run with the kinds beyond the
profile pooled (``POOL_BEYOND``, 2026-12-06, 17 minutes beside another grid): ``sync-sgd``, 10 inside and 100 beyond
for 27 of 28 left-out datasets (``ray-mlp`` left out: 100 inside), 9.63 % mean over the datasets; no longer Eos's
choice: kept."""
FULL_DISTANCE = math.log(1.5)
"""How far beyond the profile (``design.Reach.distance``: 1.5x the most profiled workers is log 1.5) a question is
its kind's alone; nearer, the kind ``inside`` answers the rest (``memberships``). Chosen leave-one-dataset-out
(``python -m benchmarks.lodo --grid distance``) among 0, log 1.5, log 2 and log 4, with ``PRIOR_RUNS`` re-chosen
beside it. Over the 18 datasets (re-run on 2026-12-05 with the step models pricing the workers sharing a node), log
4 with the prior alone beyond the profile is chosen for 17 of the 18 left-out datasets (11.18 % mean over the
datasets, against 11.28 % here), but not with ``ray-mlp`` left out: its 2.6-point gain carries the mean, and 11 of
the 15 GPU datasets are worse with it. Choosing so gives 11.32 % mean left-out MAPE, against 11.28 % for keeping log
1.5 and 100 runs beyond: kept (``benchmarks.lodo``'s rule for a setting in place). (2026-12-04: log 1.5 for 14 of
18, 11.91 % left out.) Re-run with the crowded cores
priced (2026-12-05, evening): log 1.5 for 9 left-out datasets, log 4 with the prior alone beyond for 9; choosing so
gives 11.12 % left out against 10.84 %: kept. Over the 28 datasets with MLPerf's first family and
``estimators.COMPUTE_PULL`` (2026-12-05, ``RIDGE`` still 1e-5): log 2 with 100 runs inside and beyond for 22 left-out
datasets (log 4 with the prior alone beyond for 4), 86.77 % left out against 86.58 %; per dataset +0.19 +- 0.29 points
(better on 11, worse on 16): kept. Re-run at ``RIDGE`` 1e-4 (2026-12-06, 9 minutes): log 1.5 with 100 runs inside
and beyond for 26 left-out datasets (log 2 for Pollux ncf and yolov3), 21.94 % left out against 79.71 % in place,
carried by Eos (1,960 -> 344 %; the 100 runs inside): per dataset -64.7 +- 64.6 points (better on 12, worse on 13;
without Eos -0.08 points, the CPU sweeps 0.4-3.2 points worse): kept. Re-run with the kinds beyond the profile
pooled (``POOL_BEYOND``, 2026-12-06): log 1.5 with 10 runs inside and 100 beyond for 25 of 28 left-out datasets
(``ray-mlp``: 100 inside; Pollux yolov3: log 2; BERT on Dell's PCIe A100s: log 4, the prior alone beyond), 9.87 %
left out against 9.63 % in place; per dataset +2.24 +- 0.82 points over the 3 where the choice differs: kept.
Re-run on converged fits (``estimators.FIT_TOLERANCE``, 2026-12-06, 10 minutes): log 2 with 10 and 100 for 18 of 28
left-out datasets (it ties log 1.5 over the 28, 10.11 %), log 1.5 for 8, log 4 with the prior alone beyond for 2;
10.42 % left out against 10.11 % in place, per dataset +0.61 +- 0.29 points over the 14 where it differs (better
on 5, worse on 9): kept."""
POOL_BEYOND = True
"""Whether a row beyond the profile in several kinds at once pools their weights geometrically (``pooled_beyond``)
instead of adding them in its shares. ResNet-50 on NVIDIA's Eos, 8-64 H100s asked about 2,528, is beyond in workers
(40x), work (1.9x) and per-GPU batch (1/3) at once; added, a third of the row is the question of more work, whose
weights lean on ``ernest``'s fit inside the profile (0.47), and ``ernest``, 147x the truth there, carries the row at a
weight of 0.16 (24x too slow), though the kind of more workers gives it none; pooled, 2.4 % off. Chosen
leave-one-dataset-out (``python -m benchmarks.lodo --grid pooling``, 2026-12-06): pooled for all 28 left-out
datasets, 9.63 % mean over them against 79.71 %; it acts on 14 (Eos 1,960 -> 2.3 %, BERT on Dell's GB200s 4.09 ->
5.59 %, the others within 4.4 points). ``benchmarks.lodo``'s paired rule keeps it out (-140 +- 140 points per
dataset: one dataset's gain reads as noise); taken against that verdict by a decision recorded in
docs/accuracy.md ("Kinds of extrapolation pooled"), where the held-out families' figures are."""
STRUCTURAL_IN_GAPS = True
"""Whether, between profiled worker counts too few for a fold to measure interpolation (fewer than
``splits.MIN_DISTINCT``), only the physically shaped candidates answer, as beyond the profile (``answers``), in
proportion ``min(1, gap / FULL_DISTANCE)`` of the log ratio to the nearest profiled count (``design.Reach.gap``).
With runs at two worker counts the kind ``inside`` learns from K-fold alone, whose held-out runs repeat
configurations the others measured, and there a tree ensemble of the time per sample wins; between the counts it
holds the nearer count's time per sample, a step no fold saw (MLPerf's BERT on Eos, runs at 8 and 3,472 H100s,
asked about 64: 7x too slow, at a weight of 0.72). Chosen leave-one-dataset-out (``python -m benchmarks.lodo --grid
gaps``, 2026-12-06, with the question ``workers-two-counts`` among the 28 datasets'): for all 28 left-out datasets,
10.06 % mean over them against 10.18 %; ``benchmarks.lodo``'s paired rule keeps it out (-0.344 +- 0.319 points per
dataset, better on 5, worse on 5); taken against that verdict by a decision recorded in docs/accuracy.md ("Between
two profiled worker counts"), where held-out rows nobody had looked at confirm it (BERT on NVIDIA's DGX A100s 764 ->
3 %)."""
_SUM_TO_ONE = 1e3
"""Weight of the row that makes the stacking weights sum to one, against rows of relative error ~1."""


def memberships(beyond: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Per row, how much each kind of question (``QUESTIONS``) answers it (n x 4, rows summing to one).

    ``beyond``: n x 3, whether the row lies beyond the profile in workers, size and batch (``design.Reach``);
    ``distance``: how far. A row that far beyond is answered by its kinds in proportion
    ``min(1, distance / FULL_DISTANCE)``, shared equally among them, and by ``inside`` for the rest: a worker
    count just past the most profiled is still nearly a question inside the profile.
    """
    share = np.minimum(1.0, distance / FULL_DISTANCE) * np.any(beyond, axis=1)
    count = np.maximum(beyond.sum(axis=1), 1)
    return np.column_stack([1.0 - share, beyond * (share / count)[:, None]])


def stack(predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Non-negative weights, summing to one, of the columns of ``predicted`` that best fit ``actual`` in relative
    squared error."""
    relative = predicted / actual[:, None]
    rows = np.vstack([relative, np.full(relative.shape[1], _SUM_TO_ONE)])
    target = np.append(np.ones(len(actual)), _SUM_TO_ONE)
    weights, _ = nnls(rows, target, maxiter=100 * relative.shape[1])
    total = float(np.sum(weights))
    return np.asarray(weights / total, dtype=float) if total > 0 else np.full(relative.shape[1], 1 / relative.shape[1])


def prior_weights(names: Sequence[str]) -> np.ndarray:
    """``PRIOR`` over ``names`` (equal weights among the extrapolating ones present where it names none)."""
    weights = np.array([PRIOR.get(name, 0.0) for name in names], dtype=float)
    if not weights.sum():
        weights = np.array([name in STRUCTURAL for name in names], dtype=float)
    return weights / weights.sum() if weights.sum() else np.full(len(names), 1 / len(names))


def prior_of(names: Sequence[str], kind: str, inside: np.ndarray) -> np.ndarray:
    """What a kind of question leans on without evidence (module docstring): ``PRIOR``; but more work is asked
    of the candidates that scale with it by construction, so there the question is the time per sample, asked
    inside the profile: the ``inside`` weights of those candidates, where they have any."""
    if kind == "size":
        scaling = inside * np.array([answers(name, kind) for name in names])
        if scaling.sum() > 0:
            return np.asarray(scaling / scaling.sum(), dtype=float)
    return prior_weights(names)


def learn_weights(
    names: Sequence[str],
    kind: str,
    predicted: np.ndarray,
    actual: np.ndarray,
    usable: np.ndarray,
    prior: np.ndarray,
) -> np.ndarray:
    """The weights of one kind of question from held-out runs: stacked on the rows every allowed candidate
    predicted without collapsing, shrunk towards the ``prior`` (``prior_of``) by ``PRIOR_RUNS`` (module
    docstring).

    ``predicted``: n x len(names) held-out predictions; ``usable``: the same shape, False where one collapsed.
    """
    allowed = np.array([answers(name, kind) for name in names])
    rows = np.all(usable[:, allowed], axis=1)
    if not np.any(allowed) or not np.any(rows):
        return prior
    stacked = np.zeros(len(names))
    stacked[allowed] = stack(predicted[np.ix_(rows, allowed)], actual[rows])
    n, strength = float(np.sum(rows)), PRIOR_RUNS[kind]
    return np.asarray((n * stacked + strength * prior) / (n + strength), dtype=float)


def answers(name: str, kind: str) -> bool:
    """Whether a candidate takes part in a kind of question (module docstring): every one inside the profile,
    the structural ones beyond it, and for more work also those that learn the time per sample."""
    return kind == "inside" or name in STRUCTURAL or (kind == "size" and name in PER_SAMPLE)


def pooled_beyond(weights: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Per row, the weights of the kinds beyond the profile (``weights``: 3 x candidates) pooled geometrically in
    their relative ``shares`` (n x 3, rows summing to one), renormalised: a member answers a row beyond in several
    kinds as far as it answers each, so one no kind of the row's gives any weight takes no part (``POOL_BEYOND``).
    A row beyond in one kind gets that kind's weights; one where no member answers every kind, their weighted sum."""
    with np.errstate(divide="ignore", invalid="ignore"):  # a weight of 0 in a kind of no share counts for nothing
        exponent = np.where(shares[:, :, None] > 0, shares[:, :, None] * np.log(weights)[None], 0.0)
    pooled = np.exp(np.sum(exponent, axis=1))
    mass = pooled.sum(axis=1, keepdims=True)
    return np.asarray(np.where(mass > 0, pooled / np.where(mass > 0, mass, 1.0), shares @ weights), dtype=float)


def row_weights(weights: np.ndarray, shares: np.ndarray, usable: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Per row, its kinds' weights (``weights``: 4 x candidates) in their ``shares`` (``memberships``), the kinds
    beyond the profile pooled (``pooled_beyond``), without the candidates that collapsed on it (``usable`` False),
    renormalised; the prior's where none is left."""
    per_row = shares @ weights
    several = np.sum(shares[:, 1:] > 0, axis=1) > 1  # a row beyond in one kind pools to that kind's weights
    if POOL_BEYOND and np.any(several):
        inside, beyond = shares[several, :1], shares[several, 1:]
        part = beyond.sum(axis=1, keepdims=True)
        per_row[several] = inside * weights[:1] + part * pooled_beyond(weights[1:], beyond / part)
    per_row = np.where(usable, per_row, 0.0)
    totals = per_row.sum(axis=1, keepdims=True)
    return np.asarray(np.where(totals > 0, per_row / np.where(totals > 0, totals, 1.0), prior), dtype=float)


def shaped_in_gaps(weights: np.ndarray, names: Sequence[str], reach: Reach, X: np.ndarray) -> np.ndarray:
    """Per row, its weights (``row_weights``) with the members that are not physically shaped weighed down by how far
    its worker count lies from profiled ones no fold measured between (``STRUCTURAL_IN_GAPS``; a count below the
    fewest too), renormalised. Beyond the profile ``answers`` decides the same per kind; here the ``inside`` weights
    are kept among the shaped members (asked of the kind ``workers``, the prior alone answered, worse on the CPU
    sweeps)."""
    if not STRUCTURAL_IN_GAPS or len(reach.worker_counts) >= MIN_DISTINCT:
        return weights
    unshaped = np.array([name not in STRUCTURAL for name in names])
    dropped = np.minimum(1.0, reach.gap(X) / FULL_DISTANCE)[:, None] * unshaped
    shaped = weights * (1.0 - dropped)
    total = shaped.sum(axis=1, keepdims=True)
    return np.asarray(np.where(total > 0, shaped / np.where(total > 0, total, 1.0), weights), dtype=float)


def spread(predicted: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row, the weighted standard deviation of the members' predictions (``predicted``, n x members) in log
    space around their weighted mean: how much the combination is a guess there (``calibration`` widens by it)."""
    combined = np.sum(weights * predicted, axis=1, keepdims=True)
    return np.asarray(np.sqrt(np.sum(weights * np.log(predicted / combined) ** 2, axis=1)), dtype=float)


class Combined:
    """The candidates' fitted estimators weighed per kind of question (module docstring).

    ``weights``: one row of weights per kind in ``QUESTIONS`` over ``names``; ``rate``: the floor's
    seconds per sample (``predictor.marginal_rate``) below which a member has collapsed.
    """

    def __init__(
        self, estimators: Mapping[str, RegressorMixin], weights: np.ndarray, reach: Reach, rate: float
    ) -> None:
        self.names = tuple(estimators)
        self.estimators = dict(estimators)
        self.weights = weights
        self.reach = reach
        self.rate = rate

    def fit(self, X: np.ndarray, y: np.ndarray) -> Combined:
        """Already fitted: the members were fitted on all runs and the weights learned from their held-out runs."""
        return self

    def _weighed(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each member's floored prediction of each row, and each row's weights of the members. A member no row's
        kinds weigh (nor the prior) is not asked: an admission waits for every estimator asked."""
        shares = memberships(self.reach.beyond(X), self.reach.distance(X))
        prior = prior_weights(self.names)
        asked = np.any(shares @ self.weights > 0, axis=0) | (prior > 0)
        raw = np.column_stack(
            [
                np.asarray(self.estimators[name].predict(X), dtype=float) if ask else np.full(len(X), np.nan)
                for name, ask in zip(self.names, asked, strict=True)
            ]
        )
        floor = design.perfectly_scaled(X, self.rate)
        usable = np.isfinite(raw) & (raw > 0) & (raw >= floor[:, None])
        weights = shaped_in_gaps(row_weights(self.weights, shares, usable, prior), self.names, self.reach, X)
        return np.where(usable, raw, floor[:, None]), weights

    def predict(self, X: np.ndarray) -> np.ndarray:
        predicted, weights = self._weighed(X)
        return np.asarray(np.sum(weights * predicted, axis=1), dtype=float)

    def predict_spread(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``predict``, and per row how much the members disagree on it (``spread``), from one pass of them."""
        predicted, weights = self._weighed(X)
        return np.asarray(np.sum(weights * predicted, axis=1), dtype=float), spread(predicted, weights)

    def members(self, X: np.ndarray) -> list[dict[str, float]]:
        """Per row, the members that answer it and their weights (none of those that collapsed on it)."""
        _, weights = self._weighed(X)
        return [{name: float(w) for name, w in zip(self.names, row, strict=True) if w > 0} for row in weights]

    def describe(self) -> dict[str, dict[str, float]]:
        """The weights per kind of question, the members with none left out (for ``evaluate`` and ``fit``)."""
        return {
            kind: {name: round(float(w), 3) for name, w in zip(self.names, row, strict=True) if w > 0}
            for kind, row in zip(QUESTIONS, self.weights, strict=True)
        }
