"""The noise floor a profile's repeats give: what the accuracy of a model on them is read against."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import profile_noise


def test_the_floor_is_the_error_against_each_configurations_true_mean_not_against_its_other_repeats():
    """Estimated from the other repeats, whose mean is noisy too: unscaled, 3 repeats would overstate it by ~22 %."""
    mean, repeats = 100.0, 100.0 + 10.0 * np.random.default_rng(0).standard_normal((20000, 3))
    floor = np.mean([profile_noise.off_its_repeats(runs) for runs in repeats])
    assert floor == pytest.approx(np.mean(np.abs(repeats - mean) / repeats), rel=0.02)
