"""Deadline planning replayed on the shipped real profiles (CPU and GPU), and the admission webhook's latency.

Planning on ``digits-cnn``: the shipped profile has 3 repeats of every configuration. Each
repeat in turn is held out as ground truth (start-up + execution actually
measured); the model is fitted on the other two. For every dataset size,
jobs arrive with a replica count as submitted (drawn at random) and a
deadline drawn "loose" (between the fastest true runtime and twice the
slowest) or "tight" (within 15 % of the fastest). Three
policies choose the worker count: the planner (cheapest whose 0.9 upper
bound plus its own expected start-up fits), an oracle that knows the true runtimes
(cheapest that truly fits, else the fastest), and the jobs as submitted. The
script prints each policy's deadline-hit rate and the worker-seconds spent,
and the planner's false claims: plans that said the size meets the deadline
(``meetsDeadline``, what ``enforce`` acts on) while its true runtime exceeds the
time left, as a share of all plans (an honest "misses" is no false claim).

GPU scaling on the six shipped Pollux profiles (T4, 4 GPUs per node, every
placement of 1-16 GPUs over 1-4 nodes, measured at several per-GPU
batches b). A job trains one epoch over a dataset of 1/8 to 1 x the real
training set (drawn uniformly) at a per-worker batch b
(``batch-size-per-worker``), one GPU per worker pod, submitted at a GPU
count drawn among the candidates. Two placement policies lay its n GPUs on
the nodes: ``packed`` fills nodes 4 at a time (6 GPUs: 4 + 2) and the job
gives no hint (the model assumes packing, as learned from the profile);
``spread`` lays them evenly over the 4 nodes (6 GPUs: 2 + 2 + 1 + 1) and
the job's worker template carries a ``topologySpreadConstraints`` on the
hostname, so ``Features.placement`` is ``spread``. Ground truth: the
measured step time of the placement the policy gives for n GPUs at b,
times ceil(size / (b n)) steps (no start-up: Pollux measured steps).
Candidates: the GPU counts 1..k whose policy placement was measured at b
(k is 16 except at the largest batches of cifar10, deepspeech2 and ncf,
where the global batch was capped; the job's ``maxReplicas`` is k; batches
with fewer than 4 candidates are skipped). Held out: for each (workload,
policy, b), the model is fitted on the profile less every run at per-GPU
batch b on one of that policy's placements — no configuration a job of
that kind is judged on was seen, while the other placements at b and the
other batches stay, as a profile would have them. Among those are other
placements of as many GPUs on as many nodes (``33`` beside packed ``24``):
the model's design does not tell them apart, so its anchoring on measured
configurations uses them. ``--holdout batch`` holds out every run at b
instead (the job's per-GPU batch was never profiled); ``--holdout half``
holds out every other GPU count's placement at b (two folds, the jobs split
between them), so that about half of the sizes a job may get were measured —
the profile of a team that measured some sizes and asks about the others.
``--holdout placement-per-size`` is issue 18's protocol, "one per-GPU batch per
model, a held-out placement per size": per workload and policy, one batch b,
the one the profile ran most placements at (the middle one of those tied:
``PolluxProfile.most_measured``), and per GPU count n a model fitted on the
profile less the policy's placement of n GPUs at b — every other run stays,
the other sizes at b and the other batches included; the planner asks each
size of the model that lacks it (``PerSize``). That one batch gets as many
jobs as the other protocols spread over their batches. ``--holdout`` takes a
comma-separated list; by default ``placements,placement-per-size``. Deadlines are drawn
loose or tight as above, from the job's candidates' true runtimes. The
planner (``planner.recommend`` on the Features of a real RayJob manifest),
the oracle (fewest GPU-seconds that truly fit, else the fastest) and the
job as submitted are scored per (workload, placement, regime) and overall:
deadline hits and GPU-seconds against the oracle's, and the planner's false claims. ``ceiling``: the hits
of the size fastest by the trend (``RuntimeModel.trend``) of a model fitted
on every run of the profile, the judged ones included, anchored on none —
what a model knows that saw the whole sweep but not each measurement's own
noise. A model that never saw the job's sizes cannot be expected above it;
only measuring them helps (``--holdout half``). A summary ends the GPU part:
per (protocol, regime, placement), PASS or FAIL against issue 18's targets —
loose >= 99 % hits at <= +10 % GPU-seconds over the oracle, tight hits >= the
ceiling's, false claims <= 2 % of plans in every regime. ``--batches``
per-GPU batches per workload (evenly spaced over those measured; 0: all) and
``--gpu-jobs`` per batch and regime set the run time; ``--quick`` is one batch
(the middle one), 10 jobs, and ``placement-per-size`` with 2 folds of sizes
(every other size held out per model) instead of one per size: a smoke run,
not the protocol.

Latency: AdmissionReviews posted over HTTPS to the webhook (webhook role, on
the shipped profile) and, in the same run, to a kopf webhook whose mutate
handler does nothing.

    .venv/bin/python -m benchmarks.deadlines [--deadlines 5] [--requests 300] [--batches 4] [--gpu-jobs 20]
        [--quick] [--holdout placements,placement-per-size|batch|half] [--parts cpu,gpu,latency]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import math
import time
import zlib
from collections.abc import Mapping, Sequence

import kopf
import numpy as np

from rayjob_advisor import contract as ann
from rayjob_advisor.advice import planner
from rayjob_advisor.advice.features import Features, features_from_rayjob
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import Observation, read_observations
from rayjob_advisor.profiles.shipped import shipped_data
from rayjob_advisor_testkit.advisor import running_advisor
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

WORKLOAD = "digits-cnn"
NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


def job_features(size: int, replicas: int, high: int, cpus: float):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: str(size), ann.BATCH_SIZE: "256", ann.BATCH_SCALING: "global", ann.EPOCHS: "1"},
        groups=[
            worker_group(replicas=replicas, maxReplicas=high, resources={"requests": {"cpu": f"{int(cpus * 1000)}m"}})
        ],
    )
    return features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))


REGIMES = {  # where deadlines are drawn, relative to the true runtimes of a job's possible sizes
    "loose": lambda totals: (min(totals), 2 * max(totals)),
    "tight": lambda totals: (min(totals), 1.15 * min(totals)),
}


Tally = dict[str, dict[str, float]]  # policy -> hits, jobs, resource-seconds, false claims


def new_tally() -> Tally:
    return collections.defaultdict(lambda: {"hits": 0.0, "jobs": 0.0, "cost": 0.0, "false claims": 0.0})


def oracle(sizes: Sequence[int], totals: dict[int, float], left: float) -> int:
    """The size of fewest resource-seconds that truly fits the deadline, else the fastest."""
    fitting = [n for n in sizes if totals[n] <= left]
    return min(fitting, key=lambda n: n * totals[n]) if fitting else min(sizes, key=totals.__getitem__)


def record(
    tally: Tally,
    chosen_by: Sequence[tuple[str, int]],
    totals: dict[int, float],
    left: float,
    per_size: float = 1.0,
    claims: Mapping[str, bool] | None = None,
) -> None:
    """Each policy's job: a hit when its size truly fits, and its cost, size x ``per_size`` x true seconds.

    ``claims``: whether a policy said its size meets the deadline (the planner's ``meets_deadline``); a claim
    is false when the size truly misses — the figure a user who trusts ``enforce`` pays for.
    """
    for name, chosen in chosen_by:
        missed = totals[chosen] > left
        tally[name]["jobs"] += 1
        tally[name]["hits"] += not missed
        tally[name]["cost"] += chosen * per_size * totals[chosen]
        tally[name]["false claims"] += missed and bool(claims and claims.get(name))


def share(tally: Tally, name: str, key: str) -> float:
    """A policy's count per job: its hit rate, or its false claims as a share of its plans."""
    return tally[name][key] / tally[name]["jobs"]


def replay(deadlines_per_size: int, regime: str) -> None:
    runs, _ = read_observations(shipped_data(WORKLOAD))
    repeat_of = lambda o: int(o.source.rsplit(":r", 1)[1])  # noqa: E731
    workers = sorted({o.workers for o in runs})
    cpus = runs[0].cpus_per_worker
    rng = np.random.default_rng(0)
    results = new_tally()
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
                plan = planner.recommend(job, model, NOW + dt.timedelta(seconds=left), NOW, 0.9, planner.Prices())
                chosen_by = (
                    ("planner", plan.replicas),
                    ("oracle", oracle(workers, totals, left)),
                    ("as submitted", submitted),
                )
                record(results, chosen_by, totals, left, cpus, claims={"planner": plan.meets_deadline})
    oracle_cost = results["oracle"]["cost"]
    print(
        f"\n{regime} deadlines: {int(results['planner']['jobs'])} jobs over the shipped profile ({len(runs)} real runs)"
    )
    print(f"{'policy':<14} {'deadline hits':>13} {'worker-seconds':>15} {'vs oracle':>10} {'false claims':>13}")
    for policy, r in results.items():
        claims = f"{share(results, policy, 'false claims'):>13.1%}" if policy == "planner" else f"{'-':>13}"
        hits, cost = share(results, policy, "hits"), r["cost"]
        print(f"{policy:<14} {hits:>13.1%} {cost:>15.1f} {cost / oracle_cost - 1:>+10.1%} {claims}")


# GPU scaling on the shipped Pollux profiles (module docstring).
POLLUX_WORKLOADS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
NODES, GPUS_PER_NODE = 4, 4
MAX_GPUS = NODES * GPUS_PER_NODE
MIN_CANDIDATES = 4
QUICK_SIZE_FOLDS = 2  # ``--quick``: placement-per-size fits 2 models per placement policy, not one per size
GROUP = "gpu-workers"


def canonical(gpus_per_node: Sequence[int]) -> str:
    """A placement as Pollux lists it: one digit per node, the smallest rotation of the string."""
    text = "".join(str(g) for g in gpus_per_node)
    return min(text[i:] + text[:i] for i in range(len(text)))


def placement(policy: str, gpus: int) -> str:
    """The nodes a policy lays ``gpus`` on: ``packed`` fills nodes 4 at a time, ``spread`` evens them over 4."""
    if policy == "packed":
        full, rest = divmod(gpus, GPUS_PER_NODE)
        return canonical([GPUS_PER_NODE] * full + ([rest] if rest else []))
    base, extra = divmod(gpus, NODES)
    return canonical([base + 1] * extra + [base] * (min(gpus, NODES) - extra))


@dataclasses.dataclass(frozen=True)
class PolluxProfile:
    """A shipped Pollux profile: its runs and the measured step time of every (placement, per-GPU batch)."""

    workload: str
    runs: list[Observation]
    steps: dict[tuple[str, int], float]
    samples: int  # the real training set

    @classmethod
    def shipped(cls, model: str) -> PolluxProfile:
        runs, _ = read_observations(shipped_data(f"pollux-{model}"))
        steps = {configuration(run): run.execution_seconds / steps_of(run) for run in runs}
        return cls(f"pollux-{model}", runs, steps, max(run.dataset_size for run in runs))

    def candidates(self, policy: str, batch: int) -> list[int]:
        """GPU counts 1..k whose placement under ``policy`` was measured at ``batch``."""
        gpus = 0
        while gpus < MAX_GPUS and (placement(policy, gpus + 1), batch) in self.steps:
            gpus += 1
        return list(range(1, gpus + 1))

    def most_measured(self, policy: str) -> int:
        """The per-GPU batch the profile ran most placements at, of those with enough candidates; ties: the middle
        one (``--holdout placement-per-size`` replays this batch only)."""
        usable = self.batches(policy, 0)
        runs = collections.Counter(b for _, b in self.steps)
        most = [b for b in usable if runs[b] == max(runs[u] for u in usable)]
        return most[len(most) // 2]

    def batches(self, policy: str, count: int) -> list[int]:
        """``count`` per-GPU batches with enough candidates, evenly spaced over those measured, the smallest and
        the largest included (one: the middle one; 0: all)."""
        usable = sorted(b for b in {b for _, b in self.steps} if len(self.candidates(policy, b)) >= MIN_CANDIDATES)
        if count <= 0 or count >= len(usable):
            return usable
        if count == 1:
            return [usable[len(usable) // 2]]
        return [usable[round(i)] for i in np.linspace(0, len(usable) - 1, count)]

    def training_runs(
        self, policy: str, batch: int, holdout: str = "placements", fold: int = 0, folds: int = 1
    ) -> list[Observation]:
        """The profile less the runs ``holdout`` names (module docstring): the policy's placements at ``batch`` of
        the GPU counts n with n % ``folds`` == ``fold`` (every count by default) and, for ``batch``, every run at it."""
        judged = {(placement(policy, n), batch) for n in range(1, MAX_GPUS + 1) if n % folds == fold}
        return [
            run
            for run in self.runs
            if not (configuration(run) in judged or (holdout == "batch" and configuration(run)[1] == batch))
        ]

    def truth(self, policy: str, batch: int, gpus: int, samples: int) -> float:
        """Seconds of one epoch over ``samples`` on ``gpus`` laid out by ``policy``, from the measured step time."""
        return math.ceil(samples / (batch * gpus)) * self.steps[(placement(policy, gpus), batch)]


def configuration(run: Observation) -> tuple[str, int]:
    """(placement, per-GPU batch) of a Pollux run, from its source ``pollux:<model>:<placement>:<batch>``."""
    _, _, where, batch = (run.source or "").split(":")
    return where, int(batch)


def steps_of(run: Observation) -> int:
    return math.ceil(run.dataset_size / (run.batch_size or run.workers))


def gpu_job(workload: str, samples: int, batch: int, gpus: int, high: int, policy: str) -> Features:
    """The Features of a real RayJob: ``gpus`` single-GPU worker pods, a per-worker batch, a spread hint if any."""
    group = worker_group(
        GROUP, resources={"limits": {"cpu": "8", "nvidia.com/gpu": "1"}}, replicas=gpus, minReplicas=1, maxReplicas=high
    )
    if policy == "spread":
        group["template"]["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"ray.io/group": GROUP}},
            }
        ]
    notes = {
        ann.WORKLOAD: workload,
        ann.DATASET_SIZE: str(samples),
        ann.EPOCHS: "1",
        ann.BATCH_SIZE_PER_WORKER: str(batch),
    }
    rayjob = make_rayjob(annotations=notes, groups=[group])
    job = features_from_rayjob(rayjob, ann.parse_inputs(notes))
    assert job.placement == (policy if policy == "spread" else None), job.placement
    return job


@dataclasses.dataclass(frozen=True)
class PerSize:
    """The planner's model under ``placement-per-size``: a job's n GPUs are asked of the model fitted without the
    placements at its batch of fold n % ``folds`` (one count per fold at ``MAX_GPUS`` folds), so every size a job
    may get is judged by a model that never saw it while it saw the job's other sizes."""

    models: dict[int, RuntimeModel]  # by fold
    folds: int

    def model(self, run: Features) -> RuntimeModel:
        return self.models[run.workers % self.folds]

    @property
    def measured_gpus_(self) -> tuple[float, ...]:
        return next(iter(self.models.values())).measured_gpus_

    def estimate(
        self, runs: Sequence[Features], confidence: float, seconds: Sequence[float] | None = None
    ) -> planner.Estimates:
        """Each run's ``RuntimeModel.estimate`` from its own fold's model, stacked."""
        asked = [None] * len(runs) if seconds is None else [[s] for s in seconds]
        parts = [self.model(run).estimate([run], confidence, a) for run, a in zip(runs, asked, strict=True)]
        stacked = {key: np.concatenate([getattr(part, key) for part in parts]) for key in ("p50", "upper")}
        chances = None if seconds is None else np.concatenate([part.probability for part in parts])
        return dataclasses.replace(parts[0], probability=chances, **stacked)

    def startup(self, runs: Sequence[Features]) -> list[float]:
        return [float(self.model(run).startup([run])[0]) for run in runs]


def fitted(
    profile: PolluxProfile, policy: str, batch: int, holdout: str, size_folds: int
) -> list[planner.RuntimePredictor]:
    """The models a job of ``holdout``'s protocol is planned with, which the jobs take in turn (module docstring);
    ``size_folds``: the folds of ``placement-per-size``."""
    if holdout == PER_SIZE:
        candidates = profile.candidates(policy, batch)
        folds = {n % size_folds for n in candidates}
        models = {f: RuntimeModel().fit(profile.training_runs(policy, batch, holdout, f, size_folds)) for f in folds}
        return [PerSize(models, size_folds)]
    folds = 2 if holdout == "half" else 1
    return [RuntimeModel().fit(profile.training_runs(policy, batch, holdout, f, folds)) for f in range(folds)]


def gpu_replay(
    profile: PolluxProfile,
    policy: str,
    batch: int,
    jobs: int,
    models: Sequence[planner.RuntimePredictor],
    everything: RuntimeModel,
) -> dict[str, Tally]:
    """Jobs of one workload, placement policy and per-GPU batch, per regime (module docstring), planned with
    ``models`` in turn; ``everything``: the model fitted on every run, for the trend ceiling."""
    gpus = profile.candidates(policy, batch)
    results: dict[str, Tally] = {}
    for regime, bounds in REGIMES.items():
        rng = np.random.default_rng(zlib.crc32(f"{profile.workload}:{policy}:{batch}:{regime}".encode()))
        tally = results[regime] = new_tally()
        for index in range(jobs):
            model = models[index % len(models)]
            samples = int(rng.uniform(0.125, 1.0) * profile.samples)
            totals = {n: profile.truth(policy, batch, n, samples) for n in gpus}
            left = rng.uniform(*bounds(list(totals.values())))
            submitted = int(rng.choice(gpus))
            job = gpu_job(profile.workload, samples, batch, submitted, gpus[-1], policy)
            plan = planner.recommend(job, model, NOW + dt.timedelta(seconds=left), NOW, 0.9, planner.Prices())
            trend = everything.trend([job.with_replicas(n) for n in gpus])
            chosen_by = (
                ("planner", plan.replicas),
                ("oracle", oracle(gpus, totals, left)),
                ("as submitted", submitted),
                ("ceiling", gpus[int(np.argmin(trend))]),
            )
            record(tally, chosen_by, totals, left, claims={"planner": plan.meets_deadline})
    return results


def add(into: Tally, tally: Tally) -> None:
    for name, counts in tally.items():
        for key, value in counts.items():
            into[name][key] += value


def scores(tally: Tally) -> str:
    """Hit rate and GPU-seconds against the oracle of the planner and of the jobs as submitted, the planner's false
    claims, the ceiling's hits (``HEADER``)."""
    oracle = tally["oracle"]["cost"]
    planned, submitted = (
        f"{share(tally, name, 'hits'):>7.1%} {tally[name]['cost'] / oracle - 1:>+9.1%}"
        for name in ("planner", "as submitted")
    )
    false_claims = share(tally, "planner", "false claims")
    ceiling = share(tally, "ceiling", "hits")
    return f"{int(tally['planner']['jobs']):>5} {planned} {false_claims:>12.1%}   {submitted}   {ceiling:>7.1%}"


HEADER = f"{'jobs':>5} {'planner hits, GPU-s, false claims':>34}   {'as submitted':>17}   {'ceiling':>7}"


PER_SIZE = "placement-per-size"
HOLDOUTS = {
    "placements": "the batch's runs on the policy's placements",
    "batch": "every run at the batch",
    "half": "the batch's runs on every other size's placement",
    PER_SIZE: "each size's placement at the most measured batch, one model per size",
}
POLICIES = ("packed", "spread")
LOOSE_HITS, LOOSE_EXTRA, FALSE_CLAIMS = 0.99, 0.10, 0.02  # issue 18's targets (``verdict``)
TARGETS = (
    f"loose >= {LOOSE_HITS:.0%} hits at <= +{LOOSE_EXTRA:.0%} GPU-s over the oracle; tight hits >= the ceiling's; "
    f"false claims <= {FALSE_CLAIMS:.0%} of plans"
)


def verdict(regime: str, tally: Tally) -> str:
    """PASS, or FAIL and the targets missed (``TARGETS``). Tight deadlines are judged against the trend ceiling, not a
    fixed rate: with one measurement per configuration no model can do better (issue 18's decision on issue 9)."""
    hits = share(tally, "planner", "hits")
    extra = tally["planner"]["cost"] / tally["oracle"]["cost"] - 1
    checks = {
        f"hits < {LOOSE_HITS:.0%}": regime == "loose" and hits < LOOSE_HITS,
        f"GPU-s > +{LOOSE_EXTRA:.0%}": regime == "loose" and extra > LOOSE_EXTRA,
        "hits < ceiling": regime == "tight" and hits < share(tally, "ceiling", "hits"),
        f"false claims > {FALSE_CLAIMS:.0%}": share(tally, "planner", "false claims") > FALSE_CLAIMS,
    }
    missed = [name for name, failed in checks.items() if failed]
    return "FAIL: " + ", ".join(missed) if missed else "PASS"


def gpu_replays(models: Sequence[str], batches: int, jobs: int, holdouts: Sequence[str], size_folds: int) -> None:
    """Every workload, protocol, placement policy and regime: a table per protocol and regime, then a summary row
    per (protocol, regime, placement) with its verdict. ``placement-per-size`` replays its one batch with as many
    jobs as the other protocols spread over their batches, so that every row judges as many plans."""
    overall: dict[tuple[str, str, str], Tally] = collections.defaultdict(new_tally)
    rows: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    seconds: dict[str, float] = collections.defaultdict(float)
    for model in models:
        profile = PolluxProfile.shipped(model)
        everything = RuntimeModel().fit(profile.runs)
        for holdout in holdouts:
            started = time.perf_counter()
            for policy in POLICIES:
                chosen = profile.batches(policy, batches)
                replays = (
                    [(profile.most_measured(policy), jobs * len(chosen))]
                    if holdout == PER_SIZE
                    else [(batch, jobs) for batch in chosen]
                )
                per_regime: dict[str, Tally] = collections.defaultdict(new_tally)
                for batch, count in replays:
                    planned_with = fitted(profile, policy, batch, holdout, size_folds)
                    for regime, tally in gpu_replay(profile, policy, batch, count, planned_with, everything).items():
                        add(per_regime[regime], tally)
                        add(overall[(holdout, regime, policy)], tally)
                where = f"{profile.workload} {policy} b={','.join(str(batch) for batch, _ in replays)}"
                for regime, tally in per_regime.items():
                    rows[(holdout, regime)].append(f"{where:<44} {scores(tally)}")
            seconds[holdout] += time.perf_counter() - started
    for (holdout, regime), lines in rows.items():
        print(f"\nGPU scaling, {regime} deadlines (GPU-seconds vs the oracle; held out: {HOLDOUTS[holdout]})")
        print(f"{'workload, placement, per-GPU batches':<44} {HEADER}")
        print("\n".join(lines))
    print(f"\nsummary against issue 18's targets ({TARGETS})")
    print(f"{'protocol, regime, placement':<44} {HEADER}   verdict")
    order = sorted(overall, key=lambda key: (holdouts.index(key[0]), key[1], key[2]))
    verdicts = [verdict(regime, overall[(holdout, regime, policy)]) for holdout, regime, policy in order]
    for (holdout, regime, policy), said in zip(order, verdicts, strict=True):
        print(f"{f'{holdout} {regime} {policy}':<44} {scores(overall[(holdout, regime, policy)])}   {said}")
    failed = sum(said != "PASS" for said in verdicts)
    timing = ", ".join(f"{holdout} {seconds[holdout]:.0f} s" for holdout in holdouts)
    print(f"GPU replay: {f'FAIL ({failed} of {len(order)} rows)' if failed else 'PASS'} ({timing})")


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
            ann.BATCH_SCALING: "global",
            ann.EPOCHS: "1",
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
    parser.add_argument("--batches", type=int, default=4, help="per-GPU batches per Pollux workload (0: all)")
    parser.add_argument("--gpu-jobs", type=int, default=20, help="GPU jobs per workload, placement, batch, regime")
    parser.add_argument("--workloads", default=",".join(POLLUX_WORKLOADS), help="Pollux workloads to replay")
    parser.add_argument("--quick", action="store_true", help="one batch per workload, 10 jobs, 2 size folds")
    parser.add_argument(
        "--holdout", default=f"placements,{PER_SIZE}", help=f"what the profile lacks; some of {','.join(HOLDOUTS)}"
    )
    parser.add_argument("--parts", default="cpu,gpu,latency", help="which of cpu, gpu, latency to run")
    args = parser.parse_args()
    parts, holdouts = set(args.parts.split(",")), args.holdout.split(",")
    if unknown := set(holdouts) - set(HOLDOUTS):
        parser.error(f"--holdout: unknown {', '.join(sorted(unknown))}")
    if "cpu" in parts:
        for regime in REGIMES:
            replay(args.deadlines, regime)
    if "gpu" in parts:
        batches, jobs, size_folds = (1, 10, QUICK_SIZE_FOLDS) if args.quick else (args.batches, args.gpu_jobs, MAX_GPUS)
        gpu_replays(args.workloads.split(","), batches, jobs, holdouts, size_folds)
    if "latency" in parts:
        latencies(args.requests)


if __name__ == "__main__":
    main()
