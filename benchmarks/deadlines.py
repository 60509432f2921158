"""Deadline planning replayed on the shipped real profile, and the admission webhook's latency.

Planning: the shipped profile has 3 repeats of every configuration. Each
repeat in turn is held out as ground truth (start-up + execution actually
measured); the model is fitted on the other two. For every dataset size,
jobs arrive with a replica count as submitted (drawn at random) and a
deadline drawn "loose" (between the fastest true runtime and twice the
slowest) or "tight" (within 15 % of the fastest). Three
policies choose the worker count: the planner (cheapest whose 0.9 upper
bound plus expected start-up fits), an oracle that knows the true runtimes
(cheapest that truly fits, else the fastest), and the jobs as submitted. The
script prints each policy's deadline-hit rate and the worker-seconds spent.

Latency: AdmissionReviews posted over HTTPS to the webhook (webhook role, on
the shipped profile) and, in the same run, to a kopf webhook whose mutate
handler does nothing.

    .venv/bin/python -m benchmarks.deadlines [--deadlines 5] [--requests 300]
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import time

import kopf
import numpy as np

from rayjob_advisor import contract as ann
from rayjob_advisor import planner, profiles
from rayjob_advisor.features import features_from_rayjob
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import read_observations
from rayjob_advisor_testkit.advisor import running_advisor
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

WORKLOAD = "digits-cnn"
NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


def job_features(size: int, replicas: int, high: int, cpus: float):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: str(size), ann.BATCH_SIZE: "256", ann.EPOCHS: "1"},
        groups=[
            worker_group(replicas=replicas, maxReplicas=high, resources={"requests": {"cpu": f"{int(cpus * 1000)}m"}})
        ],
    )
    return features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))


REGIMES = {  # where deadlines are drawn, relative to the true runtimes of a job's possible sizes
    "loose": lambda totals: (min(totals), 2 * max(totals)),
    "tight": lambda totals: (min(totals), 1.15 * min(totals)),
}


def replay(deadlines_per_size: int, regime: str) -> None:
    runs, _ = read_observations(profiles.shipped_data(WORKLOAD))
    repeat_of = lambda o: int(o.source.rsplit(":r", 1)[1])  # noqa: E731
    workers = sorted({o.workers for o in runs})
    cpus = runs[0].cpus_per_worker
    rng = np.random.default_rng(0)
    results = collections.defaultdict(lambda: {"hits": 0, "jobs": 0, "cost": 0.0})
    for held_out in sorted({repeat_of(o) for o in runs}):
        model = RuntimeModel().fit([o for o in runs if repeat_of(o) != held_out])
        truth = {
            (o.dataset_size, o.workers): o.startup_seconds + o.execution_seconds
            for o in runs
            if repeat_of(o) == held_out
        }
        for size in sorted({s for s, _ in truth}):
            totals = {w: truth[(size, w)] for w in workers}
            for _ in range(deadlines_per_size):
                left = rng.uniform(*REGIMES[regime](list(totals.values())))
                submitted = int(rng.choice(workers))
                job = job_features(size, submitted, max(workers), cpus)
                plan = planner.recommend(
                    job, model, NOW + dt.timedelta(seconds=left), NOW, 0.9, model.startup_seconds_, planner.Prices()
                )
                fitting = [w for w in workers if totals[w] <= left]
                oracle = min(fitting, key=lambda w: w * totals[w]) if fitting else min(workers, key=totals.get)
                for policy, chosen in (("planner", plan.replicas), ("oracle", oracle), ("as submitted", submitted)):
                    results[policy]["jobs"] += 1
                    results[policy]["hits"] += totals[chosen] <= left
                    results[policy]["cost"] += chosen * cpus * totals[chosen]
    oracle_cost = results["oracle"]["cost"]
    print(f"\n{regime} deadlines: {results['planner']['jobs']} jobs over the shipped profile ({len(runs)} real runs)")
    print(f"{'policy':<14} {'deadline hits':>13} {'worker-seconds':>15} {'vs oracle':>10}")
    for policy, r in results.items():
        print(f"{policy:<14} {r['hits'] / r['jobs']:>13.1%} {r['cost']:>15.1f} {r['cost'] / oracle_cost - 1:>+10.1%}")


def no_op_webhook() -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.mutate("ray.io", "v1", "rayjobs", operations=["CREATE"], id="advise", registry=registry)
    def advise(**_: object) -> None:
        pass

    kopf.on.event("", "v1", "namespaces", registry=registry)(lambda **_: None)  # something to watch
    return registry


def latencies(requests: int) -> None:
    body = make_rayjob(
        annotations={
            ann.WORKLOAD: WORKLOAD,
            ann.DATASET_SIZE: "64000",
            ann.BATCH_SIZE: "256",
            ann.DEADLINE: "2m",
            ann.MODE: "enforce",
        },
        groups=[worker_group(replicas=2, maxReplicas=4, resources={"requests": {"cpu": "500m"}})],
    )
    results = {}
    for name, registry in (("no-op mutate handler", no_op_webhook()), ("rayjob-advisor webhook", None)):
        with running_advisor("webhook", registry=registry, timeout=60) as advisor:
            if registry is None:
                advisor.wait_for_model(WORKLOAD, timeout=120)
            advisor.webhook.admit(body)  # warm-up: TLS session, first-call imports
            timings = []
            for _ in range(requests):
                started = time.perf_counter()
                advisor.webhook.review(body)
                timings.append(time.perf_counter() - started)
        results[name] = np.quantile(timings, [0.5, 0.99]) * 1000
    print(f"\nadmission latency, {requests} AdmissionReviews over HTTPS (client side, ms):")
    for name, (p50, p99) in results.items():
        print(f"  {name:<24} p50 {p50:6.1f}   p99 {p99:6.1f}")
    (base50, base99), (ours50, ours99) = results.values()
    print(f"  added by the advice: p50 {ours50 - base50:+.1f} ms, p99 {ours99 - base99:+.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadlines", type=int, default=5, help="deadlines drawn per dataset size and fold")
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    for regime in REGIMES:
        replay(args.deadlines, regime)
    latencies(args.requests)


if __name__ == "__main__":
    main()
