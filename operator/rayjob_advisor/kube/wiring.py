"""What both roles (controller and webhook) run on: the memo, kopf's settings, and start-up.

State lives in kopf's ``memo`` (one ``Memo`` per operator run): the profile
store, its background refitter, namespace labels, metrics and the API
client. kopf's own state is stored in annotations under our prefix; RayJobs
get no finalizer (no deletion handler is registered for them).

Controller replicas elect a leader with kopf's peering (``config.peering``):
each keeps itself alive in the peering object's status, and kopf pauses
every operator that sees a live peer of a higher priority (the older
replica's, see ``leader_priority``) and resumes it, re-listing everything,
once that peer has left or its lifetime has expired. Chosen over a Lease
elector of our own because kopf cannot be paused from outside (its
``when=`` filters would still store kopf's diff-base on the follower, so
the leader would miss changes); kopf's pause stops the watch streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import logging
import time
from collections.abc import Mapping
from typing import Any

import aiohttp.web
import kopf
import kubernetes

from rayjob_advisor import application, contract, reasons
from rayjob_advisor.application import Message, Policy
from rayjob_advisor.background import BackgroundLoop
from rayjob_advisor.errors import AdvisorError, DuplicateWorkload, UserError, hide_library_warnings
from rayjob_advisor.kube import certificates, kubeapi, reports, serving, sweep
from rayjob_advisor.kube.config import OperatorConfig
from rayjob_advisor.kube.metrics import JobKey, Metrics
from rayjob_advisor.kuberay.rayjob import RayJob
from rayjob_advisor.profiles.codec import runs_from_k8s
from rayjob_advisor.profiles.profile import Profile
from rayjob_advisor.profiles.refitter import Refitter
from rayjob_advisor.profiles.store import ProfileStore

RAYJOBS = kubeapi.RAYJOBS
PROFILES = kubeapi.PROFILES
RETRY_SECONDS = 1.0  # API errors and not-yet-fitted profiles: try again soon, not after kopf's 60 s
MAX_BACKOFF_SECONDS = 600.0  # a failure that persists is retried after a doubling delay, up to this
RETRIES = 24  # then kopf gives the handler up (about 3 hours of tries): no handler is retried forever
STARTUP_BACKOFF_SECONDS = 2.0  # after kubeapi's own retries: start-up tries again soon, not after kopf's 60 s
logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Memo:
    """Per-run state shared by the handlers (passed to ``kopf.operator(memo=...)``)."""

    config: OperatorConfig
    store: ProfileStore = dataclasses.field(init=False)
    namespace_labels: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    metrics: Metrics = dataclasses.field(init=False)
    refitter: Refitter | None = None
    api: kubernetes.client.CustomObjectsApi | None = None
    priority: int | None = None  # kopf's peering priority of this controller replica; None: standalone
    running: dict[JobKey, Mapping[str, Any]] = dataclasses.field(default_factory=dict)  # what the sweep checks
    sweeper: sweep.Sweeper | None = None
    servers: list[serving.Server] = dataclasses.field(default_factory=list)  # /healthz, /metrics
    progress: reports.ProgressServer | None = None
    keeper: certificates.Keeper | None = None  # the controller's: its certificates, the CA's ConfigMaps
    progress_namespaces: set[str] = dataclasses.field(default_factory=set)  # with jobs the progress hook wires

    def __post_init__(self) -> None:
        self.store = ProfileStore(
            shipped=self.config.shipped_profiles, shared_namespaces=self.config.shared_profile_namespaces
        )
        self.metrics = Metrics(job_ttl=self.config.metrics_job_ttl_seconds)
        self.metrics.loop_failures.loops = self.loops

    @property
    def kube(self) -> kubernetes.client.CustomObjectsApi:
        """The API client, set at start-up (before any handler of an object runs)."""
        if self.api is None:
            raise RuntimeError("the operator has not started: no API client yet")
        return self.api

    def loops(self) -> list[BackgroundLoop]:
        """The background loops started so far (the refitter; the controller's sweep and certificate keeper): probed,
        then stopped."""
        return [loop for loop in (self.refitter, self.sweeper, self.keeper) if loop is not None]

    def policy(self, namespace: str | None) -> Policy:
        """The configuration's decisions for every job in ``namespace`` (its labels may set the mode)."""
        return self.config.policy(self.namespace_labels.get(namespace or "", {}))


def in_scope(body: kopf.Body, memo: Memo, **_: Any) -> bool:
    """The filter of every RayJob handler: the jobs the operator handles (``application.in_scope``). kopf is blind
    to the others: no handler runs, and it stores nothing on them."""
    rayjob = RayJob(body)
    return application.in_scope(rayjob, memo.policy(rayjob.namespace))


class InputsAwareDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff-base, keeping our *input* annotations in the essence it compares.

    kopf drops every annotation under its storage prefix from the essence;
    ours shares the prefix with the users' inputs, whose changes must
    trigger a new prediction. Our outputs stay out, the label mirror
    (``contract.LABEL_KEYS``) too, or every write of ours would trigger another.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        inputs = [("metadata", "annotations", key) for key in contract.INPUT_KEYS]
        essence = super().build(body=body, extra_fields=[*(extra_fields or ()), *inputs])
        labels = essence.get("metadata", {}).get("labels") or {}
        for key in contract.LABEL_KEYS & set(labels):
            del labels[key]
        return essence


class InputsAwareProgress(kopf.AnnotationsProgressStorage):
    """kopf's progress storage; its clean-up of the essence spares the input annotations too."""

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        notes = essence.get("metadata", {}).get("annotations", {})
        inputs = {key: value for key, value in notes.items() if key in contract.INPUT_KEYS}
        cleared = super().clear(essence=essence)
        if inputs:
            cleared.setdefault("metadata", {}).setdefault("annotations", {}).update(inputs)
        return cleared


def settings() -> kopf.OperatorSettings:
    """kopf's settings: its state in annotations under our prefix."""
    result = kopf.OperatorSettings()
    result.persistence.progress_storage = InputsAwareProgress(prefix=contract.API_GROUP)
    result.persistence.diffbase_storage = InputsAwareDiffBase(prefix=contract.API_GROUP)
    result.persistence.finalizer = f"{contract.PREFIX}finalizer"  # never set on RayJobs: no deletion handlers
    return result


def operator_arguments(config: OperatorConfig, registry: kopf.OperatorRegistry) -> dict[str, Any]:
    """Keyword arguments of ``kopf.operator`` for a run of ``registry``'s handlers with ``config``."""
    result = settings()
    elected = config.role == "controller" and config.peering is not None  # webhook replicas only read: no peering
    if elected:
        result.peering.lifetime = config.peering_lifetime_seconds
    memo = Memo(config, priority=leader_priority() if elected else None)
    return {
        "registry": registry,
        "settings": result,
        "memo": memo,
        "standalone": not elected,
        "peering_name": config.peering if elected else None,
        "priority": memo.priority,
        "clusterwide": not config.watched_namespaces,
        "namespaces": list(config.watched_namespaces),
    }


def leader_priority() -> int:
    """kopf's peering priority of this replica: the older replica wins, so a new one never takes over a live one.

    kopf's peering pauses every operator that sees a live peer of a higher priority, and all of them
    on equal priorities: distinct priorities make it a leader election. The start time in
    microseconds, negated, is distinct for replicas (and for operators of one process, as in tests).
    """
    return -time.time_ns() // 1000


def leads(memo: Memo) -> bool:
    """Whether this controller replica leads as kopf's peering decides: no live peer of a higher priority.

    kopf pauses a follower's watch streams, not its start-up or refit thread: their writes ask this
    first. Standalone, or when the peering cannot be read: True (a write too many, not one missed).
    """
    config, api = memo.config, memo.api
    if memo.priority is None or api is None or config.peering is None:
        return True
    try:
        peering = kubeapi.read_peering(api, config.peering, config.watched_namespaces)
    except Exception as exc:  # noqa: BLE001 - reported, and decided in favour of writing
        logger.warning("could not read the peering %s, acting as the leader: %s", config.peering, exc)
        return True
    return not _outranked(peering.get("status"), memo.priority, contract.now())


def _outranked(peers: object, priority: int, now: dt.datetime) -> bool:
    """Whether a live peer in kopf's peering status has a higher priority (malformed entries do not count)."""
    for peer in peers.values() if isinstance(peers, Mapping) else ():
        try:
            seen = dt.datetime.fromisoformat(peer["lastseen"])
            alive = seen + dt.timedelta(seconds=float(peer.get("lifetime", 60))) > now
            if alive and int(peer.get("priority", 0)) > priority:
                return True
        except (KeyError, TypeError, ValueError, AttributeError):  # not a peer kopf would count either
            continue
    return False


def post(body: kopf.Body, *messages: Message) -> None:
    """Messages meant as Kubernetes Events, posted on the object (Warning or Normal)."""
    for message in messages:
        if message.event:
            (kopf.warn if message.warning else kopf.info)(body, reason=message.reason, message=message.text)


def backoff(retry: int) -> float:
    """The delay before a failed handler's next try (``retry``: kopf's count of tries so far): doubling from
    ``RETRY_SECONDS``, capped at ``MAX_BACKOFF_SECONDS``."""
    return min(MAX_BACKOFF_SECONDS, RETRY_SECONDS * 2.0 ** min(retry, 30))


def retry_later(
    exc: Exception, retry: int, what: str, body: kopf.Body | None = None, reason: str | None = None
) -> kopf.TemporaryError:
    """The error that retries a handler after ``backoff``: our own errors (a fit under way, a profile that cannot
    take a run) and an API server that does not answer are one log line; anything else is a bug, its traceback
    logged on the first try only. A user's error is reported once on ``body`` (a Warning Event of ``reason``)."""
    if isinstance(exc, UserError) and body is not None and reason is not None and retry == 0:
        post(body, Message(reason=reason, text=f"{what}: {exc}", warning=True))
    if not (isinstance(exc, AdvisorError) or kubeapi.transient(exc)) and retry == 0:
        logger.error("%s failed", what, exc_info=exc)
    return kopf.TemporaryError(f"{what}: {type(exc).__name__}: {exc}", delay=backoff(retry))


def registry() -> kopf.OperatorRegistry:
    """A registry with the handlers every role needs: log in, load profiles at start-up and mirror their
    changes, watch namespaces."""
    result = kopf.OperatorRegistry()
    kopf.on.login(registry=result)(_login)
    kopf.on.startup(registry=result)(_serve)
    kopf.on.startup(backoff=STARTUP_BACKOFF_SECONDS, registry=result)(_start)
    kopf.on.cleanup(registry=result)(_stop)
    kopf.on.event("", "v1", "namespaces", registry=result)(_namespace_seen)
    kopf.on.event(*PROFILES, registry=result)(_profile_seen)
    return result


def _login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    if memo.config.kube_api:
        return kopf.ConnectionInfo(server=memo.config.kube_api)
    return kopf.login_via_client(memo=memo, **kwargs)


def _start(memo: Memo, **_: Any) -> None:
    """Load every namespace's labels and every RuntimeProfile before any RayJob is handled (else early jobs find
    their namespace's opt-in or their profile missing), start fitting; no library warning reaches the log. An API
    server that does not answer (or refuses) is one log line a try, retried after ``STARTUP_BACKOFF_SECONDS``."""
    hide_library_warnings()
    memo.api = kubeapi.client(memo.config.kube_api)
    try:
        memo.namespace_labels.update(kubeapi.namespace_labels(memo.api))
        listed = kubeapi.list_profiles(memo.api, memo.config.watched_namespaces)
    except Exception as exc:
        failure = kubeapi.failure(exc)
        if failure is None:
            raise
        text = f"start-up could not read namespaces and RuntimeProfiles: {failure}"
        raise kopf.TemporaryError(text, delay=STARTUP_BACKOFF_SECONDS) from None
    for item in sorted(listed, key=_age):  # the oldest first: of two naming one workload, it is the one used
        _start_with(memo, item)
    config = memo.config
    memo.refitter = Refitter(
        memo.store, lambda profile: _publish_fit(memo, profile), config.refit_interval_seconds, duty=config.refit_duty
    )
    memo.refitter.start()


def _age(item: Mapping[str, Any]) -> tuple[str, str]:
    metadata = item.get("metadata") or {}
    return str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or "")


def _start_with(memo: Memo, item: Mapping[str, Any]) -> None:
    """Load one listed RuntimeProfile; one the operator cannot use is skipped and reported on, never fatal."""
    metadata = item.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name", "?")
    try:
        created = metadata.get("creationTimestamp")
        load_profile(memo, namespace, name, item.get("spec"), item.get("status"), metadata.get("generation"), created)
    except Exception as exc:  # BadProfile, or a bug of ours: this profile's problem, never start-up's
        unexpected = not isinstance(exc, UserError)
        logger.warning("skipping RuntimeProfile %s/%s: %s", namespace, name, exc, exc_info=unexpected)
        if memo.config.role == "controller" and namespace and memo.api is not None and leads(memo):
            try:
                reason = unusable_reason(exc)
                kubeapi.report_bad_profile(memo.api, namespace, name, metadata.get("generation"), str(exc), reason)
            except Exception as failed:  # the report is a courtesy: start-up goes on without it
                failure = kubeapi.failure(failed)
                logger.error("could not report on RuntimeProfile %s/%s: %s", namespace, name, failure or failed,
                             exc_info=failure is None)  # fmt: skip


async def _serve(memo: Memo, **_: Any) -> None:
    """/healthz and /metrics, each on its port through ``serving``'s hardened server (kopf's liveness server and
    prometheus_client's held slow clients for as long as they liked); first, so that probes get an answer during
    start-up."""
    config, limits = memo.config, serving.Limits.of(memo.config)
    for port, route in (
        (config.liveness_port, aiohttp.web.get("/healthz", functools.partial(_healthz, memo))),
        (config.metrics_port, memo.metrics.route()),
    ):
        if port:
            server = serving.Server([route], port=port, limits=limits, certificate=None)
            await server.start()
            memo.servers.append(server)


async def _healthz(memo: Memo, _: aiohttp.web.Request) -> aiohttp.web.Response:
    """503 until start-up is done (readiness), 500 while a background loop (the refitter; the controller's sweep)
    is dead or stuck, so that Kubernetes restarts the pod; else 200."""
    if memo.refitter is None:
        return aiohttp.web.json_response({"state": "starting"}, status=503)
    for loop in memo.loops():
        problem = loop.problem()
        if problem is not None:
            return aiohttp.web.json_response({"state": "failing", "problem": problem}, status=500)
    return aiohttp.web.json_response({"state": "ok", "staleProfiles": len(memo.store.stale())})


async def _stop(memo: Memo, **_: Any) -> None:
    for server in memo.servers:
        await server.stop()
    for loop in memo.loops():
        await asyncio.to_thread(loop.stop)  # joins its thread


def _publish_fit(memo: Memo, profile: Profile) -> None:
    """Export a new fit's error; the controller also shows it in the RuntimeProfile's ``status.model``."""
    if profile.model is not None:
        memo.metrics.profile_fitted(
            profile.label, profile.namespace, profile.workload, profile.model.selected_, profile.model.cv_mape_
        )
    if memo.config.role == "controller" and profile.namespace is not None and memo.api is not None:
        if leads(memo):
            kubeapi.publish_fit(memo.api, profile)
        else:  # the leader publishes its own fit; should this replica take over, it publishes this one
            memo.store.left_unpublished(profile)


def _namespace_seen(name: str, labels: Mapping[str, str], type: str, memo: Memo, **_: Any) -> None:
    """Namespace labels may opt every RayJob in them in (and set their mode), and turn hooks on or off."""
    if type == "DELETED":
        memo.namespace_labels.pop(name, None)
        memo.progress_namespaces.discard(name)  # no CA to publish there any more
    else:
        memo.namespace_labels[name] = dict(labels)


def _profile_seen(
    type: str | None,
    namespace: str | None,
    name: str,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    meta: Mapping[str, Any],
    memo: Memo,
    **_: Any,
) -> None:
    """Mirror every change of a RuntimeProfile, learned runs included (the store ignores unchanged runs).

    An event handler, not a field handler of ``status.observations``: kopf would copy the runs into
    its diff-base annotation. A profile the operator cannot use is left out here; the controller's
    change handler reports it.
    """
    if type == "DELETED":
        workload = spec.get("workload")
        if isinstance(workload, str):
            memo.store.remove(namespace or "", name, workload)
        return
    with contextlib.suppress(UserError):
        load_profile(memo, namespace, name, spec, status, meta.get("generation"), meta.get("creationTimestamp"))


def unusable_reason(exc: Exception) -> str:
    """The ``Fitted`` reason of a RuntimeProfile the operator does not use."""
    return reasons.DUPLICATE_WORKLOAD if isinstance(exc, DuplicateWorkload) else reasons.BAD_PROFILE


def load_profile(
    memo: Memo,
    namespace: str | None,
    name: str,
    spec: Mapping[str, Any] | None,
    status: Mapping[str, Any] | None,
    generation: int | None = None,
    created: str | None = None,
) -> None:
    """Put a RuntimeProfile's runs in the store; the refitter fits them if they changed. Raises ``BadProfile``
    (``DuplicateWorkload`` too)."""
    workload, seed, learned = runs_from_k8s(spec, status)
    conditions = (status or {}).get("conditions")
    memo.store.put(
        namespace or "", name, workload, seed, learned, generation=generation, conditions=conditions, created=created
    )
    if memo.refitter is not None:
        memo.refitter.wake()
