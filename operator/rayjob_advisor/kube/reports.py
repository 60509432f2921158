"""The progress endpoint of the controller: running jobs report their progress, which refines their ETA.

``POST /progress`` over HTTPS with a JSON ``eta.Report`` and a bearer token:
a projected service-account token (audience ``progress_audience``) mounted
into the Ray pods, as Kubeflow Trainer's progress reports use. The API
server reviews it (TokenReview); only a service account of the RayJob's own
namespace may report for it. The answer is the refined ETA, or a status and
one line saying what was wrong: 400 (a malformed report), 401 (no or a bad
token), 403 (another namespace's account), 404 (no such job), 409 (the job
is not running, was never predicted, or is another job of that name), 503
(the API server could not be asked); and, from the server it shares with
the webhook (``serving``), 413 (a body over 16 KiB), 408 (a body too slow)
or 503 (too many connections open). Any controller replica may answer: it
reads the job, writes its annotations, and the leader's watch does the rest
(gauges, warnings).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import aiohttp.web
import kubernetes
import pydantic

from rayjob_advisor import contract
from rayjob_advisor.advice import eta
from rayjob_advisor.errors import NotRefinable, Rejected
from rayjob_advisor.kube import kubeapi, serving

PATH = "/progress"
MAX_REPORT_BYTES = 16 * 1024  # a report is a few hundred bytes
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
logger = logging.getLogger(__name__)


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


def service_account(review: Mapping[str, Any], audience: str) -> tuple[str, str]:
    """The namespace and name of the service account a reviewed token belongs to; 401 or 403 otherwise."""
    status = review.get("status") or {}
    if not status.get("authenticated"):
        raise Rejected(401, f"the token was not accepted: {status.get('error') or 'not authenticated'}")
    if audience not in (status.get("audiences") or ()):
        raise Rejected(401, f"the token is not meant for {audience!r}")
    username = str((status.get("user") or {}).get("username") or "")
    namespace, _, name = username.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
    if not username.startswith(SERVICE_ACCOUNT_PREFIX) or not namespace or not name:
        raise Rejected(403, f"{username or 'the token'} is no service account; only a job's own pods may report")
    return namespace, name


class ProgressServer:
    """The HTTPS server of ``POST /progress`` in the operator's event loop (API calls run in threads).

    It is ``serving``'s, as the webhook's is: bounded connections, body size and times, and a renewed
    certificate served once its files change.
    """

    def __init__(
        self,
        api: kubernetes.client.CustomObjectsApi,
        port: int,
        certfile: str,
        keyfile: str,
        audience: str,
        limits: serving.Limits,
    ) -> None:
        self.api = api
        self.port = port
        self.certfile = certfile
        self.keyfile = keyfile
        self.audience = audience
        self.limits = limits
        self._sites: AsyncGenerator[bytes | None] | None = None
        self._renewals: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listening once this returns (certificate files that do not load raise here); serving until ``stop``."""
        route = serving.post(PATH, self.serve, limits=self.limits, max_bytes=MAX_REPORT_BYTES)
        sites = serving.serve(
            [route],
            host="0.0.0.0",
            port=self.port,
            limits=self.limits,
            tls=self._tls,
            files=(self.certfile, self.keyfile),
            check_interval=serving.CERT_CHECK_SECONDS,
        )
        self._sites = sites
        await anext(sites)
        self._renewals = asyncio.create_task(self._follow(sites))

    @staticmethod
    async def _follow(sites: AsyncGenerator[bytes | None]) -> None:
        async for _ in sites:  # each renewal of the certificate
            pass

    async def stop(self) -> None:
        if self._renewals is not None:
            self._renewals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewals
        if self._sites is not None:
            await self._sites.aclose()

    def _tls(self) -> tuple[None, ssl.SSLContext]:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certfile, self.keyfile)
        return None, context  # reporters are given the CA (RAYJOB_ADVISOR_PROGRESS_CA)

    async def serve(self, request: aiohttp.web.Request, body: bytes) -> aiohttp.web.Response:
        """One report: authenticated, authorized, recorded; any refusal is one line with its status."""
        try:
            token = bearer(request.headers)
            report = parse_report(body)
            refined = await self._record(token, report)
        except Rejected as exc:
            return aiohttp.web.Response(status=exc.status, text=exc.text)
        except (kubernetes.client.ApiException, OSError) as exc:
            logger.warning("could not record a progress report: %s", exc)
            return aiohttp.web.Response(status=503, text=f"could not record the report: {type(exc).__name__}")
        times = {"eta": refined.median, "etaUpper": refined.upper}
        return aiohttp.web.json_response({key: contract.format_timestamp(value) for key, value in times.items()})

    async def _record(self, token: str, report: eta.Report) -> eta.Eta:
        review = await asyncio.to_thread(kubeapi.review_token, self.api, token, [self.audience])
        namespace, account = service_account(review, self.audience)
        if namespace != report.namespace:  # before reading the job: no answer tells of another namespace's jobs
            raise Rejected(403, f"service account {namespace}/{account} may not report for a job in {report.namespace}")
        try:
            rayjob = await asyncio.to_thread(kubeapi.read_rayjob, self.api, report.namespace, report.name)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                raise Rejected(404, f"no RayJob {report.namespace}/{report.name}") from None
            raise
        uid = (rayjob.get("metadata") or {}).get("uid")
        if report.uid is not None and report.uid != uid:
            raise Rejected(409, f"RayJob {report.namespace}/{report.name} is another job now (uid {uid})")
        try:
            refined, patch = eta.refine(rayjob, report, contract.now())
        except NotRefinable as exc:
            raise Rejected(409, str(exc)) from None
        await asyncio.to_thread(kubeapi.patch_rayjob, self.api, report.namespace, report.name, patch)
        return refined
