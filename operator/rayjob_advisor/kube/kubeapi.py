"""Kubernetes I/O of the advisor's own objects: RuntimeProfile reads and writes, Events on them; the certificate
Secret, the webhook's caBundle and the CA's ConfigMaps (``certificates``).

Every call has a timeout and a few retries with exponential backoff on
transient answers (429, 5xx, timeouts, lost connections): a hung or flaky
API server delays learning, it never blocks the thread that waits for it,
and the caller's own retry (kopf's backoff) takes over after the last one.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import kubernetes
import urllib3

from rayjob_advisor import contract, reasons
from rayjob_advisor.errors import ApiUnavailable, NoCluster, NoProfileYet, ProfileConflict, UnpredictableJob
from rayjob_advisor.observations import Observation
from rayjob_advisor.profiles import codec, history
from rayjob_advisor.profiles.profile import Profile
from rayjob_advisor.profiles.store import ProfileStore

GROUP, VERSION, PLURAL = contract.API_GROUP, "v1alpha1", "runtimeprofiles"
PROFILES = (GROUP, VERSION, PLURAL)
RAYJOBS = ("ray.io", "v1", "rayjobs")
RAYCLUSTERS = ("ray.io", "v1", "rayclusters")
PEERINGS = ("kopf.dev", "v1")  # kopf's peering CRDs: ClusterKopfPeering, KopfPeering
TIMEOUT_SECONDS = 10.0
CONFLICT_RETRIES = 10
CONFLICT_BACKOFF = (0.02, 1.0)  # seconds: jittered exponential backoff after a 409, from this base up to this cap
ADMISSION_READ_SECONDS = 2.0  # the webhook's reads: the API server waits webhook.timeoutSeconds (5) for the answer
TRANSIENT_BACKOFFS = (0.2, 0.5, 1.0, 2.0)  # seconds before each retry of a transient failure; then it raises
COMPONENT = "rayjob-advisor"
logger = logging.getLogger(__name__)
T = TypeVar("T")


def client(kube_api: str | None) -> kubernetes.client.CustomObjectsApi:
    """The API for custom objects: ``kube_api`` if set, else in-cluster, else the kubeconfig."""
    if kube_api:
        configuration = kubernetes.client.Configuration()
        configuration.host = kube_api
    else:
        try:
            kubernetes.config.load_incluster_config()
        except kubernetes.config.ConfigException as outside:
            try:
                kubernetes.config.load_kube_config()
            except (kubernetes.config.ConfigException, OSError) as unusable:
                kubeconfig = os.environ.get("KUBECONFIG", "~/.kube/config")
                raise NoCluster(
                    f"no Kubernetes API to talk to: not in a cluster ({outside}) and no usable kubeconfig "
                    f"at {kubeconfig} ({unusable}); set KUBECONFIG, or pass --kube-api URL"
                ) from None
        configuration = kubernetes.client.Configuration.get_default_copy()
    configuration.retries = False  # no hidden urllib3 retries: ``retried`` bounds them, with backoff
    return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(configuration))


def transient(exc: BaseException) -> bool:
    """An answer worth repeating the same request for: 429, 5xx, a timeout or a lost connection."""
    if isinstance(exc, kubernetes.client.ApiException):
        return exc.status == 429 or (exc.status or 0) >= 500 or exc.status == 0
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError | TimeoutError)


def retried(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs, _request_timeout=TIMEOUT_SECONDS)``, repeated on transient failures, boundedly."""
    for delay in (*TRANSIENT_BACKOFFS, None):
        try:
            return call(*args, **kwargs, _request_timeout=TIMEOUT_SECONDS)
        except Exception as exc:
            if delay is None or not transient(exc):
                raise
            logger.info("%s failed (%s); retrying in %.1f s", getattr(call, "__name__", "a call"), _brief(exc), delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # the last attempt returns or raises


def once(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs, _request_timeout=TIMEOUT_SECONDS)``, not repeated: where the caller tries again
    anyway (a progress reporter sends its next report), a retry would only hold a thread for longer."""
    return call(*args, **kwargs, _request_timeout=TIMEOUT_SECONDS)


def failure(exc: BaseException) -> str | None:
    """The one line of an API call's failure that is no bug of ours — no answer, or an HTTP error status (an RBAC
    rule missing, say) — else None (a bug: its traceback is worth logging)."""
    if transient(exc) or isinstance(exc, kubernetes.client.ApiException):
        return _brief(exc)
    return None


def _brief(exc: BaseException) -> str:
    if isinstance(exc, kubernetes.client.ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def list_profiles(api: kubernetes.client.CustomObjectsApi, namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every RuntimeProfile in ``namespaces`` (all namespaces when empty)."""
    if not namespaces:
        return _items(retried(api.list_cluster_custom_object, *PROFILES))
    listings = [
        retried(api.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL) for namespace in namespaces
    ]
    return [item for listing in listings for item in _items(listing)]


def namespace_labels(api: kubernetes.client.CustomObjectsApi) -> dict[str, dict[str, str]]:
    """Every namespace's labels, by name."""
    listing = retried(kubernetes.client.CoreV1Api(api.api_client).list_namespace)
    found = (item.metadata for item in listing.items)
    return {meta.name: dict(meta.labels or {}) for meta in found if meta is not None and meta.name}


def read_peering(api: kubernetes.client.CustomObjectsApi, name: str, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """kopf's peering object, whose status lists the live peers: kopf keeps the same peers in each watched
    namespace, so the first one's; cluster-wide when all namespaces are watched."""
    if namespaces:
        return _object(retried(api.get_namespaced_custom_object, *PEERINGS, namespaces[0], "kopfpeerings", name))
    return _object(retried(api.get_cluster_custom_object, *PEERINGS, "clusterkopfpeerings", name))


def _object(answer: object) -> dict[str, Any]:
    """The JSON object the custom-objects API answers (typed ``object`` by the client)."""
    if not isinstance(answer, dict):
        raise TypeError(f"the API server answered {type(answer).__name__}, not an object")
    return cast(dict[str, Any], answer)


def _items(answer: object) -> list[dict[str, Any]]:
    return list(_object(answer)["items"])


def publish_fit(api: kubernetes.client.CustomObjectsApi, profile: Profile) -> None:
    """Show a profile's fit in its RuntimeProfile's status (a shipped profile has none); a failed fit gets an Event.

    ``status.model``, the ``Fitted`` condition and ``status.observedGeneration``.
    """
    if profile.namespace is None or profile.name is None:
        return
    status: dict[str, Any] = {"model": profile.model_status(), "conditions": [profile.fitted_condition()]}
    if profile.generation is not None:
        status["observedGeneration"] = profile.generation
    retried(api.patch_namespaced_custom_object_status, GROUP, VERSION, profile.namespace, PLURAL, profile.name,
            {"status": status})  # fmt: skip
    fit = profile.last_fit
    if fit is not None and fit.error is not None:
        post_event(api, profile.namespace, profile.name, fit.reason or reasons.FIT_FAILED, fit.error)


def report_bad_profile(
    api: kubernetes.client.CustomObjectsApi,
    namespace: str,
    name: str,
    generation: int | None,
    message: str,
    reason: str = reasons.BAD_PROFILE,
) -> None:
    """Say on a RuntimeProfile the operator cannot use why: ``Fitted`` False, ``reason`` (BadProfile,
    DuplicateWorkload).

    (Its Warning Event comes from the profile's own handler, which runs on it at every start too.)
    """
    condition = codec.condition(reasons.FITTED, "False", reason, message, None, generation)
    status: dict[str, Any] = {"conditions": [condition]}
    if generation is not None:
        status["observedGeneration"] = generation
    retried(api.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, PLURAL, name, {"status": status})


def post_event(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, reason: str, message: str, warning: bool = True
) -> None:
    """A core/v1 Event on the RuntimeProfile ``namespace/name`` (from any thread: kopf's own poster needs its loop)."""
    involved = {"apiVersion": codec.API_VERSION, "kind": codec.KIND, "namespace": namespace, "name": name}
    _post(api, involved, reason, message, warning)


def post_rayjob_event(
    api: kubernetes.client.CustomObjectsApi, rayjob: Mapping[str, Any], reason: str, message: str
) -> None:
    """A Warning Event on a RayJob, from a thread of ours (the sweep of running jobs)."""
    metadata = rayjob.get("metadata") or {}
    involved = {
        "apiVersion": "/".join(RAYJOBS[:2]),
        "kind": "RayJob",
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
    }
    _post(api, involved, reason, message, warning=True)


def _post(
    api: kubernetes.client.CustomObjectsApi, involved: dict[str, Any], reason: str, message: str, warning: bool
) -> None:
    now = contract.format_timestamp(contract.now())
    namespace = involved["namespace"]
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": namespace, "generateName": f"{involved['name']}."},
        "involvedObject": {key: value for key, value in involved.items() if value is not None},
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    core = kubernetes.client.CoreV1Api(api.api_client)
    retried(core.create_namespaced_event, namespace, body)


def read_rayjob(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, *, retry: bool = True
) -> dict[str, Any]:
    """The RayJob as stored now (raises the client's 404 when there is none); ``retry`` False: ``once``."""
    group, version, plural = RAYJOBS
    call = retried if retry else once
    return _object(call(api.get_namespaced_custom_object, group, version, namespace, plural, name))


def read_raycluster(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, *, admission: bool = False
) -> dict[str, Any]:
    """The RayCluster a ``clusterSelector`` job names (``application.ClusterReader``).

    One that does not exist, or that the advisor may not read, is the job's
    error (``UnpredictableJob``, one line naming it); an API server that
    does not answer is ``ApiUnavailable`` (the caller tries again later).
    ``admission``: read once, within ``ADMISSION_READ_SECONDS``.
    """
    what = f"RayCluster {name!r} in namespace {namespace!r} (spec.clusterSelector)"
    try:
        group, version, plural = RAYCLUSTERS
        if admission:
            answer = api.get_namespaced_custom_object(
                group, version, namespace, plural, name, _request_timeout=ADMISSION_READ_SECONDS
            )
        else:
            answer = retried(api.get_namespaced_custom_object, group, version, namespace, plural, name)
    except Exception as exc:
        if transient(exc):
            raise ApiUnavailable(f"could not read {what}: {_brief(exc)}") from None
        if not isinstance(exc, kubernetes.client.ApiException):
            raise
        if exc.status == 404:
            raise UnpredictableJob(f"{what} does not exist: the job runs on it, so its size is there") from None
        if exc.status == 403:
            raise UnpredictableJob(f"{what} may not be read by the advisor (RBAC: get rayclusters)") from None
        raise UnpredictableJob(f"could not read {what}: {_brief(exc)}") from None
    if not isinstance(answer, dict):
        raise UnpredictableJob(f"{what}: the API server answered {type(answer).__name__}, not an object")
    return answer


def patch_rayjob(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, patch: Mapping[str, Any], *, retry: bool = True
) -> None:
    """A merge patch of a RayJob (our annotations only: the sweep's and the progress reports')."""
    group, version, plural = RAYJOBS
    (retried if retry else once)(
        api.patch_namespaced_custom_object, group, version, namespace, plural, name, dict(patch)
    )


def pod_labels(api: kubernetes.client.CustomObjectsApi, namespace: str, name: str) -> dict[str, str] | None:
    """The labels of a pod (None: there is no such pod), asked ``once``: who a progress report comes from."""
    try:
        pod = once(kubernetes.client.CoreV1Api(api.api_client).read_namespaced_pod, name, namespace)
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(pod.metadata.labels or {}) if pod.metadata is not None else {}


def review_token(api: kubernetes.client.CustomObjectsApi, token: str, audiences: list[str]) -> dict[str, Any]:
    """The API server's TokenReview of a bearer token for ``audiences``: ``status`` says who it is, if anyone.

    Asked ``once``: on a 429 the report is refused (503), never repeated while unauthenticated clients wait."""
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": audiences},
    }
    answer = once(kubernetes.client.AuthenticationV1Api(api.api_client).create_token_review, review)
    return _object(api.api_client.sanitize_for_serialization(answer))


def append_observation(
    api: kubernetes.client.CustomObjectsApi, store: ProfileStore, namespace: str, observation: Observation
) -> bool:
    """Add a run to ``status.observations`` of the workload's RuntimeProfile, unless it is there already.

    Runs are only ever written into the job's own ``namespace``: into the
    profile ``find`` resolves there, or, when the job was served by a shared
    or shipped profile, into a new RuntimeProfile in its namespace seeded
    with that profile's runs (from then on the namespace's own profile); the
    first run of a workload with no profile visible starts one, without seed
    runs (``NotEnoughData`` until it holds enough).
    The run joins the bounded history of ``status`` (``history``: a window
    of runs per configuration, per-configuration summaries, the last learned
    keys). Appends to one profile are serialized in the process (one writer
    per profile) and grouped: runs that arrive while a write is under way go
    together in the next one (one read and one write for all of them). The
    write carries the resourceVersion it read and is retried on 409 after a
    jittered exponential backoff. Raises ``ProfileConflict`` when the
    profile kept changing.
    """
    assert observation.workload is not None  # learned runs always name their workload
    try:
        profile: Profile | None = store.find(namespace, observation.workload)
    except NoProfileYet:
        profile = None  # the workload's first run here: it starts the profile
    target, name = namespace, profile.name if profile else None
    if profile is None or profile.namespace != namespace or name is None:
        name = codec.resource_name(observation.workload)
        _create_seeded(api, target, name, observation.workload, profile.observations if profile else [])
    writer = _writer(target, name)
    mine = _Pending(codec.observation_to_k8s(observation))
    with writer.guard:
        writer.pending.append(mine)
    with writer.lock:
        if not mine.done:  # no write took it yet: this one takes it and whatever waits with it
            with writer.guard:
                batch, writer.pending = writer.pending, []
            try:
                results = _append_all(api, target, name, [entry.item for entry in batch])
            except Exception as exc:  # noqa: BLE001 (handed to every waiting caller, who raises it)
                for entry in batch:
                    entry.error, entry.done = exc, True
            else:
                for entry, result in zip(batch, results, strict=True):
                    entry.result, entry.done = result, True
    if isinstance(mine.error, ProfileConflict):
        raise ProfileConflict(str(mine.error)) from mine.error
    if mine.error is not None:
        raise mine.error
    return mine.result


def _append_all(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, items: list[dict[str, object]]
) -> list[bool]:
    """Learn ``items`` into RuntimeProfile ``namespace/name`` in one write; for each, whether it was new."""
    for attempt in range(CONFLICT_RETRIES):
        current = _object(retried(api.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name))
        learned = history.History.from_status(current.get("status"))
        results = []
        for item in items:
            source = item.get("source")
            new = not learned.knows(source if isinstance(source, str) else None)
            if new:
                learned.add(item)
            results.append(new)
        if not any(results):
            return results
        version = current["metadata"]["resourceVersion"]
        body = {"metadata": {"resourceVersion": version}, "status": learned.status()}
        try:
            retried(api.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, PLURAL, name, body)
            return results
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
        base, cap = CONFLICT_BACKOFF
        time.sleep(random.uniform(0, min(cap, base * 2**attempt)))  # jitter, not secrecy
    raise ProfileConflict(f"RuntimeProfile {namespace}/{name} kept changing")


@dataclasses.dataclass
class _Pending:
    """A run waiting for its write; ``result``: whether it was new (set with ``done``), or ``error``."""

    item: dict[str, object]
    result: bool = False
    error: Exception | None = None
    done: bool = False


@dataclasses.dataclass
class _Writer:
    """One RuntimeProfile's writes in this process: ``lock`` serializes them, ``pending`` waits for the next."""

    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    guard: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    pending: list[_Pending] = dataclasses.field(default_factory=list)


_writers: dict[tuple[str, str], _Writer] = {}
_writers_guard = threading.Lock()


def _writer(namespace: str, name: str) -> _Writer:
    with _writers_guard:
        return _writers.setdefault((namespace, name), _Writer())


def _create_seeded(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, workload: str, seed: list[Observation]
) -> None:
    """Create the RuntimeProfile a job served by a shared or shipped profile learns into (it may exist already)."""
    manifest = codec.runtime_profile_manifest(workload, seed)
    manifest["metadata"] = {"name": name}
    try:
        retried(api.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, manifest)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise


MERGE_PATCH = "application/merge-patch+json"  # the core API's default for a dict body is a JSON patch
CA_LABELS = {"app.kubernetes.io/managed-by": COMPONENT}


def _raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The object the API server answers, as JSON: not the client's model (which refuses objects it finds
    incomplete, and decodes nothing we need)."""
    answer = retried(call, *args, **kwargs, _preload_content=False)
    return _object(json.loads(cast(urllib3.BaseHTTPResponse, answer).data))


def _merge_patch(call: Callable[..., Any], *args: Any) -> None:
    """A merge patch (its body carries the resourceVersion read: a 409 when the object changed meanwhile)."""
    _raw(call, *args, _content_type=MERGE_PATCH)


def read_secret(api: kubernetes.client.CustomObjectsApi, namespace: str, name: str) -> tuple[dict[str, bytes], str]:
    """A Secret's data, decoded, and its resourceVersion (what ``write_secret`` sends back)."""
    secret = _raw(kubernetes.client.CoreV1Api(api.api_client).read_namespaced_secret, name, namespace)
    data = {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}
    return data, str(secret["metadata"]["resourceVersion"])


def write_secret(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, data: Mapping[str, bytes], version: str
) -> None:
    """Set keys of a Secret as read at ``version`` (a 409 if it changed since); its other keys are kept."""
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    body = {"metadata": {"resourceVersion": version}, "data": encoded}
    _merge_patch(kubernetes.client.CoreV1Api(api.api_client).patch_namespaced_secret, name, namespace, body)


def set_ca_bundle(api: kubernetes.client.CustomObjectsApi, name: str, ca: bytes) -> None:
    """Every webhook of the MutatingWebhookConfiguration ``name`` trusts ``ca`` (written only where it differs)."""
    admission = kubernetes.client.AdmissionregistrationV1Api(api.api_client)
    configuration = _raw(admission.read_mutating_webhook_configuration, name)
    bundle = base64.b64encode(ca).decode()
    webhooks = configuration.get("webhooks") or []
    if all((hook.get("clientConfig") or {}).get("caBundle") == bundle for hook in webhooks):
        return
    for hook in webhooks:
        hook.setdefault("clientConfig", {})["caBundle"] = bundle
    version = configuration["metadata"].get("resourceVersion")
    body = {"metadata": {"resourceVersion": version}, "webhooks": webhooks}  # a list is replaced whole
    _merge_patch(admission.patch_mutating_webhook_configuration, name, body)
    logger.info("MutatingWebhookConfiguration %s trusts the current CA", name)


def publish_ca(api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, ca: bytes) -> None:
    """The ConfigMap ``namespace/name`` holds ``ca`` as ``ca.crt``: created, or updated where it differs."""
    core = kubernetes.client.CoreV1Api(api.api_client)
    data = {contract.PROGRESS_CA_PATH: ca.decode()}
    try:
        current = _raw(core.read_namespaced_config_map, name, namespace)
    except kubernetes.client.ApiException as exc:
        if exc.status != 404:
            raise
        manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": CA_LABELS},
                    "data": data}  # fmt: skip
        _raw(core.create_namespaced_config_map, namespace, manifest)
        logger.info("published the CA in ConfigMap %s/%s", namespace, name)
        return
    if (current.get("data") or {}).get(contract.PROGRESS_CA_PATH) == data[contract.PROGRESS_CA_PATH]:
        return
    body = {"metadata": {"resourceVersion": current["metadata"].get("resourceVersion")}, "data": data}
    _merge_patch(core.patch_namespaced_config_map, name, namespace, body)
    logger.info("updated the CA in ConfigMap %s/%s", namespace, name)
