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

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp.web
import kopf

from rayjob_advisor import admission, application, profiles, wiring
from rayjob_advisor.config import OperatorConfig
from rayjob_advisor.rayjob import merge

REGISTRY = wiring.registry()
logger = logging.getLogger(__name__)


class AdmissionServer(kopf.WebhookServer):
    """kopf's HTTPS server, with the AdmissionReview checked before kopf sees it, and no 500s.

    kopf's own ``_serve`` reads at most aiohttp's 1 MiB (a bigger, valid review
    got a 413) and answers 500 to several malformed envelopes.
    """

    @staticmethod
    async def _serve(fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        try:
            data, review = admission.read_review(await _body(request))
        except admission.BadReview as exc:
            reason = ascii(str(exc))[1:-1][:200]  # one line of ASCII in the status line; all of it in the body
            return aiohttp.web.Response(status=exc.status, reason=reason, text=str(exc))
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


async def _body(request: aiohttp.web.Request) -> bytes:
    """The request body, read up to one byte past ``MAX_REQUEST_BYTES``: enough to tell a body too big."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size > admission.MAX_REQUEST_BYTES:
            break
    return b"".join(chunks)


def serve(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """HTTPS on ``webhook_port`` with the mounted certificate; the chart owns the webhook configuration."""
    settings.admission.server = AdmissionServer(
        addr="0.0.0.0", port=config.webhook_port, certfile=config.tls_cert_file, pkeyfile=config.tls_key_file
    )
    settings.admission.managed = None


@kopf.on.event(*wiring.PROFILES, registry=REGISTRY)
def profile_seen(
    type: str,
    namespace: str | None,
    name: str,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    memo: wiring.Memo,
    **_: Any,
) -> None:
    """Read-only mirror of the RuntimeProfiles (the controller owns their status)."""
    if type == "DELETED":
        memo.store.remove(namespace or "", spec["workload"])
    else:
        wiring.load_profile(memo, namespace, name, spec, status)


@kopf.on.mutate(
    *wiring.RAYJOBS, operations=["CREATE"], id="advise", ignore_failures=True, side_effects=False, registry=REGISTRY
)
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
    with memo.metrics.admission_duration.time():
        advice = _advice_or_unchanged(body, memo.store, memo.policy(namespace), may_resize=operation == "CREATE")
    warnings.extend(admission.warnings(advice.warnings))
    merge(patch, advice.patch)
    if advice.resized and not dryrun:
        memo.metrics.rewrites.labels("webhook").inc()


def _advice_or_unchanged(
    body: kopf.Body, store: profiles.ProfileStore, policy: application.Policy, *, may_resize: bool
) -> application.Advice:
    """Fail open: a profile still being fitted, or our own bug, admits the RayJob unchanged with a warning."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    try:
        advice = application.advise(body, store, policy=policy, may_resize=may_resize, now=now)
        return admission.within_limits(body, advice, may_resize=may_resize)
    except application.ProfileNotReady as exc:
        text = f"{exc}; admitted unchanged, the controller will predict shortly"
    except Exception as exc:  # fail open: our bug must never block a RayJob; logged with its traceback
        logger.exception("advice failed; admitting the RayJob unchanged")
        text = f"could not advise: {type(exc).__name__}: {exc}; admitted unchanged"
    return application.Advice(messages=(application.Message(reason="NotAdvised", text=text, warning=True),))
