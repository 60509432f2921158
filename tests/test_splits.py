"""Which runs each evaluation split holds out."""

from __future__ import annotations

import numpy as np
import pytest

from rayjob_advisor.models import splits


def held(values, kind):
    mask = splits.test_mask(np.array(values, dtype=float), kind)
    return None if mask is None else sorted(set(np.array(values)[mask].tolist()))


def test_interpolation_holds_out_every_other_interior_value():
    assert held([1, 2, 3, 4, 6, 8], "interpolate") == [2, 4]
    assert held([1, 2, 4, 8, 16], "interpolate") == [2, 8]
    assert held([1, 2, 3], "interpolate") == [2]


def test_extrapolation_holds_out_the_largest_quarter():
    assert held([1, 2, 3, 4, 6, 8], "extrapolate") == [6, 8]
    assert held(list(range(1, 17)), "extrapolate") == [13, 14, 15, 16]
    assert held([1, 2, 3], "extrapolate") == [3]


def test_every_run_of_a_held_out_value_is_held_out_together():
    values = np.array([1, 1, 2, 2, 3, 3, 4, 4], dtype=float)
    mask = splits.test_mask(values, "extrapolate")
    assert mask.tolist() == [False] * 6 + [True] * 2


def variables(workers, sizes, batches=None):
    """What ``split_folds`` cuts on; one per-worker batch unless given."""
    workers = np.asarray(workers, dtype=float)
    batches = np.full(len(workers), 32.0) if batches is None else np.asarray(batches, dtype=float)
    return {"workers": workers, "dataset_size": np.asarray(sizes, dtype=float), "batch_per_worker": batches}


def test_splits_need_three_distinct_values():
    assert splits.test_mask(np.array([1.0, 1.0, 2.0, 2.0]), "interpolate") is None
    defined, skipped = splits.split_folds(variables([1, 2, 1, 2], [10, 20, 30, 40]))
    assert set(defined) == {"interpolate-size", "extrapolate-size", "kfold"}
    assert skipped == {
        "interpolate-workers": "needs at least 3 distinct workers values, found 2",
        "extrapolate-workers": "needs at least 3 distinct workers values, found 2",
        "far-extrapolate-workers": "needs at least 3 distinct workers values, found 2",
        "far-extrapolate-size": "needs at least 3 distinct dataset_size values up to 1/4 of the largest, other than "
        "extrapolate's",
        "extrapolate-batch": "needs at least 3 distinct batch_per_worker values, found 1",
        "extrapolate-small-batch": "needs at least 3 distinct batch_per_worker values, found 1",
    }


def test_split_folds_partition_the_runs():
    workers = np.array([1, 2, 4, 8] * 5, dtype=float)
    sizes = np.repeat([100.0, 200.0, 400.0, 800.0, 1600.0], 4)
    defined, _ = splits.split_folds(variables(workers, sizes))
    ((train, test),) = defined["extrapolate-workers"]
    assert set(workers[test]) == {8.0} and 8.0 not in set(workers[train])
    ((train, test),) = defined["extrapolate-size"]
    assert set(sizes[test]) == {1600.0, 800.0}
    folds = defined["kfold"]
    assert len(folds) == 5
    assert sorted(np.concatenate([t for _, t in folds]).tolist()) == list(range(20))


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown split kind"):
        splits.held_out_values(np.array([1, 2, 3]), "sideways")


def test_far_extrapolation_fits_on_a_quarter_of_the_most_workers_and_asks_about_the_most():
    workers = np.array([1, 2, 3, 4, 6, 8, 12, 16] * 2, dtype=float)
    defined, _ = splits.split_folds(variables(workers, np.repeat([100.0, 200.0], 8)))
    ((train, test),) = defined["far-extrapolate-workers"]
    assert set(workers[train]) == {1.0, 2.0, 3.0, 4.0} and set(workers[test]) == {16.0}
    _, skipped = splits.split_folds(variables([1, 2, 3, 4, 8], [1, 2, 3, 4, 5]))
    assert skipped["far-extrapolate-workers"] == (
        "needs at least 3 distinct workers values up to 1/4 of the largest, other than extrapolate's"
    )  # 1 and 2 only: a line through two points says more of the fold than of the candidates


def test_each_split_asks_one_kind_of_question():
    assert splits.question("kfold") == splits.question("interpolate-workers") == "inside"
    assert splits.question("far-extrapolate-workers") == splits.question("extrapolate-workers") == "workers"
    assert splits.question("far-extrapolate-size") == "size"
    assert splits.question("extrapolate-batch") == splits.question("extrapolate-small-batch") == "batch"


def test_batch_splits_hold_out_the_largest_and_the_smallest_quarter_of_the_per_worker_batches():
    batches = np.array([8, 16, 32, 64, 128, 256, 512, 1024] * 2, dtype=float)
    defined, _ = splits.split_folds(variables(np.ones(16), np.full(16, 100.0), batches))
    ((train, test),) = defined["extrapolate-batch"]
    assert set(batches[test]) == {512.0, 1024.0} and max(batches[train]) == 256.0
    ((train, test),) = defined["extrapolate-small-batch"]
    assert set(batches[test]) == {8.0, 16.0} and min(batches[train]) == 32.0
