"""Measured configurations anchor the prediction: a per-configuration residual correction.

A model smooths over the profile; where the profile ran the exact
configuration a job asks about (same workers, nodes, per-worker batch, CPUs
and GPUs per worker, epochs: every design column but the dataset size), its
runs say more about that configuration than the curve does. The prediction
there is multiplied by the geometric mean of ``measured / fitted`` over
those runs, shrunk towards 1 as if one more run had matched the model
exactly (one run moves it half-way; many runs almost all the way).

A layout — the same configuration at any per-worker batch — anchors
first, the same way: a placement's quirks (a 16-GPU ring slower than a
15-GPU one on the same nodes) show at every batch size, so a batch the
profile never ran on that placement still gets them. Its factor is part of
the model's own prediction (``Point.predict``'s ``unanchored``); only the
exact configuration counts as measured for the bound.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rayjob_advisor.models import design


def configuration_keys(X: np.ndarray, batch: bool = True) -> np.ndarray:
    """Each row's configuration: every design column but the work, with the batch per worker unless ``batch``
    is False (its layout)."""
    keys = (design.EPOCHS, design.WORKERS, design.CPUS, design.GPUS, design.NODES, design.NODE_CPUS)
    columns = [X[:, column] for column in keys]
    if batch:
        columns.append(design.local_batch(X))
    return np.round(np.column_stack(columns), 6)


def _match(known: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """For each asked key, the index of the same known key (the known ones distinct), or -1."""
    _, inverse = np.unique(np.vstack([known, asked]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    position = np.full(len(known) + len(asked), -1)
    position[inverse[: len(known)]] = np.arange(len(known))
    return np.asarray(position[inverse[len(known) :]], dtype=int)


@dataclasses.dataclass(frozen=True)
class Anchors:
    """Correction factor per measured configuration (``batch``: per layout when False)."""

    keys: np.ndarray
    factors: np.ndarray
    batch: bool = True

    @classmethod
    def none(cls, batch: bool = True) -> Anchors:
        """No measured configuration: every prediction as the model makes it."""
        return cls(np.zeros((0, 6 if batch else 5)), np.zeros(0), batch)

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, fitted: np.ndarray, batch: bool = True) -> Anchors:
        """From the runs ``X, y`` and the model's predictions of them (``fitted``, finite and positive)."""
        keys, inverse = np.unique(configuration_keys(X, batch), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        log_sums = np.bincount(inverse, weights=np.log(y / fitted), minlength=len(keys))
        counts = np.bincount(inverse, minlength=len(keys))
        return cls(keys, np.exp(log_sums / (counts + 1)), batch)

    def apply(self, X: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The anchored predictions, and which runs had a measured configuration."""
        if not len(self.keys):
            return predicted, np.zeros(len(X), dtype=bool)
        position = _match(self.keys, configuration_keys(X, self.batch))
        anchored = position >= 0
        factors = np.where(anchored, self.factors[np.maximum(position, 0)], 1.0)
        return np.asarray(predicted * factors, dtype=float), anchored
