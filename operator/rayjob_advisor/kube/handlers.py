"""kopf handlers of the controller: apply what ``application`` decides, report it, keep profiles loaded.

Each handler translates between a Kubernetes object and a plain domain
function, then applies the result: a merge patch, Events, metrics, and the
RuntimeProfile writes of ``kubeapi``.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from rayjob_advisor import application, contract, reasons
from rayjob_advisor.advice import eta
from rayjob_advisor.errors import RetryableError, UserError
from rayjob_advisor.kube import certificates, kubeapi, reports, serving, sweep, wiring
from rayjob_advisor.kuberay import hooks
from rayjob_advisor.kuberay.manifest import merge
from rayjob_advisor.kuberay.rayjob import DEPLOYMENT_STATUS_FIELD, RayJob, is_finished, is_running, is_waiting
from rayjob_advisor.profiles.codec import condition

REGISTRY = wiring.registry()
logger = logging.getLogger(__name__)
RETRY_SECONDS = wiring.RETRY_SECONDS
RETRIES = wiring.RETRIES


# RuntimeProfiles: load runs into the store; the refitter fits them in the background.


@kopf.on.resume(*wiring.PROFILES, backoff=RETRY_SECONDS, registry=REGISTRY)
@kopf.on.create(*wiring.PROFILES, backoff=RETRY_SECONDS, registry=REGISTRY)
@kopf.on.update(*wiring.PROFILES, backoff=RETRY_SECONDS, registry=REGISTRY)
def profile_changed(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    meta: Mapping[str, Any],
    patch: kopf.Patch,
    memo: wiring.Memo,
    **_: Any,
) -> None:
    """Load the runs; a profile the operator cannot use says why on itself (Event, ``Fitted`` False) and stays out."""
    generation = meta.get("generation")
    try:
        wiring.load_profile(memo, namespace, name, spec, status, generation, meta.get("creationTimestamp"))
    except UserError as exc:
        message, reason = f"the profile is not used: {exc}", wiring.unusable_reason(exc)
        kopf.warn(body, reason=reason, message=message)
        fitted = condition(reasons.FITTED, "False", reason, message, None, generation)
        patch.status["conditions"] = [fitted]
        if generation is not None:
            patch.status["observedGeneration"] = generation
        raise kopf.PermanentError(message) from exc


# RayJobs: predict before they run; learn when they finish.


# The RayJob handlers act only on the jobs ``wiring.in_scope``: kopf stays blind to those the advisor leaves alone.


def _waiting(body: kopf.Body, status: Mapping[str, Any], memo: wiring.Memo, **_: Any) -> bool:
    return wiring.in_scope(body, memo) and is_waiting(status)


@kopf.on.resume(*wiring.RAYJOBS, when=_waiting, backoff=RETRY_SECONDS, retries=RETRIES, registry=REGISTRY)
@kopf.on.create(*wiring.RAYJOBS, when=_waiting, backoff=RETRY_SECONDS, retries=RETRIES, registry=REGISTRY)
@kopf.on.update(*wiring.RAYJOBS, when=_waiting, backoff=RETRY_SECONDS, retries=RETRIES, registry=REGISTRY)
def predict(body: kopf.Body, name: str, uid: str, patch: kopf.Patch, memo: wiring.Memo, retry: int, **_: Any) -> None:
    """Predict (and plan) a RayJob that has not started; a job held for us is also resized and released."""
    rayjob = RayJob(body)
    key, held = (rayjob.namespace, name, uid), rayjob.hold is not None
    advice = _advice(body, memo, policy=memo.policy(key[0]), may_resize=held, retry=retry)
    memo.metrics.advised(key, advice.workload, advice.p50, advice.error, advice.resized, "controller")
    wiring.post(body, *advice.messages)
    merge(patch, advice.patch)


@kopf.on.event(*wiring.RAYJOBS, registry=REGISTRY)
def rayjob_seen(type: str, body: kopf.Body, name: str, uid: str, memo: wiring.Memo, **_: Any) -> None:
    """Keep the running jobs the operator handles for the sweep, their ETA gauges following the annotations (refined
    by progress); a job deleted before it finished: its per-job gauges expire as a finished job's do (no finalizer
    needed). A job that stops asking for the advisor leaves the sweep too."""
    key = (RayJob(body).namespace, name, uid)
    if type != "DELETED":
        _publish_ca_for(body, memo)
    if type == "DELETED":
        memo.metrics.jobs.finish(key, None)
    if type == "DELETED" or not is_running(body.get("status")) or not wiring.in_scope(body, memo):
        memo.running.pop(key, None)
        return
    memo.running[key] = copy.deepcopy(dict(body))
    current = eta.written(RayJob(body).annotations)
    if current is not None:
        memo.metrics.eta(key, current)


def _publish_ca_for(body: kopf.Body, memo: wiring.Memo) -> None:
    """A job the progress hook wires needs the CA's ConfigMap in its namespace: the keeper publishes it now."""
    namespace = RayJob(body).namespace
    if memo.keeper is None or not memo.config.tls_ca_configmap or namespace in memo.progress_namespaces:
        return
    policy = memo.policy(namespace)
    if wiring.in_scope(body, memo) and "progress" in hooks.enabled(policy.hooks, policy.namespace_labels):
        memo.progress_namespaces.add(namespace)
        memo.keeper.wake()


def _running(body: kopf.Body, status: Mapping[str, Any], memo: wiring.Memo, **_: Any) -> bool:
    return wiring.in_scope(body, memo) and is_running(status)


@kopf.on.resume(*wiring.RAYJOBS, when=_running, backoff=RETRY_SECONDS, registry=REGISTRY)
@kopf.on.field(*wiring.RAYJOBS, field=DEPLOYMENT_STATUS_FIELD, when=_running, backoff=RETRY_SECONDS,
               registry=REGISTRY)  # fmt: skip
def started(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """A job that has just started gets its ETA (its gauge follows the annotation: ``rayjob_seen``)."""
    merge(patch, eta.on_start(body))


@kopf.on.startup(backoff=RETRY_SECONDS, registry=REGISTRY)
async def watch_running_jobs(memo: wiring.Memo, **_: Any) -> None:
    """The controller's work on running jobs: the sweep for warnings and, if configured, the certificate keeper and
    the progress endpoint."""
    config, api = memo.config, memo.kube  # set by the common start-up handler, which kopf runs first
    memo.sweeper = sweep.Sweeper(
        memo.running, api, memo.metrics, lambda: wiring.leads(memo), config.sweep_interval_seconds
    )
    memo.sweeper.start()
    if config.tls_secret or config.tls_ca_configmap:
        memo.keeper = certificates.Keeper(
            api, config, lambda: wiring.leads(memo), lambda: frozenset(memo.progress_namespaces), contract.now
        )
        memo.keeper.start()
    certificate = serving.Certificate.of(config)
    if config.progress_port and certificate is not None:
        memo.progress = reports.ProgressServer(
            api, config.progress_port, certificate, config.progress_audience, serving.Limits.of(config)
        )
        await memo.progress.start()


@kopf.on.cleanup(registry=REGISTRY)
async def stop_progress_endpoint(memo: wiring.Memo, **_: Any) -> None:
    """The progress endpoint stops here; the sweep with the other background loops (``wiring``'s clean-up)."""
    if memo.progress is not None:
        await memo.progress.stop()


def _advice(
    body: kopf.Body, memo: wiring.Memo, *, policy: application.Policy, may_resize: bool, retry: int
) -> application.Advice:
    """The advice, retried while the profile is being fitted (``wiring.backoff``); any other failure is reported on
    the job."""
    try:
        clusters = functools.partial(kubeapi.read_raycluster, memo.kube)
        now = contract.now()
        return application.advise(body, memo.store, policy=policy, may_resize=may_resize, now=now, clusters=clusters)
    except RetryableError as exc:
        raise wiring.retry_later(exc, retry, "the prediction") from exc
    except Exception as exc:
        logger.exception("could not predict %s", body.get("metadata", {}).get("name"))
        return application.failed(body, f"could not predict: {type(exc).__name__}: {exc}", may_resize=may_resize)


def _finished(body: kopf.Body, status: Mapping[str, Any], memo: wiring.Memo, **_: Any) -> bool:
    return wiring.in_scope(body, memo) and is_finished(status)


@kopf.on.field(*wiring.RAYJOBS, field=DEPLOYMENT_STATUS_FIELD, when=_finished, backoff=RETRY_SECONDS,
               retries=RETRIES, registry=REGISTRY)  # fmt: skip
async def finished(
    body: kopf.Body, name: str, uid: str, patch: kopf.Patch, memo: wiring.Memo, retry: int, **_: Any
) -> None:
    """Record the actual runtime and the deadline outcome; append the run to its profile exactly once.

    Metrics and deadline Events follow a learned run once, after it is stored: only the try that
    stored it reports it. A run found stored already (a retry after the job's annotations failed to
    patch, or a previous leader) was reported then; only the annotations are written again.
    A run not to be learned (a failed job) is reported by the one handling of its finish. A run its
    profile cannot take is reported once (a ``CannotLearn`` Event), then retried with ``wiring.backoff``.
    """
    namespace = RayJob(body).namespace
    key = (namespace, name, uid)
    lesson = application.learn(body, memo.policy(namespace))
    observation = lesson.observation
    if observation is not None:
        try:
            appended = await asyncio.to_thread(
                kubeapi.append_observation, memo.kube, memo.store, namespace, observation
            )
        except Exception as exc:
            raise wiring.retry_later(exc, retry, "the run could not be learned", body, reasons.CANNOT_LEARN) from exc
        if not appended:
            memo.metrics.learned(key, None, None)  # this replica's per-job gauge ends; counters were counted then
            merge(patch, lesson.patch)
            return
        text = f"actual runtime {observation.execution_seconds:.0f}s added to profile {observation.workload}"
        wiring.post(body, application.Message(reason=reasons.LEARNED, text=text))
    memo.metrics.learned(key, lesson.completion, lesson.deadline)
    wiring.post(body, *lesson.messages)
    merge(patch, lesson.patch)
