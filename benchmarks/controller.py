"""Controller speed on the API emulator: RayJobs annotated per second, and the handler's own latency.

End to end: N RayJobs are created at once against the emulator the tests
use (tests/emulator.py) and timed until every one carries its prediction;
the same is done with a no-op kopf operator (one create handler writing one
annotation) in the same run, as the baseline of what kopf and the emulator
cost by themselves. In process: ``advise()`` — features, profile lookup,
prediction, annotations — timed alone, per RayJob.

    .venv/bin/python benchmarks/controller.py [--jobs 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import pathlib
import sys
import time
from collections.abc import Callable

import kopf
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

from conftest import make_rayjob, worker_group  # noqa: E402
from emulator import Emulator, operator_settings, run_operator  # noqa: E402

from rayjob_advisor import contract as ann  # noqa: E402
from rayjob_advisor import profiles, run  # noqa: E402
from rayjob_advisor.config import OperatorConfig  # noqa: E402
from rayjob_advisor.application import Policy, advise  # noqa: E402

WORKLOAD = "digits-cnn"
NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
MARK = "benchmark.rayjob-advisor.io/seen"


def rayjobs(count: int) -> list[dict]:
    jobs = []
    for index in range(count):
        job = make_rayjob(
            annotations={ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: str(8000 * (1 + index % 8)), ann.BATCH_SIZE: "256"},
            groups=[worker_group(replicas=1 + index % 4, maxReplicas=4)],
        )
        job["metadata"]["name"] = f"job-{index:04d}"
        jobs.append(job)
    return jobs


Operator = tuple[kopf.OperatorRegistry, kopf.OperatorSettings, object, Callable[[], bool]]  # ..., memo, ready?
Setup = Callable[[Emulator], Operator]


def annotated_per_second(setup: Setup, key: str, count: int) -> float:
    """Jobs per second from the first create until every job carries annotation ``key``."""
    with Emulator() as api:
        registry, settings, memo, ready = setup(api)
        with run_operator(api, registry=registry, settings=settings, memo=memo, timeout=60):
            api.wait_until(ready, 300)
            return _annotate_all(api, key, count)


def _annotate_all(api: Emulator, key: str, count: int) -> float:
    jobs = rayjobs(count)
    started = time.perf_counter()
    for job in jobs:
        api.create(job)
    api.wait_until(lambda: all(key in (j["metadata"].get("annotations") or {}) for j in api.objects("rayjobs")), 600)
    return count / (time.perf_counter() - started)


def no_op(api: Emulator) -> Operator:
    registry = kopf.OperatorRegistry()

    @kopf.on.create("ray.io", "v1", "rayjobs", registry=registry)
    def seen(patch: kopf.Patch, **_: object) -> None:
        patch.metadata.annotations[MARK] = "yes"

    return registry, operator_settings(), None, lambda: True


def advisor(api: Emulator) -> Operator:
    arguments = run.operator_arguments(OperatorConfig(kube_api=api.url, liveness_port=0, metrics_port=0))
    memo = arguments["memo"]
    settings = operator_settings()
    settings.persistence = arguments["settings"].persistence
    return arguments["registry"], settings, memo, lambda: memo.store.find("default", WORKLOAD).model is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()

    store = profiles.ProfileStore()
    profile = store.find("default", WORKLOAD)
    profile.fit()
    jobs = rayjobs(1000)
    latencies = []
    for job in jobs:
        started = time.perf_counter()
        advise(job, store, policy=Policy(), may_resize=True, now=NOW)
        latencies.append(time.perf_counter() - started)
    p50, p99 = np.quantile(latencies, [0.5, 0.99]) * 1000
    print(f"in-process advise(), {len(jobs)} RayJobs on the shipped profile ({profile.model.selected_}): "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")

    baseline = annotated_per_second(no_op, MARK, args.jobs)
    ours = annotated_per_second(advisor, ann.PREDICTION, args.jobs)
    print(f"end to end, {args.jobs} RayJobs created at once on the emulator:")
    print(f"  no-op kopf operator: {baseline:.1f} RayJobs/s")
    print(f"  rayjob-advisor:      {ours:.1f} RayJobs/s ({ours / baseline:.2f} x the no-op operator)")


if __name__ == "__main__":
    main()
