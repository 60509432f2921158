"""Evaluation splits: which runs are held out, for interpolation and for each kind of extrapolation.

A split is defined on the distinct values of one variable (worker count,
dataset size or per-worker batch), so that every run of a held-out
configuration is held out together — a model is never scored on a
configuration it has seen.

- ``interpolate-*``: every other interior distinct value (the 2nd, 4th, ...
  smallest, never the smallest or the largest) is held out.
- ``extrapolate-*``: the largest quarter of the distinct values (at least
  one) is held out; training keeps only smaller values.
- ``far-extrapolate-*``: the largest value is held out and training keeps
  only values up to a quarter of it (fit on 1-4 GPUs, ask about 16; fit on a
  quarter of the dataset, ask about all of it): the distance of the questions
  users need the advisor most for, and where a model that flatlines or
  collapses outside its data shows it. Defined when at least ``MIN_DISTINCT``
  distinct values are that small (with two, a trend is a line through two
  points and the fold says more of that than of the candidates), and when it
  differs from ``extrapolate-*``.
- ``extrapolate-small-batch``: the smallest quarter of the per-worker batches
  is held out (a job that halves its batch).
- ``kfold``: 5 shuffled folds over runs (seeded), the usual random CV. Unlike
  the others it may score a configuration whose repeats it trained on;
  folds of whole configurations were tried and not taken (leave-one-dataset-
  out, 2026-12-05: the accuracy page, on MLPerf's first family).

Each split asks one kind of question (``QUESTION``): ``inside`` the profile
(interpolation, K-fold), or beyond it in ``workers``, ``size`` or
``batch``; the combination of candidates (``combination``) learns its
weights per kind from the splits that ask it.

A variable with fewer than 3 distinct values has no interpolation or
extrapolation split (there would be nothing to learn a trend from).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from sklearn.model_selection import KFold

MIN_DISTINCT = 3
KFOLD_SPLITS = 5

VARIABLES = ("workers", "dataset_size", "batch_per_worker")
# split name -> (variable, kind)
SPLITS: dict[str, tuple[str, str]] = {
    "interpolate-workers": ("workers", "interpolate"),
    "extrapolate-workers": ("workers", "extrapolate"),
    "interpolate-size": ("dataset_size", "interpolate"),
    "extrapolate-size": ("dataset_size", "extrapolate"),
    "far-extrapolate-workers": ("workers", "far"),
    "far-extrapolate-size": ("dataset_size", "far"),
    "extrapolate-batch": ("batch_per_worker", "extrapolate"),
    "extrapolate-small-batch": ("batch_per_worker", "small"),
}
QUESTIONS = ("inside", "workers", "size", "batch")
_QUESTION_OF_VARIABLE = {"workers": "workers", "dataset_size": "size", "batch_per_worker": "batch"}
FAR_FRACTION = 4
"""``far-extrapolate-*`` trains on values up to 1/FAR_FRACTION of the largest."""


def question(split: str) -> str:
    """The kind of question a split asks (module docstring)."""
    if split == "kfold" or SPLITS[split][1] == "interpolate":
        return "inside"
    return _QUESTION_OF_VARIABLE[SPLITS[split][0]]


def held_out_values(values: np.ndarray, kind: str) -> list[float] | None:
    """The distinct values a split holds out, or None when the split is undefined."""
    distinct = sorted(set(np.round(np.asarray(values, dtype=float), 6).tolist()))
    if len(distinct) < MIN_DISTINCT:
        return None
    quarter = max(1, math.ceil(len(distinct) / 4))
    if kind == "interpolate":
        return distinct[1:-1][::2]
    if kind == "extrapolate":
        return distinct[-quarter:]
    if kind == "small":
        return distinct[:quarter]
    if kind == "far":
        small_enough = [v for v in distinct if v <= distinct[-1] / FAR_FRACTION]
        same_as_extrapolate = small_enough == distinct[:-quarter] and quarter == 1
        return distinct[-1:] if len(small_enough) >= MIN_DISTINCT and not same_as_extrapolate else None
    raise ValueError(f"unknown split kind {kind!r}")


def test_mask(values: np.ndarray, kind: str) -> np.ndarray | None:
    """Boolean mask of the held-out runs, or None when the split is undefined."""
    held = held_out_values(values, kind)
    return None if held is None else np.isin(np.round(np.asarray(values, dtype=float), 6), held)


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


def _why_undefined(variable: str, kind: str, values: np.ndarray) -> str:
    found = len(set(np.round(np.asarray(values, dtype=float), 6).tolist()))
    if kind == "far" and found >= MIN_DISTINCT:
        return (
            f"needs at least {MIN_DISTINCT} distinct {variable} values up to 1/{FAR_FRACTION} of the largest, "
            "other than extrapolate's"
        )
    return f"needs at least {MIN_DISTINCT} distinct {variable} values, found {found}"


def split_folds(variables: Mapping[str, np.ndarray]) -> tuple[dict[str, list[Fold]], dict[str, str]]:
    """(train, test) index pairs of every defined split, and why the others are not defined.

    ``variables``: each run's value of every name in ``VARIABLES``.
    """
    defined: dict[str, list[Fold]] = {}
    skipped: dict[str, str] = {}
    for split, (variable, kind) in SPLITS.items():
        values = variables[variable]
        mask = test_mask(values, kind)
        if mask is None:
            skipped[split] = _why_undefined(variable, kind, values)
        else:
            defined[split] = [(np.flatnonzero(train_mask(values, kind, mask)), np.flatnonzero(mask))]
    folds = kfold_indices(len(variables["workers"]))
    if folds:
        defined["kfold"] = folds
    else:
        skipped["kfold"] = "needs at least 2 runs"
    return defined, skipped
