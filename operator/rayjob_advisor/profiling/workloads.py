"""Built-in workloads that need no download: data from scikit-learn, models in PyTorch.

Each is a Ray Train per-worker training function taking the harness's
config (``dataset_size``, ``epochs``, ``batch_size`` — global) and training
data-parallel with ``ray.train.torch``: the model wrapped in DDP (gloo on
CPU, NCCL on GPU), the data sharded by a distributed sampler.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import ray.train
import ray.train.torch
import torch
from sklearn.datasets import load_digits, make_classification
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from rayjob_advisor.profiling.timing import mark_first_batch

SEED = 0


def digits_images(size: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 8x8 digits, replicated to ``size`` with shifted, noisy copies."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    rng = np.random.default_rng(SEED)
    index = np.arange(size) % len(images)
    out = images[index].copy()
    copies = np.arange(size) >= len(images)
    shifts = rng.integers(-1, 2, size=(size, 2))
    for dy, dx in itertools.product((-1, 0, 1), repeat=2):
        chosen = copies & (shifts[:, 0] == dy) & (shifts[:, 1] == dx)
        out[chosen] = np.roll(out[chosen], (dy, dx), axis=(1, 2))
    out[copies] += rng.normal(0, 0.05, size=out[copies].shape).astype(np.float32)
    return out[:, None, :, :], digits.target[index].astype(np.int64)


def tabular_rows(size: int) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic tabular classification set (64 features, 32 informative)."""
    X, y = make_classification(n_samples=size, n_features=64, n_informative=32, n_classes=4, random_state=SEED)
    return X.astype(np.float32), y.astype(np.int64)


def digits_cnn_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


def tabular_mlp_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4))


def data_parallel_training(
    data: Callable[[int], tuple[np.ndarray, np.ndarray]], model: Callable[[], nn.Module]
) -> Callable[[dict[str, Any]], None]:
    """A per-worker training function: SGD over ``epochs`` of ``dataset_size`` samples."""

    def train(config: dict[str, Any]) -> None:
        torch.manual_seed(SEED)
        features, labels = data(int(config["dataset_size"]))
        world = ray.train.get_context().get_world_size()
        loader = DataLoader(
            TensorDataset(torch.from_numpy(features), torch.from_numpy(labels)),
            batch_size=max(1, int(config["batch_size"]) // world),
            shuffle=True,
        )
        loader = ray.train.torch.prepare_data_loader(loader)
        network = ray.train.torch.prepare_model(model())
        optimizer = torch.optim.SGD(network.parameters(), lr=0.05, momentum=0.9)
        loss_function = nn.CrossEntropyLoss()
        for epoch in range(int(config["epochs"])):
            if isinstance(loader.sampler, DistributedSampler):  # added by prepare_data_loader when world > 1
                loader.sampler.set_epoch(epoch)
            for x, y in loader:
                mark_first_batch()
                optimizer.zero_grad()
                loss_function(network(x), y).backward()
                optimizer.step()

    return train


WORKLOADS: dict[str, Callable[[dict[str, Any]], None]] = {
    "digits-cnn": data_parallel_training(digits_images, digits_cnn_model),
    "tabular-mlp": data_parallel_training(tabular_rows, tabular_mlp_model),
}
