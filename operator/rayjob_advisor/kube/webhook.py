"""The mutating admission webhook for RayJob CREATE (thin; stateless replicas).

It applies what ``application.advise`` decides before KubeRay builds the
cluster: the prediction, the plan and — in ``enforce`` mode, on CREATE
only — the resized worker group. It is fail-open: it never denies a RayJob,
whatever goes wrong (bad annotations, a profile not yet fitted, our own bug,
kopf's); the reason goes back as an admission warning, which ``kubectl
apply`` prints. Only a body that is no AdmissionReview gets an HTTP error
(4xx, see ``admission``). It has no side effects, so ``dryRun`` requests are
answered the same way (and not counted as rewrites). Webhook replicas watch
RuntimeProfiles read-only and fit them themselves: they write nothing to the
cluster.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp.web
import kopf

from rayjob_advisor import application, contract, reasons
from rayjob_advisor.errors import RetryableError, UserError
from rayjob_advisor.kube import admission, serving, wiring
from rayjob_advisor.kube.config import OperatorConfig
from rayjob_advisor.kuberay.manifest import merge
from rayjob_advisor.profiles.store import ProfileStore

REGISTRY = wiring.registry()
logger = logging.getLogger(__name__)


class AdmissionServer(kopf.WebhookServer):
    """kopf's HTTPS server, with the AdmissionReview checked before kopf sees it, no 500s, and ``serving``'s limits.

    kopf's own ``_serve`` reads at most aiohttp's 1 MiB (a bigger, valid review
    got a 413) and answers 500 to several malformed envelopes. kopf's own
    ``__call__`` runs aiohttp with its defaults: an hour for a connection's
    headers, no limit on its body or on the number of connections. Like kopf's,
    it restarts with the new certificate when the files change (checked every
    ``file_check_interval`` seconds).
    """

    def __init__(self, *, limits: serving.Limits, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limits = limits

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        """kopf's ``WebhookServer.__call__`` (1.45) on ``serving.serve``: a client config per certificate served."""
        path = self.path.rstrip("/") if self.path else ""
        review = functools.partial(self._review, fn)
        route = serving.post(f"{path}/{{id:.*}}", review, limits=self.limits, max_bytes=admission.MAX_REQUEST_BYTES)
        port = self.port or self._allocate_free_port()
        files = (self.certfile, self.pkeyfile, self.cafile)
        sites = serving.serve(
            [route],
            host=self.addr or None,
            port=port,
            limits=self.limits,
            tls=self._build_ssl,
            files=files,
            check_interval=self.file_check_interval,
        )
        async with contextlib.aclosing(sites):
            async for cadata in sites:
                yield self._client_config(port, cadata)

    def _client_config(self, port: int, cadata: bytes | None) -> kopf.WebhookClientConfig:
        """What the webhook configuration points at, as kopf builds it: the URL and the CA of the served certificate."""
        host = self.host or self.DEFAULT_HOST or self._get_accessible_addr(self.addr)
        url = self._build_url("http" if self.insecure else "https", host, port, self.path or "")
        logger.debug(f"Listening for webhooks at {url}")
        client_config = kopf.WebhookClientConfig(url=url)
        if cadata is not None:
            client_config["caBundle"] = base64.b64encode(cadata).decode("ascii")
        return client_config

    @staticmethod
    async def _review(fn: kopf.WebhookFn, request: aiohttp.web.Request, body: bytes) -> aiohttp.web.Response:
        try:
            data, review = admission.read_review(body)
        except UserError as exc:  # admission.BadReview
            reason = ascii(str(exc))[1:-1][:200]  # one line of ASCII in the status line; all of it in the body
            return aiohttp.web.Response(status=400, reason=reason, text=str(exc))
        try:
            response: Mapping[str, Any] = await fn(
                data,  # type: ignore[arg-type]  # checked by the AdmissionReview model
                webhook=request.match_info.get("id"),
                headers=dict(request.headers),
                sslpeer=request.transport.get_extra_info("peercert") if request.transport else None,
            )
        except Exception as exc:  # fail open (also on a resource we do not handle); logged with its traceback
            logger.exception("the admission request failed; admitting the object unchanged")
            response = admission.unchanged(review, f"rayjob-advisor: could not answer: {type(exc).__name__}: {exc}")
        return aiohttp.web.json_response(response)


def serve(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """HTTPS on ``webhook_port`` with the mounted certificate; the chart owns the webhook configuration.

    The certificate files are re-read every ``serving.CERT_CHECK_SECONDS``: the server restarts with a
    renewed certificate (cert-manager's, or the chart's Secret replaced) without a new pod.
    """
    settings.admission.server = AdmissionServer(
        addr="0.0.0.0",
        port=config.webhook_port,
        certfile=config.tls_cert_file,
        pkeyfile=config.tls_key_file,
        file_check_interval=serving.CERT_CHECK_SECONDS,
        limits=serving.Limits.of(config),
    )
    settings.admission.managed = None


@kopf.on.mutate(
    *wiring.RAYJOBS, operations=["CREATE"], id="advise", ignore_failures=True, side_effects=False,
    when=wiring.in_scope, registry=REGISTRY,
)  # fmt: skip
def admit(
    body: kopf.Body,
    namespace: str | None,
    patch: kopf.Patch,
    warnings: list[str],
    dryrun: bool,
    memo: wiring.Memo,
    operation: str | None = None,
    **_: Any,
) -> None:
    """Apply the advice to the RayJob being created; its messages become admission warnings.

    kopf calls this for any operation sent to the webhook (``operations`` only
    goes into a webhook configuration it manages): only a CREATE may resize.
    """
    creating = operation == "CREATE"
    with memo.metrics.admission_duration.time():
        advice = _advice_or_unchanged(body, memo.store, memo.policy(namespace), creating=creating)
    warnings.extend(admission.warnings(advice.warnings))
    merge(patch, advice.patch)
    if advice.resized and not dryrun:
        memo.metrics.rewrites.labels("webhook").inc()


@kopf.on.mutate(
    *wiring.RAYJOBS, operations=["CREATE", "UPDATE"], id="guard", ignore_failures=True, side_effects=False,
    registry=REGISTRY,
)  # fmt: skip
def guard(
    body: kopf.Body,
    userinfo: kopf.UserInfo,
    patch: kopf.Patch,
    memo: wiring.Memo,
    old: kopf.Body | None = None,
    **_: Any,
) -> None:
    """Keep the ``held`` annotation the advisor's alone, on every RayJob's CREATE and UPDATE in any namespace (``old``:
    the RayJob before an UPDATE, from kopf)."""
    account = memo.config.controller_account
    by_advisor = account is not None and userinfo.get("username") == account
    merge(patch, application.guarded(body, old, by_advisor=by_advisor))


def _advice_or_unchanged(
    body: kopf.Body, store: ProfileStore, policy: application.Policy, *, creating: bool
) -> application.Advice:
    """Fail open: a profile still being fitted, or our own bug, admits the RayJob unchanged with a warning."""
    try:
        now = contract.now()
        advice = application.advise(body, store, policy=policy, may_resize=creating, now=now, creating=creating)
        return admission.within_limits(body, advice, may_resize=creating)
    except RetryableError as exc:
        text = f"{exc}; admitted unchanged, the controller will predict shortly"
    except Exception as exc:  # fail open: our bug must never block a RayJob; logged with its traceback
        logger.exception("advice failed; admitting the RayJob unchanged")
        text = f"could not advise: {type(exc).__name__}: {exc}; admitted unchanged"
    return application.Advice(messages=(application.Message(reason=reasons.NOT_ADVISED, text=text, warning=True),))
