"""Prometheus metrics (DESIGN §7): the advisor's own accuracy, decisions and speed, on ``/metrics``.

Per-job gauges are labelled ``namespace, name, uid`` (as KubeRay's
``kuberay_job_execution_duration_seconds`` is, so the two join) and expire
``job_ttl`` seconds after the job finished, so finished jobs do not pile up
as series forever. Per-workload series are labelled ``namespace, workload``:
the job's namespace, so that one tenant's jobs never move another's accuracy
alerts, and a workload that resolved to a profile in it (one fitted there, or
a job there predicted from it), else ``other``: a tenant's made-up workload
names never become series. Nor do more than ``MAX_WORKLOAD_LABELS`` of them:
a workload's first finished job creates its profile (so a made-up name
resolves once a job of it finishes), and one tenant's hundreds of profiles
must not grow everyone's series. Namespaces are the cluster's, which tenants
do not make.
"""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import aiohttp.web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from rayjob_advisor import __version__
from rayjob_advisor.advice.completions import Completion, DeadlineOutcome
from rayjob_advisor.advice.eta import Eta
from rayjob_advisor.background import BackgroundLoop

PREFIX = "rayjob_advisor_"
ERROR_BUCKETS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0)
ADMISSION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
JOB_LABELS = ("namespace", "name", "uid")
DEADLINE_OUTCOMES = ("met", "missed", "failed")  # completions.DeadlineOutcome.outcome
REWRITE_PATHS = ("controller", "webhook")
LOOPS = ("refit", "sweep")  # the background loops' names
WORKLOAD_LABELS = ("namespace", "workload")
OTHER = "other"  # the workload label of a job whose workload resolved to no profile
MAX_WORKLOAD_LABELS = 256
"""The (namespace, workload) pairs that may become labels, over all namespaces: the first to resolve, in the
process's life; later ones are ``other``. A workload costs about 20 series (its error histogram's buckets and the
counters); 256 keep the advisor's series in the thousands however many profiles the tenants make."""
JobKey = tuple[str, str, str]


JOB_GAUGES = (
    ("predicted", "predicted_runtime_seconds", "the advisor's median prediction of the job's execution time"),
    ("actual", "actual_runtime_seconds", "the job's measured execution time (rayJobInfo end - start)"),
    (
        "eta",
        "eta_timestamp_seconds",
        "when the running job is expected to end (Unix time; median, refined by progress)",
    ),
    ("eta_upper", "eta_upper_timestamp_seconds", "when the running job ends at the latest (Unix time; upper bound)"),
)


class JobGauges(Collector):
    """The per-job gauges of ``JOB_GAUGES`` (runtimes, ETA), dropped ``ttl`` s after the job ends."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._jobs: dict[JobKey, dict[str, float]] = {}
        self._lock = threading.Lock()

    def set(self, job: JobKey, **values: float) -> None:
        with self._lock:
            self._jobs.setdefault(job, {}).update(values)

    def finish(self, job: JobKey, actual: float | None) -> None:
        """The job ended: its series expire after ``ttl``; an ended job has no ETA any more."""
        extra = {"actual": actual} if actual is not None else {}
        with self._lock:
            values = self._jobs.setdefault(job, {})
            values.pop("eta", None)
            values.pop("eta_upper", None)
            values.update(expires=time.monotonic() + self.ttl, **extra)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = time.monotonic()
        with self._lock:
            for job in [j for j, v in self._jobs.items() if v.get("expires", now + 1) <= now]:
                del self._jobs[job]
            jobs = {job: dict(values) for job, values in self._jobs.items()}
        for key, name, help_text in JOB_GAUGES:
            family = GaugeMetricFamily(f"{PREFIX}{name}", help_text, labels=JOB_LABELS)
            for job, values in jobs.items():
                if key in values:
                    family.add_metric(job, values[key])
            yield family


class LoopFailures(Collector):
    """Each background loop's failed units of work (a job of the sweep, a profile's publication), as it counts them.

    The loops are those ``loops()`` lists when scraped; the known ones start at 0, as every counter here does.
    """

    def __init__(self) -> None:
        self.loops: Callable[[], Iterable[BackgroundLoop]] = list

    def collect(self) -> Iterator[CounterMetricFamily]:
        counts = dict.fromkeys(LOOPS, 0) | {loop.name: loop.failures for loop in self.loops()}
        family = CounterMetricFamily(
            f"{PREFIX}background_failures",
            "units of work a background loop could not do (each tried again)",
            labels=["loop"],
        )
        for name, count in counts.items():
            family.add_metric([name], count)
        yield family


class Metrics:
    """Every metric the controller and the webhook export, in their own registry."""

    def __init__(self, job_ttl: float = 600.0) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.predictions = Counter(
            f"{PREFIX}predictions",
            "RayJobs predicted (result=predicted), not (error), or waiting for their workload's first profile "
            "(unprofiled)",
            [*WORKLOAD_LABELS, "result"],
            registry=r,
        )
        self.prediction_error = Histogram(
            f"{PREFIX}prediction_error_ratio", "|predicted - actual| / actual of finished jobs", WORKLOAD_LABELS,
            buckets=ERROR_BUCKETS, registry=r,
        )  # fmt: skip
        self.underestimates = Counter(
            f"{PREFIX}underestimates", "finished jobs that ran longer than predicted", WORKLOAD_LABELS, registry=r
        )
        self.upper_bound_exceeded = Counter(
            f"{PREFIX}upper_bound_exceeded",
            "running jobs that ran longer than the prediction's upper bound (its coverage misses)",
            WORKLOAD_LABELS,
            registry=r,
        )
        self.rewrites = Counter(f"{PREFIX}rewrites", "RayJobs resized in enforce mode", ["path"], registry=r)
        self.deadline_outcomes = Counter(
            f"{PREFIX}deadline_outcomes", "finished jobs with a deadline", ["outcome"], registry=r
        )
        # Known label values start at 0: increase() and rate() count nothing of a series' first sample, so a counter
        # that appeared at 1 would hide its first event from the dashboard and the alerts.
        for outcome in DEADLINE_OUTCOMES:
            self.deadline_outcomes.labels(outcome)
        for path in REWRITE_PATHS:
            self.rewrites.labels(path)
        self.unlearned = Counter(
            f"{PREFIX}jobs_not_learned", "finished jobs not learned from, by outcome", ["outcome"], registry=r
        )
        self.model_cv_error = Gauge(
            f"{PREFIX}model_cv_error_ratio",
            "cross-validated MAPE of each profile's selected model",
            ["profile", "model"],
            registry=r,
        )
        self.admission_duration = Histogram(
            f"{PREFIX}admission_duration_seconds",
            "time to answer an AdmissionReview",
            buckets=ADMISSION_BUCKETS,
            registry=r,
        )
        build = Gauge(f"{PREFIX}build_info", "version of the running advisor", ["version", "python"], registry=r)
        build.labels(__version__, platform.python_version()).set(1)
        self.jobs = JobGauges(job_ttl)
        r.register(self.jobs)
        self.loop_failures = LoopFailures()
        r.register(self.loop_failures)
        self._models: dict[str, str] = {}
        self._workloads: set[tuple[str, str]] = set()  # (namespace, workload) resolved to a profile: labels

    def _labels(self, namespace: str, workload: str | None) -> tuple[str, str]:
        """A job's ``namespace, workload`` labels: its workload once it resolved to a profile there, else ``other``."""
        return namespace, workload if workload is not None and (namespace, workload) in self._workloads else OTHER

    def route(self) -> aiohttp.web.RouteDef:
        """``GET /metrics``, for ``serving``'s hardened server (prometheus_client's own held a thread per connection,
        however slow the client)."""

        async def scrape(_: aiohttp.web.Request) -> aiohttp.web.Response:
            return aiohttp.web.Response(
                body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
            )

        return aiohttp.web.get("/metrics", scrape)

    def _resolved(self, namespace: str, workload: str) -> None:
        """``workload`` resolved to a profile in ``namespace``: a label from now on, while ``MAX_WORKLOAD_LABELS``
        allow."""
        if len(self._workloads) < MAX_WORKLOAD_LABELS:
            self._workloads.add((namespace, workload))

    def profile_fitted(self, profile: str, namespace: str | None, workload: str, model: str, cv_error: float) -> None:
        """One series per profile: the previous model's goes when the selection changes. A profile of a namespace
        resolves its workload there (one outside any, such as the shipped one, does where a job is predicted)."""
        if namespace is not None:
            self._resolved(namespace, workload)
        previous = self._models.get(profile)
        if previous is not None and previous != model:
            self.model_cv_error.remove(profile, previous)
        self._models[profile] = model
        self.model_cv_error.labels(profile, model).set(cv_error)

    def advised(
        self, job: JobKey, workload: str | None, p50: float | None, error: str | None, resized: bool, path: str
    ) -> None:
        """One piece of advice given (by ``path``: controller or webhook); a prediction resolved its workload."""
        if p50 is not None and workload is not None:
            self._resolved(job[0], workload)
        result = "error" if error else "predicted" if p50 is not None else "unprofiled"
        self.predictions.labels(*self._labels(job[0], workload), result).inc()
        if p50 is not None:
            self.jobs.set(job, predicted=p50)
        if resized:
            self.rewrites.labels(path).inc()

    def eta(self, job: JobKey, eta: Eta) -> None:
        """A running job's current ETA (at start, then after each progress report)."""
        self.jobs.set(job, eta=eta.median.timestamp(), eta_upper=eta.upper.timestamp())

    def overran(self, namespace: str, workload: str | None) -> None:
        """A running job passed its prediction's upper bound (counted once per job)."""
        self.upper_bound_exceeded.labels(*self._labels(namespace, workload)).inc()

    def learned(self, job: JobKey, completion: Completion | None, deadline: DeadlineOutcome | None) -> None:
        """A finished job: its actual runtime, our error, its deadline outcome, or why it was not learned."""
        observation = completion.observation if completion else None
        self.jobs.finish(job, observation.execution_seconds if observation else None)
        if deadline is not None:
            self.deadline_outcomes.labels(deadline.outcome).inc()
        if completion is None:
            return
        if observation is None:
            self.unlearned.labels(completion.outcome).inc()
            return
        labels = self._labels(job[0], observation.workload)
        if completion.relative_error is not None and completion.predicted_seconds is not None:
            self.prediction_error.labels(*labels).observe(completion.relative_error)
            if completion.predicted_seconds < observation.execution_seconds:
                self.underestimates.labels(*labels).inc()
