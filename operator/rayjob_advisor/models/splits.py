"""Evaluation splits: which runs are held out, for interpolation and extrapolation.

A split is defined on the distinct values of one variable (worker count or
dataset size), so that every run of a held-out configuration is held out
together — a model is never scored on a configuration it has seen.

- ``interpolate-*``: every other interior distinct value (the 2nd, 4th, ...
  smallest, never the smallest or the largest) is held out.
- ``extrapolate-*``: the largest quarter of the distinct values (at least
  one) is held out; training keeps only smaller values.
- ``far-extrapolate-workers``: the largest worker count is held out and
  training keeps only worker counts up to a quarter of it (fit on 1-4 GPUs,
  ask about 16): where users need the advisor most, and where a model that
  flatlines or collapses outside its data shows it. Defined when at least
  two distinct worker counts are that small.
- ``kfold``: 5 shuffled folds over runs (seeded), the usual random CV.

A variable with fewer than 3 distinct values has no interpolation or
extrapolation split (there would be nothing to learn a trend from).
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.model_selection import KFold

MIN_DISTINCT = 3
KFOLD_SPLITS = 5

# split name -> (variable, kind)
SPLITS: dict[str, tuple[str, str]] = {
    "interpolate-workers": ("workers", "interpolate"),
    "extrapolate-workers": ("workers", "extrapolate"),
    "interpolate-size": ("dataset_size", "interpolate"),
    "extrapolate-size": ("dataset_size", "extrapolate"),
    "far-extrapolate-workers": ("workers", "far"),
}
FAR_FRACTION = 4
"""``far-extrapolate-workers`` trains on worker counts up to 1/FAR_FRACTION of the largest."""


def held_out_values(values: np.ndarray, kind: str) -> list[float] | None:
    """The distinct values a split holds out, or None when the split is undefined."""
    distinct = sorted(set(np.asarray(values).tolist()))
    if len(distinct) < MIN_DISTINCT:
        return None
    if kind == "interpolate":
        return distinct[1:-1][::2]
    if kind == "extrapolate":
        return distinct[-max(1, math.ceil(len(distinct) / 4)) :]
    if kind == "far":
        return distinct[-1:] if sum(v <= distinct[-1] / FAR_FRACTION for v in distinct) >= 2 else None
    raise ValueError(f"unknown split kind {kind!r}")


def test_mask(values: np.ndarray, kind: str) -> np.ndarray | None:
    """Boolean mask of the held-out runs, or None when the split is undefined."""
    held = held_out_values(values, kind)
    return None if held is None else np.isin(values, held)


def train_mask(values: np.ndarray, kind: str, test: np.ndarray) -> np.ndarray:
    """The runs a split trains on: all others, or for ``far`` only the small enough values."""
    if kind == "far":
        return np.asarray(values <= np.max(values) / FAR_FRACTION)
    return ~test


Fold = tuple[np.ndarray, np.ndarray]


def kfold_indices(n: int) -> list[Fold]:
    """Seeded shuffled K-fold (fewer folds for tiny data; none below 2 runs)."""
    if n < 2:
        return []
    return list(KFold(n_splits=min(KFOLD_SPLITS, n), shuffle=True, random_state=0).split(np.arange(n)))


def split_folds(workers: np.ndarray, sizes: np.ndarray) -> tuple[dict[str, list[Fold]], dict[str, str]]:
    """(train, test) index pairs of every defined split, and why the others are not defined."""
    defined: dict[str, list[Fold]] = {}
    skipped: dict[str, str] = {}
    for split, (variable, kind) in SPLITS.items():
        values = workers if variable == "workers" else sizes
        mask = test_mask(values, kind)
        if mask is None:
            found = len(set(np.asarray(values).tolist()))
            skipped[split] = (
                f"needs at least 2 distinct {variable} values up to 1/{FAR_FRACTION} of the largest"
                if kind == "far" and found >= MIN_DISTINCT
                else f"needs at least {MIN_DISTINCT} distinct {variable} values, found {found}"
            )
        else:
            defined[split] = [(np.flatnonzero(train_mask(values, kind, mask)), np.flatnonzero(mask))]
    folds = kfold_indices(len(workers))
    if folds:
        defined["kfold"] = folds
    else:
        skipped["kfold"] = "needs at least 2 runs"
    return defined, skipped
