"""The progress endpoint of the controller: running jobs report their progress, which refines their ETA.

``POST /progress`` over HTTPS with a JSON ``eta.Report`` and a bearer token:
a projected service-account token (audience ``progress_audience``) mounted
into the Ray head pod, as Kubeflow Trainer's progress reports use (KEP-2779).
The API server reviews it (TokenReview), and a report is bound to its job:
the token's pod (``authentication.kubernetes.io/pod-name``) must be a pod of
the job's RayCluster (its ``ray.io/cluster`` label is the job's
``status.rayClusterName``, so an older job of that name does not count
either). A token that names no pod is taken only from the head pod's service
account, with the job's ``uid`` in the report.

Any pod of the cluster can reach the endpoint, so every cost is bounded: an
address's new connections beyond ``CONNECTION_RATE`` are reset before their
TLS handshake (``serving``); a token's review is remembered (accepted: ``REVIEW_SECONDS``, refused:
``REFUSAL_SECONDS``) and asked once however many requests carry it, and
never retried; a token bucket per client address (before the review) and per
service account (after it) answers 429 with ``Retry-After``; reports closer
than ``REPORT_SECONDS`` for one job from one pod are answered with the last
ETA, without an API call (but the last, all work done); the API calls run in ``WORKERS`` threads of the
endpoint's own, never in those the learning of finished jobs waits for.

The answer is the refined ETA, or a status and one line saying what was
wrong: 400 (a malformed report), 401 (no or a bad token), 403 (another
namespace's account, a pod not of the job), 404 (no such job), 409 (the job
is not running, was never predicted, or is another job of that name), 429
(too many requests), 503 (the API server could not be asked); and, from the
server it shares with the webhook (``serving``), 413 (a body over 16 KiB),
408 (a body too slow) or 503 (too many connections open). Any controller
replica may answer: it reads the job, writes its annotations, and the
leader's watch does the rest (gauges, warnings).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import hashlib
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import aiohttp.web
import kubernetes
import pydantic

from rayjob_advisor import contract
from rayjob_advisor.advice import eta
from rayjob_advisor.errors import NotRefinable, Rejected
from rayjob_advisor.kube import kubeapi, serving
from rayjob_advisor.kube.throttle import Answers, Buckets
from rayjob_advisor.kuberay.rayjob import RayJob

PATH = "/progress"
MAX_REPORT_BYTES = 16 * 1024  # a report is a few hundred bytes
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
POD_NAME = "authentication.kubernetes.io/pod-name"  # what a pod-bound token's review says of its pod
REVIEW_SECONDS = 60.0  # an accepted token's review is reused this long
REFUSAL_SECONDS = 10.0  # a refused token's
REPORT_SECONDS = 5.0  # a job's reports closer than this (from one pod) are answered with the last ETA
SOURCE_RATE, SOURCE_BURST = 10.0, 50.0  # requests per second, and at once, from one client address
# New connections per second, and at once, from one client address, before TLS: twice its requests', so a client
# within them gets its 429 (with Retry-After); a flood beyond is reset before its handshake
CONNECTION_RATE, CONNECTION_BURST = 2 * SOURCE_RATE, 2 * SOURCE_BURST
SUBJECT_RATE, SUBJECT_BURST = 2.0, 20.0  # reports per second, and at once, of one service account
WORKERS = 4  # the endpoint's own threads for its API calls
logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Reporter:
    """Who sent a report, as the API server's review of its token says: a service account, and its pod if bound."""

    namespace: str
    account: str
    pod: str | None


def bearer(headers: Mapping[str, str]) -> str:
    """The bearer token of the ``Authorization`` header; 401 without one."""
    scheme, _, token = headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Rejected(401, "no bearer token: send a projected service-account token as 'Authorization: Bearer ...'")
    return token.strip()


def parse_report(raw: bytes) -> eta.Report:
    """The report in a request body; 400 with pydantic's words when it is not one."""
    try:
        return eta.Report.model_validate_json(raw)
    except pydantic.ValidationError as exc:
        raise Rejected(400, f"not a progress report: {contract.validation_problems(exc, 'report')}") from None


def reporter(status: Mapping[str, Any], audience: str) -> Reporter:
    """Who a reviewed token (a TokenReview's ``status``) belongs to; 401 or 403 when nobody a report may come from."""
    if not status.get("authenticated"):
        raise Rejected(401, f"the token was not accepted: {status.get('error') or 'not authenticated'}")
    if audience not in (status.get("audiences") or ()):
        raise Rejected(401, f"the token is not meant for {audience!r}")
    user = status.get("user") or {}
    username = str(user.get("username") or "")
    namespace, _, name = username.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
    if not username.startswith(SERVICE_ACCOUNT_PREFIX) or not namespace or not name:
        raise Rejected(403, f"{username or 'the token'} is no service account; only a job's own pods may report")
    pods = (user.get("extra") or {}).get(POD_NAME) or []
    return Reporter(namespace, name, str(pods[0]) if pods else None)


def check_bound(reporter: Reporter, rayjob: RayJob, uid: str | None, pod_labels: Mapping[str, str] | None) -> None:
    """403 unless ``reporter`` may report for ``rayjob``: its pod is one of the job's RayCluster (``pod_labels``:
    the pod's, None when it is gone), or, with a token bound to no pod, it is the head pod's account and the report
    names the job's ``uid``."""
    job = f"RayJob {rayjob.namespace}/{rayjob.metadata.get('name')}"
    if reporter.pod is not None:
        cluster = rayjob.cluster_name
        if cluster is None or (pod_labels or {}).get(contract.RAY_CLUSTER_LABEL) != cluster:
            raise Rejected(403, f"pod {reporter.pod} is not a pod of {job}'s Ray cluster; only its own pods may report")
        return
    head = rayjob.head_service_account
    if reporter.account != head:
        raise Rejected(
            403, f"service account {reporter.account} is not {job}'s head pod's ({head}) and its token names no pod"
        )
    if uid is None:
        raise Rejected(403, f"a token that names no pod reports only with {job}'s uid")


class ProgressServer:
    """The HTTPS server of ``POST /progress`` in the operator's event loop (API calls in its own threads).

    It is ``serving``'s, as the webhook's is: bounded connections, body size and times, and a renewed
    certificate served to new connections once its files change.
    """

    def __init__(
        self,
        api: kubernetes.client.CustomObjectsApi,
        port: int,
        certificate: serving.Certificate,
        audience: str,
        limits: serving.Limits,
    ) -> None:
        self.api = api
        self.port = port
        self.certificate = certificate  # reporters are given its CA (RAYJOB_ADVISOR_PROGRESS_CA)
        self.audience = audience
        self.limits = limits
        self._server: serving.Server | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="progress")
        self._reviews: Answers[str, Mapping[str, Any]] = Answers(
            lambda status: REVIEW_SECONDS if status.get("authenticated") else REFUSAL_SECONDS
        )
        self._recent: Answers[tuple[str, str, str | None, Reporter], eta.Eta] = Answers(lambda _: REPORT_SECONDS)
        self._sources: Buckets[str] = Buckets(SOURCE_RATE, SOURCE_BURST)
        self._subjects: Buckets[tuple[str, str]] = Buckets(SUBJECT_RATE, SUBJECT_BURST)
        self.reviews = 0  # TokenReviews sent

    async def start(self) -> None:
        """Listening once this returns (or, while the certificate files do not load yet, once they do); serving until
        ``stop``."""
        route = serving.post(PATH, self.serve, limits=self.limits, max_bytes=MAX_REPORT_BYTES)
        limits = dataclasses.replace(self.limits, connection_rate=CONNECTION_RATE, connection_burst=CONNECTION_BURST)
        self._server = serving.Server([route], port=self.port, limits=limits, certificate=self.certificate)
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def serve(self, request: aiohttp.web.Request, body: bytes) -> aiohttp.web.Response:
        """One report: authenticated, authorized, recorded; any refusal is one line with its status."""
        try:
            _throttle(self._sources, request.remote or "", "from this address")
            token = bearer(request.headers)
            report = parse_report(body)
            refined = await self._record(token, report)
        except Rejected as exc:
            headers = {"Retry-After": str(math.ceil(exc.retry_after))} if exc.retry_after is not None else None
            return aiohttp.web.Response(status=exc.status, text=exc.text, headers=headers)
        except (kubernetes.client.ApiException, OSError) as exc:
            logger.warning("could not record a progress report: %s", exc)
            return aiohttp.web.Response(status=503, text=f"could not record the report: {type(exc).__name__}")
        times = {"eta": refined.median, "etaUpper": refined.upper}
        return aiohttp.web.json_response({key: contract.format_timestamp(value) for key, value in times.items()})

    async def _record(self, token: str, report: eta.Report) -> eta.Eta:
        who = reporter(await self._review(token), self.audience)
        _throttle(self._subjects, (who.namespace, who.account), f"of service account {who.namespace}/{who.account}")
        if who.namespace != report.namespace:  # before reading the job: no answer tells of another namespace's jobs
            raise Rejected(
                403, f"service account {who.namespace}/{who.account} may not report for a job in {report.namespace}"
            )
        job = (report.namespace, report.name, report.uid, who)
        recent = self._recent.recent(job)
        if recent is not None and report.done < report.total:  # reported a moment ago (the end is always recorded)
            return recent
        refined = await self._refine(who, report)
        self._recent.put(job, refined)
        return refined

    async def _review(self, token: str) -> Mapping[str, Any]:
        """The TokenReview's ``status`` of ``token``: remembered, and asked once for concurrent requests."""

        async def ask() -> Mapping[str, Any]:
            self.reviews += 1
            review = await self._call(kubeapi.review_token, self.api, token, [self.audience])
            return review.get("status") or {}

        return await self._reviews.get(hashlib.sha256(token.encode()).hexdigest(), ask)

    async def _refine(self, who: Reporter, report: eta.Report) -> eta.Eta:
        try:
            body = await self._call(kubeapi.read_rayjob, self.api, report.namespace, report.name, retry=False)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                raise Rejected(404, f"no RayJob {report.namespace}/{report.name}") from None
            raise
        rayjob = RayJob(body)
        uid = rayjob.metadata.get("uid")
        if report.uid is not None and report.uid != uid:
            raise Rejected(409, f"RayJob {report.namespace}/{report.name} is another job now (uid {uid})")
        labels = None
        if who.pod is not None:
            labels = await self._call(kubeapi.pod_labels, self.api, who.namespace, who.pod)
        check_bound(who, rayjob, report.uid, labels)
        try:
            refined, patch = eta.refine(body, report, contract.now())
        except NotRefinable as exc:
            raise Rejected(409, str(exc)) from None
        await self._call(kubeapi.patch_rayjob, self.api, report.namespace, report.name, patch, retry=False)
        return refined

    async def _call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call`` in the endpoint's own threads."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(call, *args, **kwargs)
        )


def _throttle(buckets: Buckets[Any], key: object, whom: str) -> None:
    """429 with the seconds to wait, when ``key``'s bucket is empty."""
    wait = buckets.take(key)
    if wait:
        raise Rejected(429, f"too many progress reports {whom}; try again in {math.ceil(wait)} s", retry_after=wait)
