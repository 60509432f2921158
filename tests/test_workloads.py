"""The built-in workloads' data and models (the Ray Train loop itself runs in test_profiling)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rayjob_advisor.profiling import workloads


@pytest.mark.parametrize(
    ("data", "model", "shape", "classes"),
    [
        (workloads.digits_images, workloads.digits_cnn_model, (1, 8, 8), 10),
        (workloads.tabular_rows, workloads.tabular_mlp_model, (64,), 4),
    ],
)
def test_data_of_any_size_fits_its_model(data, model, shape, classes):
    features, labels = data(5000)
    assert features.shape == (5000, *shape) and features.dtype == np.float32
    assert labels.shape == (5000,) and set(np.unique(labels)) == set(range(classes))
    again, _ = data(5000)
    assert np.array_equal(features, again)  # seeded: every worker builds the same set
    logits = model()(torch.from_numpy(features[:32]))
    assert logits.shape == (32, classes)


def test_digit_copies_are_shifted_noisy_versions_not_duplicates():
    images, labels = workloads.digits_images(2 * 1797)
    originals, copies = images[:1797], images[1797:]
    assert np.array_equal(labels[:1797], labels[1797:])
    assert not np.array_equal(originals, copies)
    assert np.abs(copies - originals).mean() < 0.5
