"""The mutating admission webhook for RayJob CREATE (thin; stateless replicas).

It applies what ``application.advise`` decides before KubeRay builds the
cluster: the prediction, the plan and — in ``enforce`` mode — the resized
worker group. It is fail-open: it never denies a RayJob, whatever goes wrong
(bad annotations, a profile not yet fitted, our own bug); the reason goes
back as an admission warning, which ``kubectl apply`` prints. It has no
side effects, so ``dryRun`` requests are answered the same way (and not
counted as rewrites). Webhook replicas watch RuntimeProfiles read-only and
fit them themselves: they write nothing to the cluster.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from rayjob_advisor import application, profiles, wiring
from rayjob_advisor.config import OperatorConfig
from rayjob_advisor.rayjob import merge

REGISTRY = wiring.registry()


def serve(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """HTTPS on ``webhook_port`` with the mounted certificate; the chart owns the webhook configuration."""
    settings.admission.server = kopf.WebhookServer(
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
    **_: Any,
) -> None:
    """Apply the advice to the RayJob being created; its messages become admission warnings."""
    with memo.metrics.admission_duration.time():
        advice = _advice_or_unchanged(body, memo.store, memo.policy(namespace))
    warnings.extend(advice.warnings)
    merge(patch, advice.patch)
    if advice.resized and not dryrun:
        memo.metrics.rewrites.labels("webhook").inc()


def _advice_or_unchanged(
    body: kopf.Body, store: profiles.ProfileStore, policy: application.Policy
) -> application.Advice:
    """Fail open: a profile still being fitted, or our own bug, admits the RayJob unchanged with a warning."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    try:
        return application.advise(body, store, policy=policy, may_resize=True, now=now)
    except application.ProfileNotReady as exc:
        text = f"{exc}; admitted unchanged, the controller will predict shortly"
    except Exception:  # fail open: our bug must never block a RayJob; logged with its traceback
        logging.getLogger(__name__).exception("advice failed; admitting the RayJob unchanged")
        text = "internal error; admitted unchanged"
    return application.Advice(messages=(application.Message(reason="NotAdvised", text=text, warning=True),))
