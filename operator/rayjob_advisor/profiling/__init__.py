"""Profiling: real Ray Train runs over a grid of configurations -> observations.

The only part of the package that imports Ray (and PyTorch). A team profiles
its own job by passing a training function; it calls ``mark_first_batch()``
when its first batch starts, so start-up is measured apart from training.
``rayjob_advisor.profiling.progress.AdvisorProgress``: a Ray Train callback
reporting a running job's progress to the advisor, which refines its ETA.
"""

from rayjob_advisor.profiling.timing import mark_first_batch

__all__ = ["mark_first_batch"]
