"""The progress endpoint under a TokenReview flood: a legitimate report's latency, against the quiet one of the
same run (issue 21: 32 clients with bogus tokens made a report take 6.7 s instead of 0.54 s).

The real controller with its progress endpoint runs against the test kit's
emulator (TokenReviews and all). Each measured report is a job's first, from
its own head pod's token, so it takes the whole path (a review, the pod, the
job, a patch) and no kept answer. ``--jobs`` jobs report while nothing else
does, then as many others while ``--clients`` threads send bogus tokens
from another address as fast as they are answered (a connection reset before
TLS counts as an answer). The attacker is another pod: it runs on a CPU of its
own, the advisor (and the legitimate reporter) on the others, so what is
measured is what the flood costs the server, not a CPU the two share
(``--shared-cpus``: every process on every CPU, as on a node the attacker
shares). Printed: both medians and p90s, their ratio (the issue's bar: within
2x), the CPUs the advisor's process used in each phase (what the flood costs
the server), the TokenReviews sent against the distinct tokens seen, and the
flood's answers by status.

    .venv/bin/python -m benchmarks.progress_flood [--jobs 20] [--clients 32] [--shared-cpus]
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import threading
import time
import urllib.error
from multiprocessing.synchronize import Event as EventType

import numpy as np

from rayjob_advisor import contract as ann
from rayjob_advisor.kube.reports import REFUSAL_SECONDS, SUBJECT_RATE
from rayjob_advisor_testkit.advisor import QUICK_REFITS, RunningAdvisor, running_advisor
from rayjob_advisor_testkit.https import Endpoint
from rayjob_advisor_testkit.lifecycle import start
from rayjob_advisor_testkit.profiles import profile_manifest, profiled_rayjob

AUDIENCE = "rayjob-advisor"


def report_seconds(advisor: RunningAdvisor, name: str) -> float:
    """One job started and reporting once from its head pod: the report's answer time (it must be a 200)."""
    stored = start(advisor.api, profiled_rayjob(name, **{ann.DATASET_SIZE: "1000000"}))
    token = advisor.api.ray_pod("default", name, audience=AUDIENCE)
    body = {"namespace": "default", "name": name, "uid": stored["metadata"]["uid"], "done": 5, "total": 10}
    begin = time.perf_counter()
    status, _, text = advisor.progress.post(json.dumps(body).encode(), {"Authorization": f"Bearer {token}"})
    took = time.perf_counter() - begin
    if status != 200:
        raise SystemExit(f"error: a legitimate report got {status}: {text.decode(errors='replace')}")
    time.sleep(1 / SUBJECT_RATE)  # the jobs share a service account: its bucket is not what is measured
    return took


def phase(advisor: RunningAdvisor, prefix: str, jobs: int) -> tuple[list[float], float]:
    """``jobs`` reports' answer times (``report_seconds``), and the CPUs this process used meanwhile (CPU seconds a
    second: the controller, the emulated API server and the legitimate reporter; never the attacker)."""
    cpu, wall = time.process_time(), time.perf_counter()
    took = [report_seconds(advisor, f"{prefix}-{n}") for n in range(jobs)]
    return took, (time.process_time() - cpu) / (time.perf_counter() - wall)


def flood(
    url: str, ca: str, clients: int, cpus: set[int] | None, stop: EventType, counts: multiprocessing.Queue
) -> None:
    """The attacker, in a process of its own (another pod's, on ``cpus`` if given): ``clients`` threads, each
    sending its own bogus token from another address as fast as it is answered, until ``stop``; their answers by
    status go to ``counts``."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    endpoint = Endpoint(url, ca)
    body = json.dumps({"namespace": "default", "name": "quiet-0", "done": 1, "total": 10}).encode()
    answers: collections.Counter[str] = collections.Counter()

    def client(token: str) -> None:
        while not stop.is_set():
            try:
                answers[str(endpoint.post(body, {"Authorization": f"Bearer {token}"}, source="127.0.0.2")[0])] += 1
            except urllib.error.URLError:  # over the address's rate of new connections: reset before TLS
                answers["reset"] += 1

    threads = [threading.Thread(target=client, args=(f"emulated.bogus-{n}",)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts.put(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20, help="reports measured, quiet and flooded each")
    parser.add_argument("--clients", type=int, default=32, help="flooding clients, one bogus token each")
    parser.add_argument("--shared-cpus", action="store_true", help="the attacker on the advisor's CPUs too")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    attacker_cpus = None if args.shared_cpus else {cpus[-1]}
    if attacker_cpus is not None:
        if len(cpus) < 2:
            raise SystemExit("error: a CPU of the attacker's own needs 2 CPUs; run with --shared-cpus")
        os.sched_setaffinity(0, set(cpus[:-1]))  # before any thread starts: the advisor's threads inherit it
    with running_advisor(objects=[profile_manifest()], progress=True, timeout=120, **QUICK_REFITS) as advisor:
        quiet, quiet_cpus = phase(advisor, "quiet", args.jobs)
        reviews = len(advisor.api.requests("POST", "tokenreviews"))
        processes = multiprocessing.get_context("spawn")  # no fork of a process running threads (kopf's)
        stop, counts = processes.Event(), processes.Queue()
        attacker = multiprocessing.Process(
            target=flood, args=(advisor.progress.url, advisor.ca, args.clients, attacker_cpus, stop, counts)
        )
        attacker.start()
        time.sleep(1)  # the flood is on
        try:
            flooded, flooded_cpus = phase(advisor, "flooded", args.jobs)
        finally:
            stop.set()
            answers = counts.get(timeout=60)
            attacker.join()
        sent = len(advisor.api.requests("POST", "tokenreviews")) - reviews
    q50, f50 = float(np.median(quiet)), float(np.median(flooded))
    print(f"quiet report:   p50 {q50 * 1000:.0f} ms, p90 {np.percentile(quiet, 90) * 1000:.0f} ms ({args.jobs} jobs)")
    print(f"flooded report: p50 {f50 * 1000:.0f} ms, p90 {np.percentile(flooded, 90) * 1000:.0f} ms ({args.jobs} jobs)")
    placement = (
        "every CPU shared" if attacker_cpus is None else f"the attacker on CPU {cpus[-1]}, the advisor on {cpus[:-1]}"
    )
    print(f"ratio flooded/quiet p50: {f50 / q50:.2f}x (issue 21's bar: <= 2x; {placement})")
    print(f"the advisor's process used {quiet_cpus:.2f} CPUs quiet, {flooded_cpus:.2f} flooded")
    print(
        f"flood: {sum(answers.values())} requests from {args.clients} clients, answers {dict(sorted(answers.items()))}"
    )
    print(
        f"TokenReviews sent meanwhile: {sent} ({args.clients} bogus tokens, each asked again once its refusal of"
        f" {REFUSAL_SECONDS:g} s expires; {args.jobs} legitimate)"
    )


if __name__ == "__main__":
    main()
