"""A stand-in for your own training code, profiled by `rayjob-advisor profile --train-func my_training:train`.

The profiling tutorial (docs/tutorials/profile-your-workload.md) walks through it. A training function for the
profiler is a Ray Train per-worker function: it takes a config with ``dataset_size``, ``epochs`` and
``batch_size`` (the global batch, over all workers), trains data-parallel, and calls ``mark_first_batch()`` when
the first batch starts, so that start-up is measured apart from training.
"""

from __future__ import annotations

from typing import Any

import ray.train
import ray.train.torch
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from rayjob_advisor.profiling import mark_first_batch


def train(config: dict[str, Any]) -> None:
    """Fit a small regression network on ``dataset_size`` synthetic rows, ``epochs`` times."""
    torch.manual_seed(0)
    rows = int(config["dataset_size"])
    features = torch.randn(rows, 32)
    targets = features @ torch.randn(32, 1) + 0.1 * torch.randn(rows, 1)
    world = ray.train.get_context().get_world_size()
    loader = DataLoader(
        TensorDataset(features, targets), batch_size=max(1, int(config["batch_size"]) // world), shuffle=True
    )
    loader = ray.train.torch.prepare_data_loader(loader)
    model = ray.train.torch.prepare_model(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(int(config["epochs"])):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)
        for x, y in loader:
            mark_first_batch()  # only the first call counts
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
