"""kopf handlers of the controller: translate Kubernetes objects to and from the domain functions.

State lives in kopf's ``memo`` (one ``Memo`` per operator run): the profile
store, its background refitter, namespace labels and the API client used to
write RuntimeProfiles. RayJobs get no finalizer (no deletion handler is
registered for them) and kopf's own state is stored in annotations under
our prefix.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import kopf
import kubernetes
import pydantic

from rayjob_advisor import contract, completions, gates, profiles
from rayjob_advisor.config import OperatorConfig
from rayjob_advisor.features import UnpredictableJob, features_from_rayjob
from rayjob_advisor.metrics import Metrics
from rayjob_advisor.observations import Observation
from rayjob_advisor.prediction import ProfileNotReady, advise, job_inputs

RAYJOBS = ("ray.io", "v1", "rayjobs")
PROFILES = (profiles.API_GROUP, "v1alpha1", "runtimeprofiles")
STORAGE_PREFIX = "rayjob-advisor.io"
CONTROLLER = kopf.OperatorRegistry()  # the webhook's registry (webhook.WEBHOOK) shares some handlers
logger = logging.getLogger(__name__)
RETRY_SECONDS = 1.0  # API errors and not-yet-fitted profiles: try again soon, not after kopf's 60 s
CONFLICT_RETRIES = 10


@dataclasses.dataclass
class Memo:
    """Per-run state shared by the handlers (passed to ``kopf.operator(memo=...)``)."""

    config: OperatorConfig
    store: profiles.ProfileStore = dataclasses.field(init=False)
    namespace_labels: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    metrics: Metrics = dataclasses.field(init=False)
    refitter: profiles.Refitter | None = None
    api: kubernetes.client.CustomObjectsApi | None = None

    def __post_init__(self) -> None:
        self.store = profiles.ProfileStore(shipped=self.config.shipped_profiles)
        self.metrics = Metrics(job_ttl=self.config.metrics_job_ttl_seconds)


class InputsAwareDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff-base, keeping our *input* annotations in the essence it compares.

    kopf drops every annotation under its storage prefix from the essence;
    ours shares the prefix with the users' inputs, whose changes must
    trigger a new prediction. (Our outputs stay out, or every write of ours
    would trigger another.)
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        inputs = [("metadata", "annotations", key) for key in contract.INPUT_KEYS]
        return super().build(body=body, extra_fields=[*(extra_fields or ()), *inputs])


class InputsAwareProgress(kopf.AnnotationsProgressStorage):
    """kopf's progress storage; its clean-up of the essence spares the input annotations too."""

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        notes = essence.get("metadata", {}).get("annotations", {})
        inputs = {key: value for key, value in notes.items() if key in contract.INPUT_KEYS}
        cleared = super().clear(essence=essence)
        if inputs:
            cleared.setdefault("metadata", {}).setdefault("annotations", {}).update(inputs)  # type: ignore[typeddict-item]
        return cleared


def operator_settings(settings: kopf.OperatorSettings) -> None:
    """kopf's state in annotations under our prefix."""
    settings.persistence.progress_storage = InputsAwareProgress(prefix=STORAGE_PREFIX)
    settings.persistence.diffbase_storage = InputsAwareDiffBase(prefix=STORAGE_PREFIX)
    settings.persistence.finalizer = f"{STORAGE_PREFIX}/finalizer"  # never set on RayJobs: no deletion handlers


def api_client(config: OperatorConfig) -> kubernetes.client.ApiClient:
    """A Kubernetes client: ``kube_api`` if set, else in-cluster, else the kubeconfig."""
    if config.kube_api:
        configuration = kubernetes.client.Configuration()
        configuration.host = config.kube_api
        return kubernetes.client.ApiClient(configuration)
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    return kubernetes.client.ApiClient()


@kopf.on.login(registry=CONTROLLER)
def login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    if memo.config.kube_api:
        return kopf.ConnectionInfo(server=memo.config.kube_api)
    return kopf.login_via_client(memo=memo, **kwargs)


def operator_arguments(config: OperatorConfig) -> dict[str, Any]:
    """Keyword arguments of ``kopf.operator`` for a run with ``config`` (controller or webhook role)."""
    from rayjob_advisor import webhook  # the webhook's handlers build on these

    settings = kopf.OperatorSettings()
    operator_settings(settings)
    if config.role == "webhook":
        webhook.serve(settings, config)
    return {
        "registry": webhook.WEBHOOK if config.role == "webhook" else CONTROLLER,
        "settings": settings,
        "memo": Memo(config),
        "standalone": True,  # one controller replica (Recreate); webhook replicas only read: no peering needed
        "clusterwide": not config.namespaces,
        "namespaces": list(config.namespaces),
        "liveness_endpoint": f"http://0.0.0.0:{config.liveness_port}/healthz" if config.liveness_port else None,
    }


@kopf.on.startup(registry=CONTROLLER)
def start(memo: Memo, **_: Any) -> None:
    """Load every RuntimeProfile before any RayJob is handled (else early jobs find no profile), start fitting."""
    memo.api = kubernetes.client.CustomObjectsApi(api_client(memo.config))
    if memo.config.namespaces:
        listings = [memo.api.list_namespaced_custom_object(*PROFILES[:2], ns, PROFILES[2]) for ns in memo.config.namespaces]
    else:
        listings = [memo.api.list_cluster_custom_object(*PROFILES)]
    for item in (item for listing in listings for item in listing["items"]):
        namespace, name = item["metadata"]["namespace"], item["metadata"]["name"]
        try:
            load_profile(memo, namespace, name, item["spec"], item.get("status") or {})
        except pydantic.ValidationError as exc:  # reported by its own handler; never stops the operator
            logger.warning("skipping RuntimeProfile %s/%s: %s", namespace, name, exc)
    if memo.config.metrics_port:
        memo.metrics.serve(memo.config.metrics_port)
    memo.refitter = profiles.Refitter(memo.store, lambda p: publish_fit(memo, p), memo.config.refit_interval_seconds)
    memo.refitter.start()


@kopf.on.cleanup(registry=CONTROLLER)
def stop(memo: Memo, **_: Any) -> None:
    if memo.refitter is not None:
        memo.refitter.stop()


def publish_fit(memo: Memo, profile: profiles.Profile) -> None:
    """Export a new fit's error; the controller also shows it in the RuntimeProfile's ``status.model``."""
    if profile.model is not None:
        memo.metrics.profile_fitted(profile.label, profile.model.selected_, profile.model.cv_mape_)
    if memo.config.role != "controller" or profile.namespace is None or profile.name is None or memo.api is None:
        return
    memo.api.patch_namespaced_custom_object_status(
        *PROFILES[:2], profile.namespace, PROFILES[2], profile.name, {"status": {"model": profile.model_status()}}
    )


# Namespaces: their labels may set the mode of every RayJob in them.


@kopf.on.event("", "v1", "namespaces", registry=CONTROLLER)
def namespace_seen(name: str, labels: Mapping[str, str], type: str, memo: Memo, **_: Any) -> None:
    if type == "DELETED":
        memo.namespace_labels.pop(name, None)
    else:
        memo.namespace_labels[name] = dict(labels)


# RuntimeProfiles: load runs into the store; the refitter fits them in the background.


@kopf.on.resume(*PROFILES, backoff=RETRY_SECONDS, registry=CONTROLLER)
@kopf.on.create(*PROFILES, backoff=RETRY_SECONDS, registry=CONTROLLER)
@kopf.on.update(*PROFILES, backoff=RETRY_SECONDS, registry=CONTROLLER)
@kopf.on.field(*PROFILES, field="status.observations", backoff=RETRY_SECONDS, registry=CONTROLLER)
def profile_changed(
    body: kopf.Body, namespace: str, name: str, spec: Mapping[str, Any], status: Mapping[str, Any], memo: Memo, **_: Any
) -> None:
    try:
        load_profile(memo, namespace, name, spec, status)
    except pydantic.ValidationError as exc:
        message = f"an observation is invalid, the profile is not used: {exc}"
        kopf.warn(body, reason="BadProfile", message=message)
        raise kopf.PermanentError(message) from exc


def load_profile(memo: Memo, namespace: str, name: str, spec: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    """Put a RuntimeProfile's runs in the store; the refitter fits it if they changed."""
    workload = spec["workload"]
    seed = profiles.observations_from_k8s(workload, spec.get("observations"))
    learned = profiles.observations_from_k8s(workload, status.get("observations"))
    memo.store.put(namespace, name, workload, seed, learned)
    if memo.refitter is not None:
        memo.refitter.wake()


@kopf.on.delete(*PROFILES, optional=True, registry=CONTROLLER)
def profile_deleted(namespace: str, spec: Mapping[str, Any], memo: Memo, **_: Any) -> None:
    memo.store.remove(namespace, spec["workload"])


# RayJobs: predict before they run; learn when they finish.


def _waiting(status: Mapping[str, Any], **_: Any) -> bool:
    """Not started yet: a prediction can still be useful (and replicas changed)."""
    return status.get("jobDeploymentStatus") in (None, "", "New", "Initializing", "Suspended", "Suspending")


@kopf.on.resume(*RAYJOBS, when=_waiting, backoff=RETRY_SECONDS, registry=CONTROLLER)
@kopf.on.create(*RAYJOBS, when=_waiting, backoff=RETRY_SECONDS, registry=CONTROLLER)
@kopf.on.update(*RAYJOBS, when=_waiting, backoff=RETRY_SECONDS, registry=CONTROLLER)
def predict(body: kopf.Body, namespace: str, name: str, uid: str, patch: kopf.Patch, memo: Memo, **_: Any) -> None:
    """Predict (and plan) a RayJob that has not started; a job held for us is also resized and released."""
    try:
        advice = advise(body, memo.store, memo.namespace_labels.get(namespace), memo.config)
    except ProfileNotReady as exc:
        raise kopf.TemporaryError(str(exc), delay=RETRY_SECONDS) from exc
    held = gates.hold(body)
    if advice is not None:
        memo.metrics.predictions.labels(advice.workload or "", "error" if advice.error else "predicted").inc()
        if advice.p50 is not None:
            memo.metrics.jobs.set((namespace, name, uid), predicted=advice.p50)
        resize = held is not None and advice.worker_groups is not None
        patch.metadata.annotations.update(advice.resize_annotations() if resize else advice.annotations)
        if advice.error and body.get("metadata", {}).get("annotations", {}).get(contract.ERROR) != advice.error:
            kopf.warn(body, reason="CannotPredict", message=advice.error)
        if resize:
            memo.metrics.rewrites.labels("controller").inc()
            patch.spec["rayClusterSpec"] = {"workerGroupSpecs": advice.worker_groups}
            kopf.info(body, reason="Resized", message=advice.warnings[0].removeprefix("rayjob-advisor: "))
    if held:  # released whatever the advice: a RayJob is never left waiting for us
        _merge_into(patch, gates.release(body, held))


def _merge_into(target: dict[str, Any], merge_patch: Mapping[str, Any]) -> None:
    """Add a merge patch to kopf's patch (a nested dict) without dropping what is already there."""
    for key, value in merge_patch.items():
        if isinstance(value, Mapping):
            _merge_into(target.setdefault(key, {}), value)
        else:
            target[key] = value


@kopf.on.field(
    *RAYJOBS,
    field="status.jobDeploymentStatus",
    when=lambda status, **_: completions.is_finished(status),
    backoff=RETRY_SECONDS,
    registry=CONTROLLER,
)
async def finished(
    body: kopf.Body, namespace: str, name: str, uid: str, patch: kopf.Patch, memo: Memo, **_: Any
) -> None:
    """Record the actual runtime and the deadline outcome; append the run to its profile exactly once."""
    try:
        inputs = job_inputs(body, memo.config)
    except contract.AnnotationError:
        inputs = None
    try:
        job = features_from_rayjob(body, inputs) if inputs is not None and inputs.workload else None
    except (contract.AnnotationError, UnpredictableJob):
        job = None
    try:
        result = completions.completion(body, job)
        outcome = completions.deadline_outcome(body, inputs) if inputs is not None else None
    except ValueError as exc:
        kopf.warn(body, reason="CannotLearn", message=f"finished RayJob has a malformed status: {exc}")
        return
    job_key = (namespace, name, uid)
    memo.metrics.jobs.finish(job_key, result.observation.execution_seconds if result.observation else None)
    if outcome is not None:
        memo.metrics.deadline_outcomes.labels(outcome.outcome).inc()
        reason = {"met": "DeadlineMet", "missed": "DeadlineMissed", "failed": "DeadlineFailed"}[outcome.outcome]
        (kopf.info if outcome.outcome == "met" else kopf.warn)(body, reason=reason, message=outcome.message())
    if result.observation is None:
        memo.metrics.unlearned.labels(result.outcome).inc()
        return
    workload = result.observation.workload or ""
    if result.relative_error is not None:
        memo.metrics.prediction_error.labels(workload).observe(result.relative_error)
        if result.predicted_seconds < result.observation.execution_seconds:
            memo.metrics.underestimates.labels(workload).inc()
    appended = await asyncio.to_thread(append_observation, memo, namespace, result.observation)
    patch.metadata.annotations.update(result.annotations())
    if appended:
        seconds = result.observation.execution_seconds
        kopf.info(body, reason="Learned", message=f"actual runtime {seconds:.0f}s added to profile {result.observation.workload}")


def append_observation(memo: Memo, namespace: str, observation: Observation) -> bool:
    """Add a run to ``status.observations`` of the workload's RuntimeProfile, unless it is there already.

    Optimistic concurrency: the write carries the resourceVersion it read and
    is retried on 409. A workload known only from a shipped profile gets a
    RuntimeProfile in the job's namespace, seeded with the shipped runs.
    """
    assert memo.api is not None and observation.workload is not None
    profile = memo.store.find(namespace, observation.workload)
    target_namespace, name = profile.namespace, profile.name
    if target_namespace is None or name is None:
        target_namespace, name = namespace, profiles.resource_name(observation.workload)
        manifest = profiles.runtime_profile_manifest(observation.workload, profile.seed)
        manifest["metadata"]["name"] = name
        try:
            memo.api.create_namespaced_custom_object(*PROFILES[:2], target_namespace, PROFILES[2], manifest)
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
    item = profiles.observation_to_k8s(observation)
    for _ in range(CONFLICT_RETRIES):
        current = memo.api.get_namespaced_custom_object(*PROFILES[:2], target_namespace, PROFILES[2], name)
        learned = list((current.get("status") or {}).get("observations") or [])
        if any(existing.get("source") == observation.source for existing in learned):
            return False
        body = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, "status": {"observations": [*learned, item]}}
        try:
            memo.api.patch_namespaced_custom_object_status(*PROFILES[:2], target_namespace, PROFILES[2], name, body)
            return True
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
    raise kopf.TemporaryError(f"RuntimeProfile {target_namespace}/{name} kept changing", delay=RETRY_SECONDS)
