"""Data-parallel Ray Train training and the digits CNN, in one file that imports nothing of rayjob_advisor.

So that this very file is also the entrypoint of the digits example RayJobs (``examples/``): it ships to the
cluster in a ConfigMap and runs in the ``rayproject/ray`` image with PyTorch (CPU) and scikit-learn from the
job's runtime environment — the workload the shipped ``digits-cnn`` profile was measured with, data-parallel over
``NUM_WORKERS`` workers (the variable ``enforce`` rewrites)::

    kubectl create configmap train-digits --from-file=train_digits.py=operator/rayjob_advisor/profiling/data_parallel.py
    python /home/ray/samples/train_digits.py --dataset-size 64000 --epochs 5 --batch-size 256
"""

from __future__ import annotations

import argparse
import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import ray.train
import ray.train.torch
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

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


def digits_cnn_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


def _nothing() -> None:
    """No hook on each batch."""


def data_parallel_training(
    data: Callable[[int], tuple[np.ndarray, np.ndarray]],
    model: Callable[[], nn.Module],
    on_batch: Callable[[], None] = _nothing,
) -> Callable[[dict[str, Any]], None]:
    """A per-worker training function: SGD over ``epochs`` of ``dataset_size`` samples; ``on_batch`` before each."""

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
                on_batch()
                optimizer.zero_grad()
                loss_function(network(x), y).backward()
                optimizer.step()

    return train


def main(argv: list[str] | None = None) -> None:
    """Train the digits CNN on ``NUM_WORKERS`` Ray Train workers (the example RayJobs' entrypoint)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--dataset-size", type=int, default=64000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256, help="global batch size")
    args = parser.parse_args(argv)
    trainer = ray.train.torch.TorchTrainer(
        data_parallel_training(digits_images, digits_cnn_model),
        train_loop_config={"dataset_size": args.dataset_size, "epochs": args.epochs, "batch_size": args.batch_size},
        scaling_config=ray.train.ScalingConfig(num_workers=int(os.environ.get("NUM_WORKERS", "2"))),
    )
    trainer.fit()


if __name__ == "__main__":
    main()
