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

import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp.web
import kopf

from rayjob_advisor import application, contract, reasons
from rayjob_advisor.errors import RetryableError, UserError
from rayjob_advisor.kube import admission, kubeapi, serving, wiring
from rayjob_advisor.kube.config import OperatorConfig
from rayjob_advisor.kuberay.manifest import merge

REGISTRY = wiring.registry()
logger = logging.getLogger(__name__)


class AdmissionServer(kopf.WebhookServer):
    """kopf's HTTPS server, with the AdmissionReview checked before kopf sees it, no 500s, and ``serving``'s limits.

    kopf's own ``_serve`` reads at most aiohttp's 1 MiB (a bigger, valid review
    got a 413) and answers 500 to several malformed envelopes. kopf's own
    ``__call__`` runs aiohttp with its defaults: an hour for a connection's
    headers, no limit on its body or on the number of connections. A renewed
    certificate (the files checked every ``file_check_interval`` seconds) is
    served to new connections, where kopf's restarts its server and refuses
    connections meanwhile.
    """

    def __init__(self, *, limits: serving.Limits, certificate: serving.Certificate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limits = limits
        self.certificate = certificate

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        """kopf's ``WebhookServer.__call__`` (1.45) on ``serving.serve``: one client config, once listening."""
        path = self.path.rstrip("/") if self.path else ""
        review = functools.partial(self._review, fn)
        route = serving.post(f"{path}/{{id:.*}}", review, limits=self.limits, max_bytes=admission.MAX_REQUEST_BYTES)
        port = self.port or self._allocate_free_port()
        sites = serving.serve(
            [route],
            port=port,
            limits=self.limits,
            certificate=self.certificate,
            check_interval=self.file_check_interval,
        )
        async with contextlib.aclosing(sites):
            async for _ in sites:  # once listening; iterating further reloads renewed certificates
                yield self._client_config(port)

    def _client_config(self, port: int) -> kopf.WebhookClientConfig:
        """What a webhook configuration would point at, as kopf builds it (the chart owns ours: ``managed`` None)."""
        host = self.host or self.DEFAULT_HOST or self._get_accessible_addr(self.addr)
        url = self._build_url("https", host, port, self.path or "")
        logger.debug(f"Listening for webhooks at {url}")
        return kopf.WebhookClientConfig(url=url)

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

    With ``webhook_client_ca_file``, only a client with a certificate of that CA (the API server's) completes a
    handshake: another pod cannot send a forged AdmissionReview naming another namespace and read its prediction.

    The certificate files are re-read every ``serving.CERT_CHECK_SECONDS``: the server restarts with a
    renewed certificate (cert-manager's, or the chart's Secret replaced) without a new pod.
    """
    certificate = serving.Certificate.of(config)
    if certificate is None:  # OperatorConfig refuses a webhook role without both files
        raise ValueError("the webhook role needs tls_cert_file and tls_key_file")
    settings.admission.server = AdmissionServer(
        port=config.webhook_port,
        file_check_interval=serving.CERT_CHECK_SECONDS,
        limits=serving.Limits.of(config),
        certificate=dataclasses.replace(certificate, client_ca=config.webhook_client_ca_file),
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
        advice = _advice_or_unchanged(body, memo, memo.policy(namespace), creating=creating)
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
    body: kopf.Body, memo: wiring.Memo, policy: application.Policy, *, creating: bool
) -> application.Advice:
    """Fail open: a profile still being fitted, an API server that does not answer, or our own bug, admits the
    RayJob unchanged with a warning. A clusterSelector job's RayCluster is read once, briefly: admission
    waits for it."""
    try:
        clusters = functools.partial(kubeapi.read_raycluster, memo.kube, admission=True)
        now = contract.now()
        advice = application.advise(
            body, memo.store, policy=policy, may_resize=creating, now=now, clusters=clusters, creating=creating
        )
        return admission.within_limits(body, advice, may_resize=creating)
    except RetryableError as exc:
        text = f"{exc}; admitted unchanged, the controller will predict shortly"
    except Exception as exc:  # fail open: our bug must never block a RayJob; logged with its traceback
        logger.exception("advice failed; admitting the RayJob unchanged")
        text = f"could not advise: {type(exc).__name__}: {exc}; admitted unchanged"
    return application.Advice(messages=(application.Message(reason=reasons.NOT_ADVISED, text=text, warning=True),))
