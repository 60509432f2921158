"""Controller speed on the API emulator: RayJobs annotated per second, and the handler's own latency.

End to end: N RayJobs are created at once against the emulator the tests
use (the test kit's) and timed until every one carries its prediction;
the same is done with a no-op kopf operator (one create handler writing one
annotation, the advisor's kopf settings) in the same run, as the baseline of
what kopf and the emulator cost by themselves. In process: ``advise()`` —
features, profile lookup, prediction, annotations — timed alone, per RayJob.

    .venv/bin/python -m benchmarks.controller [--jobs 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

import kopf
import numpy as np

from rayjob_advisor import contract as ann
from rayjob_advisor.application import Policy, advise
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit.advisor import running_advisor
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

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


def annotated_per_second(key: str, count: int, registry: kopf.OperatorRegistry | None = None) -> float:
    """Jobs per second from the first create until every job carries annotation ``key``.

    The advisor on its shipped profile, once fitted; or, with ``registry``, those handlers instead.
    """
    with running_advisor(registry=registry, timeout=60) as advisor:
        if registry is None:
            advisor.wait_for_model(WORKLOAD, timeout=300)
        api = advisor.api
        jobs = rayjobs(count)
        started = time.perf_counter()
        for job in jobs:
            api.create(job)
        api.wait_until(
            lambda: all(key in (j["metadata"].get("annotations") or {}) for j in api.objects("rayjobs")), 600
        )
        return count / (time.perf_counter() - started)


def no_op() -> kopf.OperatorRegistry:
    """The baseline: one create handler writing one annotation."""
    registry = kopf.OperatorRegistry()

    @kopf.on.create("ray.io", "v1", "rayjobs", registry=registry)
    def seen(patch: kopf.Patch, **_: object) -> None:
        patch.metadata.annotations[MARK] = "yes"

    return registry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()

    store = ProfileStore()
    profile = store.find("default", WORKLOAD)
    profile.fit()
    jobs = rayjobs(1000)
    latencies = []
    for job in jobs:
        started = time.perf_counter()
        advise(job, store, policy=Policy(), may_resize=True, now=NOW)
        latencies.append(time.perf_counter() - started)
    p50, p99 = np.quantile(latencies, [0.5, 0.99]) * 1000
    print(
        f"in-process advise(), {len(jobs)} RayJobs on the shipped profile ({profile.model.selected_}): "
        f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    )

    baseline = annotated_per_second(MARK, args.jobs, no_op())
    ours = annotated_per_second(ann.PREDICTION, args.jobs)
    print(f"end to end, {args.jobs} RayJobs created at once on the emulator:")
    print(f"  no-op kopf operator: {baseline:.1f} RayJobs/s")
    print(f"  rayjob-advisor:      {ours:.1f} RayJobs/s ({ours / baseline:.2f} x the no-op operator)")


if __name__ == "__main__":
    main()
