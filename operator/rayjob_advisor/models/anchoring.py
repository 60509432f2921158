"""Measured configurations anchor the prediction: a per-configuration residual correction.

A model smooths over the profile; where the profile ran the exact
configuration a job asks about (same workers, nodes, per-worker batch, CPUs
and GPUs per worker, epochs: every design column but the dataset size), its
runs say more about that configuration than the curve does. The prediction
there is multiplied by the geometric mean of ``measured / fitted`` over
those runs, shrunk towards 1 as if one more run had matched the model
exactly (one run moves it half-way; many runs almost all the way).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rayjob_advisor.models import design


def configuration_keys(X: np.ndarray) -> np.ndarray:
    """Each row's configuration: every design column but the work, with the batch per worker."""
    local = X[:, design.BATCH] / X[:, design.WORKERS]
    columns = [X[:, design.EPOCHS], X[:, design.WORKERS], X[:, design.CPUS], X[:, design.GPUS], X[:, design.NODES]]
    return np.round(np.column_stack([*columns, local]), 6)


def _match(known: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """For each asked key, the index of the same known key (the known ones distinct), or -1."""
    _, inverse = np.unique(np.vstack([known, asked]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    position = np.full(len(known) + len(asked), -1)
    position[inverse[: len(known)]] = np.arange(len(known))
    return np.asarray(position[inverse[len(known) :]], dtype=int)


@dataclasses.dataclass(frozen=True)
class Anchors:
    """Correction factor per measured configuration."""

    keys: np.ndarray
    factors: np.ndarray

    @classmethod
    def none(cls) -> Anchors:
        """No measured configuration: every prediction as the model makes it."""
        return cls(np.zeros((0, 6)), np.zeros(0))

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, fitted: np.ndarray) -> Anchors:
        """From the runs ``X, y`` and the model's predictions of them (``fitted``, finite and positive)."""
        keys, inverse = np.unique(configuration_keys(X), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        log_sums = np.bincount(inverse, weights=np.log(y / fitted), minlength=len(keys))
        counts = np.bincount(inverse, minlength=len(keys))
        return cls(keys, np.exp(log_sums / (counts + 1)))

    def apply(self, X: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The anchored predictions, and which runs had a measured configuration."""
        if not len(self.keys):
            return predicted, np.zeros(len(X), dtype=bool)
        position = _match(self.keys, configuration_keys(X))
        anchored = position >= 0
        factors = np.where(anchored, self.factors[np.maximum(position, 0)], 1.0)
        return np.asarray(predicted * factors, dtype=float), anchored
