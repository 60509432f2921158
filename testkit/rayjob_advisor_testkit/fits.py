"""Counting estimator fits: the cost of model selection, measured rather than timed."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import numpy as np

from rayjob_advisor.models.estimators import CANDIDATES


@contextlib.contextmanager
def counting_fits() -> Iterator[collections.Counter[str]]:
    """Count the fits of each candidate while the block runs."""
    counts: collections.Counter[str] = collections.Counter()

    def counted(name: str, fit: Callable[..., Any]) -> Callable[..., Any]:
        def fit_and_count(self: Any, X: np.ndarray, y: np.ndarray) -> Any:
            counts[name] += 1
            return fit(self, X, y)

        return fit_and_count

    with contextlib.ExitStack() as stack:
        for name, estimator in CANDIDATES.items():
            stack.enter_context(mock.patch.object(estimator, "fit", counted(name, estimator.fit)))
        yield counts
