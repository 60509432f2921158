"""A Ray Train callback that reports a run's progress to the advisor, which refines the RayJob's ETA (opt-in).

Add it to the trainer's ``RunConfig(callbacks=[AdvisorProgress(total=...)])``. Every
``ray.train.report`` counts as one unit of work done (``unit``: steps or epochs), or, with
``done_key``, the reported metric of that name says how many are done. Reports go out at most
every ``interval`` seconds (and the last one always), over HTTPS, to the controller's progress
endpoint, with a projected service-account token that the advisor checks with the API server.
The advisor's ``progress`` hook wires the head pod for it at admission (the token, the endpoint, the
job's name and the CA, in the environment this reads); without it, see docs/guides/running-jobs.md. The callback is
made in the driver (the entrypoint: on the head pod) and runs in Ray Train's controller, on the
driver's node, not in the workers. A report that fails is logged and dropped: the
advisor's prediction stands, and training never waits long or fails for it.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import ssl
import time
import urllib.error
import urllib.request
from typing import Any, Literal

import ray.train

from rayjob_advisor import contract

TOKEN_FILE = f"{contract.PROGRESS_TOKEN_DIR}/{contract.PROGRESS_TOKEN_PATH}"
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
TIMEOUT_SECONDS = 5.0
logger = logging.getLogger(__name__)


class AdvisorProgress(ray.train.UserCallback):
    """Reports ``done`` of ``total`` units to the advisor after Ray Train reports.

    Unset arguments come from the environment: ``RAYJOB_ADVISOR_PROGRESS_URL`` (e.g.
    ``https://rayjob-advisor-progress.rayjob-advisor.svc/progress``), ``RAYJOB_ADVISOR_RAYJOB`` (the
    RayJob's name; else ``RAYJOB_ADVISOR_RAY_CLUSTER``, its RayCluster's, which KubeRay names
    ``<rayjob>-<5 random characters>``), ``RAYJOB_ADVISOR_NAMESPACE`` (else the pod's own namespace),
    and the CA of the endpoint's certificate: ``RAYJOB_ADVISOR_PROGRESS_CA`` (a file), else
    ``RAYJOB_ADVISOR_PROGRESS_CA_PEM`` (the certificate itself), else the system's CAs.
    """

    def __init__(
        self,
        total: int,
        *,
        unit: Literal["steps", "epochs"] = "steps",
        done_key: str | None = None,
        url: str | None = None,
        rayjob: str | None = None,
        namespace: str | None = None,
        uid: str | None = None,
        token_file: str = TOKEN_FILE,
        ca_file: str | None = None,
        ca_pem: str | None = None,
        interval: float = 30.0,
    ) -> None:
        if total <= 0:
            raise ValueError(f"total must be positive, not {total}")
        self.total = total
        self.unit = unit
        self.done_key = done_key
        self.url = url or os.environ.get(contract.PROGRESS_URL_ENV)
        self.rayjob = rayjob or os.environ.get(contract.PROGRESS_RAYJOB_ENV) or _cluster_job()
        self.namespace = namespace or os.environ.get(contract.PROGRESS_NAMESPACE_ENV) or _own_namespace()
        self.uid = uid
        self.token_file = token_file
        self.ca_file = ca_file or os.environ.get(contract.PROGRESS_CA_ENV)
        self.ca_pem = None if self.ca_file else ca_pem or os.environ.get(contract.PROGRESS_CA_PEM_ENV)
        self.interval = interval
        self.done = 0.0
        self._sent = float("-inf")

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any) -> None:
        """Count the report; send the progress when ``interval`` has passed since the last one, or at the end."""
        reported = metrics[0].get(self.done_key) if self.done_key and metrics else None
        self.done = min(float(reported) if isinstance(reported, int | float) else self.done + 1, float(self.total))
        now = time.monotonic()
        if now - self._sent >= self.interval or self.done >= self.total:
            self._sent = now
            self.send()

    def report(self) -> dict[str, Any]:
        """The body of a progress report (the advisor's ``eta.Report``)."""
        body: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.rayjob,
            "done": self.done,
            "total": self.total,
            "unit": self.unit,
        }
        if self.uid:
            body["uid"] = self.uid
        return body

    def send(self) -> None:
        """POST the report; a failure is logged, never raised."""
        if not (self.url and self.rayjob and self.namespace):
            logger.warning("not reporting progress: set the advisor's URL, the RayJob's name and its namespace")
            return
        try:
            token = pathlib.Path(self.token_file).read_text().strip()  # re-read: the kubelet rotates it
            request = urllib.request.Request(
                self.url,
                data=json.dumps(self.report()).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            )
            context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_pem)
            with urllib.request.urlopen(request, context=context, timeout=TIMEOUT_SECONDS):
                pass
        except urllib.error.HTTPError as exc:
            logger.warning("the advisor refused the progress report (HTTP %s): %s", exc.code, exc.read()[:300])
        except (OSError, ValueError) as exc:
            logger.warning("could not report progress to %s: %s", self.url, exc)


def _cluster_job() -> str | None:
    """The RayJob's name from its RayCluster's (``<rayjob>-<5 random characters>``, KubeRay's
    ``GenerateRayClusterName``): what a job created with ``generateName`` is given at admission."""
    cluster = os.environ.get(contract.PROGRESS_RAY_CLUSTER_ENV, "")
    job, dash, suffix = cluster.rpartition("-")
    return job if dash and job and len(suffix) == 5 else None


def _own_namespace() -> str | None:
    """The pod's namespace, from its service-account mount (absent outside Kubernetes)."""
    try:
        return pathlib.Path(NAMESPACE_FILE).read_text().strip() or None
    except OSError:
        return None
