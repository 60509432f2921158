"""The sweep of running RayJobs: every few seconds, the leader posts the warnings that have become due.

No finalizer and no per-object kopf timer (kopf would add a finalizer for
one): the controller's event handler keeps the running jobs in a mapping,
and one background thread goes through it. A warning is recorded in the
job's ``alerts`` annotation before its Event is posted, so neither a
restart nor a new leader posts it twice (an Event lost in between is the
price: one missing rather than one repeated).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import kubernetes

from rayjob_advisor import contract, reasons
from rayjob_advisor.advice import eta
from rayjob_advisor.background import BackgroundLoop
from rayjob_advisor.kube import kubeapi
from rayjob_advisor.kube.metrics import JobKey, Metrics
from rayjob_advisor.kuberay.rayjob import RayJob


class Sweeper(BackgroundLoop):
    """Checks every job in ``running`` each ``interval`` seconds while ``leads()`` (one background loop)."""

    def __init__(
        self,
        running: Mapping[JobKey, Mapping[str, Any]],
        api: kubernetes.client.CustomObjectsApi,
        metrics: Metrics,
        leads: Callable[[], bool],
        interval: float,
    ) -> None:
        super().__init__("sweep", interval)
        self.running = running
        self.api = api
        self.metrics = metrics
        self.leads = leads
        self._posted: set[tuple[str, str]] = set()  # (uid, reason): posted, whatever the watch has shown us yet

    def waiting(self) -> str | None:
        return f"{len(self.running)} running RayJobs wait for their checks" if self.running else None

    def step(self) -> None:
        if self.leads():
            self.sweep(contract.now())

    def sweep(self, now: dt.datetime) -> None:
        """Post what is due on every running job (a failure on one job does not stop the others)."""
        jobs = dict(self.running)
        uids = {uid for _, _, uid in jobs}
        self._posted = {(uid, reason) for uid, reason in self._posted if uid in uids}
        for (namespace, name, uid), body in jobs.items():
            try:
                due = [alert for alert in eta.due_alerts(body, now) if (uid, alert.reason) not in self._posted]
                if due:
                    self._warn(namespace, name, uid, body, due)
            except Exception:  # noqa: BLE001 - this job's failure (counted): the others go on
                self.failed(f"RayJob {namespace}/{name}")
            else:
                self.succeeded()  # each warning may take the API's retries: a long sweep is not a stuck one

    def _warn(self, namespace: str, name: str, uid: str, body: Mapping[str, Any], due: list[eta.Alert]) -> None:
        kubeapi.patch_rayjob(self.api, namespace, name, eta.posted(body, due))
        for alert in due:
            self._posted.add((uid, alert.reason))
            if alert.reason == reasons.RUNTIME_OVERRUN:
                self.metrics.overran(namespace, _workload(body))
            kubeapi.post_rayjob_event(self.api, body, alert.reason, alert.text)


def _workload(body: Mapping[str, Any]) -> str | None:
    """The job's workload as it names it (the ``workload`` label of the metrics; empty for the default one)."""
    rayjob = RayJob(body)
    return rayjob.annotations.get(contract.WORKLOAD) or rayjob.labels.get(contract.WORKLOAD)
