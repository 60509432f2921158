"""Timestamps taken inside a Ray Train worker (imports neither Ray nor PyTorch)."""

from __future__ import annotations

import time

_first_batch: float | None = None


def mark_first_batch() -> None:
    """Call when the first training batch starts: what came before is start-up, not training.

    Only the first call of a run counts; a training function that never
    calls it is timed from its entry (its set-up then counts as training).
    """
    global _first_batch
    if _first_batch is None:
        _first_batch = time.time()


def reset() -> None:
    global _first_batch
    _first_batch = None


def first_batch() -> float | None:
    return _first_batch
