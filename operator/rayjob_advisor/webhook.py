"""The mutating admission webhook for RayJob CREATE (thin; stateless replicas).

It predicts, plans and — in ``enforce`` mode — resizes the scaled worker
group before KubeRay builds the cluster. It is fail-open: it never denies
a RayJob, whatever goes wrong (bad annotations, a profile not yet fitted,
our own bug); the reason goes back as an admission warning, which
``kubectl apply`` prints. It has no side effects, so ``dryRun`` requests are
answered the same way (and not counted as rewrites). Webhook replicas watch
RuntimeProfiles read-only and fit them themselves: they write nothing to the
cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from rayjob_advisor import handlers
from rayjob_advisor.config import OperatorConfig
from rayjob_advisor.prediction import ProfileNotReady, advise

WEBHOOK = kopf.OperatorRegistry()

kopf.on.login(registry=WEBHOOK)(handlers.login)
kopf.on.startup(registry=WEBHOOK)(handlers.start)
kopf.on.cleanup(registry=WEBHOOK)(handlers.stop)
kopf.on.event("", "v1", "namespaces", registry=WEBHOOK)(handlers.namespace_seen)


def serve(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """HTTPS on ``webhook_port`` with the mounted certificate; the chart owns the webhook configuration."""
    settings.admission.server = kopf.WebhookServer(
        addr="0.0.0.0", port=config.webhook_port, certfile=config.tls_cert_file, pkeyfile=config.tls_key_file
    )
    settings.admission.managed = None


@kopf.on.event(*handlers.PROFILES, registry=WEBHOOK)
def profile_seen(
    type: str,
    namespace: str,
    name: str,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    memo: handlers.Memo,
    **_: Any,
) -> None:
    """Read-only mirror of the RuntimeProfiles (the controller owns their status)."""
    if type == "DELETED":
        memo.store.remove(namespace, spec["workload"])
        return
    handlers.load_profile(memo, namespace, name, spec, status)


@kopf.on.mutate(
    *handlers.RAYJOBS, operations=["CREATE"], id="advise", ignore_failures=True, side_effects=False, registry=WEBHOOK
)
def admit(
    body: kopf.Body,
    namespace: str,
    patch: kopf.Patch,
    warnings: list[str],
    dryrun: bool,
    memo: handlers.Memo,
    logger: Any,
    **_: Any,
) -> None:
    with memo.metrics.admission_duration.time():
        rewritten = _admit(body, namespace, patch, warnings, memo, logger)
    if rewritten and not dryrun:
        memo.metrics.rewrites.labels("webhook").inc()


def _admit(
    body: kopf.Body, namespace: str, patch: kopf.Patch, warnings: list[str], memo: handlers.Memo, logger: Any
) -> bool:
    """Fill the patch and the warnings; True when the worker groups were resized."""
    try:
        advice = advise(body, memo.store, memo.namespace_labels.get(namespace), memo.config)
    except ProfileNotReady as exc:
        warnings.append(f"rayjob-advisor: {exc}; admitted unchanged, the controller will predict shortly")
        return False
    except Exception:  # noqa: BLE001 - fail open: our bug must never block a RayJob
        logger.exception("advice failed; admitting the RayJob unchanged")
        warnings.append("rayjob-advisor: internal error; admitted unchanged")
        return False
    if advice is None:
        return False
    warnings.extend(advice.warnings)
    if advice.worker_groups is None:
        patch.metadata.annotations.update(advice.annotations)
        return False
    patch.metadata.annotations.update(advice.resize_annotations())
    patch.spec["rayClusterSpec"] = {"workerGroupSpecs": advice.worker_groups}
    return True
