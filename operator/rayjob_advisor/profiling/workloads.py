"""Built-in workloads that need no download: data from scikit-learn, models in PyTorch.

Each is a Ray Train per-worker training function taking the harness's
config (``dataset_size``, ``epochs``, ``batch_size`` — global) and training
data-parallel with ``ray.train.torch``: the model wrapped in DDP (gloo on
CPU, NCCL on GPU), the data sharded by a distributed sampler. The digits CNN
and the training loop live in ``data_parallel`` (also the example RayJobs'
entrypoint); each batch marks the first one, so start-up is measured apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from torch import nn

from rayjob_advisor.profiling.data_parallel import SEED, data_parallel_training, digits_cnn_model, digits_images
from rayjob_advisor.profiling.timing import mark_first_batch


def tabular_rows(size: int) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic tabular classification set (64 features, 32 informative)."""
    X, y = make_classification(n_samples=size, n_features=64, n_informative=32, n_classes=4, random_state=SEED)
    return X.astype(np.float32), y.astype(np.int64)


def tabular_mlp_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4))


WORKLOADS: dict[str, Callable[[dict[str, Any]], None]] = {
    "digits-cnn": data_parallel_training(digits_images, digits_cnn_model, mark_first_batch),
    "tabular-mlp": data_parallel_training(tabular_rows, tabular_mlp_model, mark_first_batch),
}
