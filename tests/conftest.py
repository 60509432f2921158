"""Shared fixtures: paths to ../shared, the RayJob CRD schema, synthetic profiles, fit counting."""

from __future__ import annotations

import collections
import contextlib
import copy
import math
import pathlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

import jsonschema
import numpy as np
import pytest
import yaml

from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.observations import Observation

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SAMPLES = SHARED / "kuberay" / "samples"
POLLUX = SHARED / "datasets" / "pollux"


def _rayjob_validator() -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((SHARED / "kuberay" / "crds" / "ray.io_rayjobs.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


RAYJOB_SCHEMA = _rayjob_validator()


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """Structural defaulting, as the API server does before validating (returns a copy)."""
    if isinstance(value, dict) and "properties" in schema:
        value = {k: apply_defaults(v, schema["properties"].get(k, {})) for k, v in value.items()}
        for key, prop in schema["properties"].items():
            if key not in value and "default" in prop:
                value[key] = copy.deepcopy(prop["default"])
    elif isinstance(value, list) and "items" in schema:
        value = [apply_defaults(v, schema["items"]) for v in value]
    return value


def assert_valid_rayjob(rayjob: dict[str, Any]) -> None:
    """Fail with every schema violation of a RayJob (after defaulting) against the real KubeRay CRD."""
    defaulted = apply_defaults(rayjob, RAYJOB_SCHEMA.schema)
    errors = sorted(RAYJOB_SCHEMA.iter_errors(defaulted), key=str)
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def sample_rayjobs() -> list[tuple[str, dict[str, Any]]]:
    """Every RayJob document of the KubeRay samples, by file name."""
    found = []
    for path in sorted(SAMPLES.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "RayJob":
                found.append((str(path.relative_to(SAMPLES)), document))
    return found


def make_rayjob(
    *,
    annotations: dict[str, str] | None = None,
    groups: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A minimal valid RayJob with the given worker groups; validated before it is returned."""
    worker = {
        "groupName": "workers",
        "replicas": 2,
        "minReplicas": 1,
        "maxReplicas": 8,
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {"name": "ray-worker", "image": "rayproject/ray:2.52.0", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}
                ]
            }
        },
    }
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job", "namespace": "default", "annotations": dict(annotations or {})},
        "spec": {
            "entrypoint": "python train.py",
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}},
                },
                "workerGroupSpecs": groups if groups is not None else [worker],
            },
            **spec,
        },
    }
    assert_valid_rayjob(rayjob)
    return rayjob


def worker_group(name: str = "workers", resources: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    group = copy.deepcopy(make_rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"][0])
    group["groupName"] = name
    if resources is not None:
        group["template"]["spec"]["containers"][0]["resources"] = resources
    group.update(fields)
    return group


def sync_sgd_time(size: int, workers: int, batch: int, nodes: int) -> float:
    """A data-parallel runtime law for synthetic profiles: compute plus all-reduce per step."""
    steps = math.ceil(size / batch)
    compute = 0.02 + 0.004 * batch / workers
    sync = 0.0 if workers == 1 else 0.01 + 0.002 * (workers - 1) + (0.03 if nodes > 1 else 0.0)
    return 3.0 + steps * (compute + sync)


def synthetic_observations(noise: float = 0.03, seed: int = 0, repeats: int = 1) -> list[Observation]:
    """A profile over 1-16 workers packed 4 to a node, 4 dataset sizes, 2 batch sizes, with noise."""
    rng = np.random.default_rng(seed)
    runs = []
    for workers in (1, 2, 3, 4, 6, 8, 12, 16):
        for size in (2000, 4000, 8000, 16000):
            for batch in (64, 128):
                nodes = math.ceil(workers / 4)
                for _ in range(repeats):
                    seconds = sync_sgd_time(size, workers, batch, nodes) * float(np.exp(rng.normal(0, noise)))
                    runs.append(
                        Observation(
                            workload="synthetic",
                            dataset_size=size,
                            epochs=1,
                            batch_size=batch,
                            workers=workers,
                            cpus_per_worker=1,
                            gpus_per_worker=0,
                            nodes=nodes,
                            execution_seconds=seconds,
                            startup_seconds=2.0,
                            source="synthetic",
                        )
                    )
    return runs


@pytest.fixture(scope="session")
def synthetic() -> list[Observation]:
    return synthetic_observations()


@contextlib.contextmanager
def counting_fits() -> Iterator[collections.Counter[str]]:
    """Count the fits of each candidate while the block runs: the cost of selection, measured."""
    counts: collections.Counter[str] = collections.Counter()

    def counted(name: str, fit: Any) -> Any:
        def fit_and_count(self: Any, X: np.ndarray, y: np.ndarray) -> Any:
            counts[name] += 1
            return fit(self, X, y)

        return fit_and_count

    with contextlib.ExitStack() as stack:
        for name, estimator in CANDIDATES.items():
            stack.enter_context(mock.patch.object(estimator, "fit", counted(name, estimator.fit)))
        yield counts
