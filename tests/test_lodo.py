"""The leave-one-dataset-out rule that chooses the models' constants (``benchmarks.lodo``)."""

import numpy as np
import pytest

from benchmarks import datasets, lodo


@pytest.mark.parametrize("grid", sorted(lodo.GRIDS))
def test_every_constant_in_the_code_is_a_setting_of_its_grid(grid: str):
    """A constant changed without its grid would be cited nowhere: the grid must hold what the code holds."""
    assert sum(lodo.in_place(setting) for setting in lodo.GRIDS[grid]) == 1


def test_a_change_needs_a_win_beyond_the_noise_of_the_datasets():
    """Per dataset, in place (column 0) against the other setting (column 1): a mean gain carried by a few datasets
    keeps the setting in place; a gain on every dataset changes it."""
    in_place = np.array([0.10, 0.12, 0.09, 0.11, 0.20, 0.15])
    carried = np.column_stack([in_place, in_place + np.array([-0.03, 0.004, 0.004, 0.004, 0.004, 0.004])])
    gain, error, change = lodo.decide(carried, [1] * 6, 0)
    assert gain.mean() < 0 and not change
    everywhere = np.column_stack([in_place, in_place - 0.002])
    gain, error, change = lodo.decide(everywhere + np.array([[0, 0.0002 * i] for i in range(6)]), [1] * 6, 0)
    assert gain.mean() < -2 * error and change


def test_the_setting_in_place_is_kept_when_chosen():
    loss = np.array([[0.1, 0.2], [0.3, 0.1], [0.2, 0.2]])
    gain, _, change = lodo.decide(loss, [0, 0, 0], 0)
    assert not gain.any() and not change


def test_datasets_where_a_change_does_not_act_are_left_out_of_the_test():
    """A gain on the 3 datasets a change acts on, nothing on 15 others: the zeros are no evidence against it (with
    them it could never pass, whatever it gained); a loss on one of the 3 keeps the setting in place."""
    in_place = np.full(18, 0.15)
    acting = in_place.copy()
    acting[:3] -= [0.014, 0.037, 0.028]
    gain, _, change = lodo.decide(np.column_stack([in_place, acting]), [1] * 18, 0)
    assert np.count_nonzero(gain) == 3 and change
    acting[0] += 0.05
    assert not lodo.decide(np.column_stack([in_place, acting]), [1] * 18, 0)[2]


def test_the_own_sweeps_measured_again_choose_no_setting():
    """Measured after every setting was chosen: it may only be reported, or it is no longer data nobody tuned on."""
    held_out = set(datasets.OWN_RAY_HELD_OUT)
    assert held_out and not held_out & set(datasets.sweeps())  # the rest: test_accuracy.py, with the other families
