"""Learning at scale: N finished jobs of one workload learned by the real operator on the API emulator.

The operator runs as its own process (``rayjob-advisor run`` against the
emulator, default settings: refit interval 2 s), as in production; the
emulator runs in this one. Two paths (``--path``):

- ``full``: N RayJobs are created, predicted, then all set Complete at once
  (as KubeRay would, ``set_rayjob_status``); the operator's ``finished``
  handler learns each.
- ``direct``: N runs are appended through ``kubeapi.append_observation`` (what
  ``finished`` calls) from ``--threads`` threads of this process at once,
  while the operator reloads each change, refits and publishes its fits
  (which makes appends conflict). Faster: for 10,000 runs.

It prints appends/s, 409 conflicts, refits (the operator's publications of
a fit), the RuntimeProfile's size over time, the time of a refit on the
final runs, the lost and doubled runs (from the summaries' counts and the
learned keys), and the operator's RSS (now and peak).

    .venv/bin/python -m benchmarks.learning --jobs 1000 [--path direct|full] [--threads 16]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import random
import subprocess
import sys
import threading
import time

from rayjob_advisor import contract as ann
from rayjob_advisor.kube import kubeapi
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import Observation
from rayjob_advisor.profiles import history
from rayjob_advisor.profiles.codec import observations_from_k8s
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest, sync_sgd_time
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group
from rayjob_advisor_testkit.resources import AdvisorEmulator

DIFFBASE = "rayjob-advisor.io/last-handled-configuration"


def memory_mib(pid: int, field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of process ``pid``."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
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


def profile(api: AdvisorEmulator) -> dict:
    return api.get("runtimeprofiles", "default", WORKLOAD)


def learned_count(api: AdvisorEmulator) -> int:
    return sum(s["count"] for s in (profile(api).get("status") or {}).get("summaries") or [])


def direct(api: AdvisorEmulator, jobs: int, threads: int) -> None:
    kube = kubeapi.client(api.url)
    store = ProfileStore(shipped=False)
    store.put("default", WORKLOAD, WORKLOAD, [], [])  # what append_observation resolves: the profile's name

    def append(index: int) -> bool:
        return kubeapi.append_observation(kube, store, "default", run(index, random.Random(index)))

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(append, range(jobs)))
    assert all(results), "an append said its run was there already"


def create_and_predict(api: AdvisorEmulator, jobs: int) -> None:
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
    print(f"  {jobs} RayJobs created and predicted; now all complete at once", flush=True)


def complete(api: AdvisorEmulator, jobs: int) -> None:
    start = dt.datetime(2026, 12, 2, 10, tzinfo=dt.UTC)
    for index in range(jobs):
        size, workers, batch = configuration(index)
        end = start + dt.timedelta(seconds=sync_sgd_time(size, workers, batch, 1))
        api.set_rayjob_status("default", f"job-{index:05d}", deployment_status="Complete", job_status="SUCCEEDED",
                              start_time=start, end_time=end)  # fmt: skip


def operator(api: AdvisorEmulator) -> subprocess.Popen[bytes]:
    environ = {**os.environ, "RAYJOB_ADVISOR_SHIPPED_PROFILES": "false", "RAYJOB_ADVISOR_METRICS_PORT": "0"}
    command = [sys.executable, "-m", "rayjob_advisor.cli", "run", "--kube-api", api.url, "--liveness-port", "0"]
    return subprocess.Popen(command, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--path", choices=("full", "direct"), default="direct")
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    with AdvisorEmulator() as api:
        api.create(profile_manifest())
        process = operator(api)
        try:
            measure(api, process.pid, args)
        finally:
            process.terminate()
            process.wait(30)


def measure(api: AdvisorEmulator, pid: int, args: argparse.Namespace) -> None:
    api.wait_until(lambda: (profile(api).get("status") or {}).get("model"), 300)  # loaded, fitted, published
    sizes: list[tuple[float, int, int, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(1.0):
            body = profile(api)
            diffbase = len((body["metadata"].get("annotations") or {}).get(DIFFBASE, ""))
            count = sum(s["count"] for s in (body.get("status") or {}).get("summaries") or [])
            sizes.append((time.perf_counter() - began, count, len(json.dumps(body)), diffbase))

    print(f"{args.jobs} finished jobs of one workload ({args.path} path, 32 configurations)", flush=True)
    if args.path == "full":
        create_and_predict(api, args.jobs)
    before = len(api.requests("PATCH", "runtimeprofiles", subresource="status"))
    began = time.perf_counter()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if args.path == "direct":
        direct(api, args.jobs, args.threads)
    else:
        complete(api, args.jobs)
    api.wait_until(lambda: learned_count(api) >= args.jobs, 3600)
    elapsed = time.perf_counter() - began
    done.set()
    sampler.join()
    time.sleep(30)  # the debounced refit of the last runs, published
    body = profile(api)
    status = body["status"]
    patches = api.requests("PATCH", "runtimeprofiles", subresource="status")[before:]
    conflicts = sum(1 for r in patches if r.status == 409)
    refits = sum(1 for r in patches if r.status == 200 and "model" in (r.body or {}).get("status", {}))
    learned = learned_count(api)
    keys = status["learnedSources"]
    expected = [f"rayjob:bench-{i:06d}:0" for i in range(args.jobs)]
    if args.path == "full":
        jobs = sorted(api.objects("rayjobs"), key=lambda job: job["metadata"]["name"])
        expected = [f"rayjob:{job['metadata']['uid']}:0" for job in jobs]
    missing = len(set(expected[-history.MAX_SOURCES :]) - set(keys))
    workload_runs = [*(body["spec"].get("observations") or []), *status["observations"]]
    runs = observations_from_k8s(WORKLOAD, workload_runs)
    fit_began = time.perf_counter()
    RuntimeModel().fit(runs)
    fit_seconds = time.perf_counter() - fit_began
    print(f"  appends/s:        {args.jobs / elapsed:.1f} ({args.jobs} in {elapsed:.1f} s)")
    print(f"  lost / doubled:   {max(args.jobs - learned, 0) + missing} / {max(learned - args.jobs, 0)}"
          f" (summaries count {learned}; {len(keys)} keys kept, {len(set(keys))} distinct)")  # fmt: skip
    print(f"  409 conflicts:    {conflicts} of {len(patches)} status patches")
    print(f"  refits:           {refits} published ({status['model']['samples']} runs in the last)")
    print(f"  kept runs:        {len(status['observations'])} (+{len(body['spec']['observations'])} seed), "
          f"{len(status['summaries'])} summaries")  # fmt: skip
    print(f"  refit at the end: {fit_seconds:.2f} s on {len(runs)} runs")
    print(f"  RuntimeProfile:   {len(json.dumps(body))} bytes, diff-base annotation "
          f"{len(body['metadata'].get('annotations', {}).get(DIFFBASE, ''))} bytes")  # fmt: skip
    print(f"  operator RSS:     {memory_mib(pid, 'VmRSS'):.0f} MiB (peak {memory_mib(pid, 'VmHWM'):.0f} MiB)")
    print("  size over time (s, learned, profile bytes, diff-base bytes):")
    step = max(1, len(sizes) // 10)
    for moment, count, size, diffbase in [*sizes[::step], *sizes[-1:]]:
        print(f"    {moment:7.1f} {count:6d} {size:8d} {diffbase:6d}")


if __name__ == "__main__":
    main()
