"""Learning at scale: N finished jobs of one workload learned by the real operator on the API emulator.

Two paths (``--path``):

- ``full``: N RayJobs are created, predicted, then set Complete (as KubeRay
  would, ``set_rayjob_status``); the operator's ``finished`` handler learns each.
- ``direct``: N runs are appended through ``kubeapi.append_observation`` from
  ``--threads`` threads at once, as ``finished`` does, while the operator
  runs (its profile handlers reload each change, its refitter fits and
  publishes, which makes appends conflict). Faster: for 10,000 runs.

It prints appends/s, 409 conflicts, refits, the RuntimeProfile's size over
time, the final refit's time, the lost and doubled runs (from the
summaries' counts and the learned keys), and the RSS of this process (the
operator, the emulator and the benchmark share it).

    .venv/bin/python -m benchmarks.learning --jobs 1000 [--path full|direct] [--threads 16]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import random
import threading
import time

from rayjob_advisor import contract as ann
from rayjob_advisor import history, kubeapi
from rayjob_advisor.observations import Observation
from rayjob_advisor_testkit.advisor import RunningAdvisor, running_advisor
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest, sync_sgd_time
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

DIFFBASE = "rayjob-advisor.io/last-handled-configuration"


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def configuration(index: int) -> tuple[int, int, int]:
    """One of 32 configurations: dataset size, workers, batch (as a busy team's jobs vary)."""
    return (2000 * 2 ** (index % 4), 2 ** (index // 4 % 4), 64 * (1 + index // 16 % 2))


def run(index: int, rng: random.Random) -> Observation:
    size, workers, batch = configuration(index)
    seconds = sync_sgd_time(size, workers, batch, 1) * rng.uniform(0.95, 1.05)
    return Observation(
        workload=WORKLOAD, dataset_size=size, epochs=1, batch_size=batch, workers=workers, cpus_per_worker=2,
        gpus_per_worker=0, nodes=1, execution_seconds=seconds, startup_seconds=30.0,
        source=f"rayjob:bench-{index:06d}:0",
    )  # fmt: skip


def profile(advisor: RunningAdvisor) -> dict:
    return advisor.api.get("runtimeprofiles", "default", WORKLOAD)


def learned_count(advisor: RunningAdvisor) -> int:
    return sum(s["count"] for s in (profile(advisor).get("status") or {}).get("summaries") or [])


def direct(advisor: RunningAdvisor, jobs: int, threads: int) -> None:
    rngs = threading.local()

    def append(index: int) -> bool:
        if not hasattr(rngs, "rng"):
            rngs.rng = random.Random(index)
        return kubeapi.append_observation(advisor.memo.kube, advisor.memo.store, "default", run(index, rngs.rng))

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(append, range(jobs)))
    assert all(results), "an append said its run was there already"


def full(advisor: RunningAdvisor, jobs: int) -> None:
    api = advisor.api
    for index in range(jobs):
        size, workers, batch = configuration(index)
        body = make_rayjob(
            annotations={ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: str(size), ann.BATCH_SIZE: str(batch)},
            groups=[worker_group(replicas=workers, maxReplicas=8)],
        )
        body["metadata"]["name"] = f"job-{index:05d}"
        api.create(body)
    api.wait_until(
        lambda: all(ann.PREDICTION in (j["metadata"].get("annotations") or {}) for j in api.objects("rayjobs")), 1200
    )
    print(f"  {jobs} RayJobs predicted; completing them all at once", flush=True)
    start = dt.datetime(2026, 12, 2, 10, tzinfo=dt.UTC)
    for index in range(jobs):
        size, workers, batch = configuration(index)
        minutes = sync_sgd_time(size, workers, batch, 1) / 60
        end = start + dt.timedelta(minutes=minutes)
        api.set_rayjob_status("default", f"job-{index:05d}", deployment_status="Complete", job_status="SUCCEEDED",
                              start_time=start, end_time=end)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--path", choices=("full", "direct"), default="direct")
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    with running_advisor(objects=[profile_manifest()], shipped_profiles=False, timeout=60) as advisor:
        advisor.wait_for_model(WORKLOAD, timeout=300)
        fits_before = advisor.memo.refitter.fits
        sizes: list[tuple[float, int, int, int]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(1.0):
                body = profile(advisor)
                diffbase = len((body["metadata"].get("annotations") or {}).get(DIFFBASE, ""))
                count = sum(s["count"] for s in (body.get("status") or {}).get("summaries") or [])
                sizes.append((time.perf_counter() - began, count, len(json.dumps(body)), diffbase))

        print(f"{args.jobs} finished jobs of one workload ({args.path} path, 32 configurations)", flush=True)
        began = time.perf_counter()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        if args.path == "direct":
            direct(advisor, args.jobs, args.threads)
        else:
            full(advisor, args.jobs)
        advisor.api.wait_until(lambda: learned_count(advisor) >= args.jobs, 3600)
        elapsed = time.perf_counter() - began
        done.set()
        sampler.join()
        advisor.api.wait_until(lambda: not advisor.memo.store.stale(), 600)
        time.sleep(advisor.config.refit_interval_seconds * 2)
        advisor.api.wait_until(lambda: not advisor.memo.store.stale(), 600)
        body = profile(advisor)
        status = body["status"]
        patches = advisor.api.requests("PATCH", "runtimeprofiles", subresource="status")
        conflicts = sum(1 for r in patches if r.status == 409)
        learned = learned_count(advisor)
        keys = status["learnedSources"]
        expected = [f"rayjob:bench-{i:06d}:0" for i in range(args.jobs)]
        missing = len(set(expected[-history.MAX_SOURCES :]) - set(keys))
        fitted = advisor.memo.store.find("default", WORKLOAD)
        print(f"  appends/s:        {args.jobs / elapsed:.1f} ({args.jobs} in {elapsed:.1f} s)")
        print(f"  lost / doubled:   {max(args.jobs - learned, 0) + missing} / {max(learned - args.jobs, 0)}"
              f" (summaries count {learned}; {len(keys)} keys kept, {len(set(keys))} distinct)")  # fmt: skip
        print(f"  409 conflicts:    {conflicts} of {len(patches)} status patches")
        print(f"  refits:           {advisor.memo.refitter.fits - fits_before}")
        print(f"  kept runs:        {len(status['observations'])} (+{len(fitted.seed)} seed), "
              f"{len(status['summaries'])} summaries")  # fmt: skip
        print(f"  last refit:       {fitted.fit_seconds:.2f} s on {len(fitted.observations)} runs")
        fitted.fit()
        print(f"  refit again:      {fitted.fit_seconds:.2f} s")
        print(f"  RuntimeProfile:   {len(json.dumps(body))} bytes, diff-base annotation "
              f"{len(body['metadata'].get('annotations', {}).get(DIFFBASE, ''))} bytes")  # fmt: skip
        print(f"  RSS:              {rss_mib():.0f} MiB (operator + emulator + benchmark, one process)")
        print("  size over time (s, learned, profile bytes, diff-base bytes):")
        step = max(1, len(sizes) // 10)
        for moment, count, size, diffbase in [*sizes[::step], *sizes[-1:]]:
            print(f"    {moment:7.1f} {count:6d} {size:8d} {diffbase:6d}")


if __name__ == "__main__":
    main()
