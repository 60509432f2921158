"""Kubernetes I/O of the advisor's own objects: RuntimeProfile reads and writes.

Every call has a timeout: a hung API server delays learning, it never
blocks the thread that waits for it.
"""

from __future__ import annotations

from typing import Any, cast

import kubernetes

from rayjob_advisor import profiles
from rayjob_advisor.observations import Observation

GROUP, VERSION, PLURAL = profiles.API_GROUP, "v1alpha1", "runtimeprofiles"
PROFILES = (GROUP, VERSION, PLURAL)
TIMEOUT_SECONDS = 10.0
CONFLICT_RETRIES = 10


class ProfileConflict(Exception):
    """A RuntimeProfile kept changing under our writes: try again later."""


def client(kube_api: str | None) -> kubernetes.client.CustomObjectsApi:
    """The API for custom objects: ``kube_api`` if set, else in-cluster, else the kubeconfig."""
    if kube_api:
        configuration = kubernetes.client.Configuration()
        configuration.host = kube_api
        return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(configuration))
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient())


def list_profiles(api: kubernetes.client.CustomObjectsApi, namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every RuntimeProfile in ``namespaces`` (all namespaces when empty)."""
    if not namespaces:
        return _items(api.list_cluster_custom_object(*PROFILES, _request_timeout=TIMEOUT_SECONDS))
    listings = [
        api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _request_timeout=TIMEOUT_SECONDS)
        for namespace in namespaces
    ]
    return [item for listing in listings for item in _items(listing)]


def _object(answer: object) -> dict[str, Any]:
    """The JSON object the custom-objects API answers (typed ``object`` by the client)."""
    if not isinstance(answer, dict):
        raise TypeError(f"the API server answered {type(answer).__name__}, not an object")
    return cast(dict[str, Any], answer)


def _items(answer: object) -> list[dict[str, Any]]:
    return list(_object(answer)["items"])


def publish_fit(api: kubernetes.client.CustomObjectsApi, profile: profiles.Profile) -> None:
    """Show a profile's fit in its RuntimeProfile's ``status.model`` (a shipped profile has none)."""
    if profile.namespace is None or profile.name is None:
        return
    body = {"status": {"model": profile.model_status()}}
    api.patch_namespaced_custom_object_status(
        GROUP, VERSION, profile.namespace, PLURAL, profile.name, body, _request_timeout=TIMEOUT_SECONDS
    )


def append_observation(
    api: kubernetes.client.CustomObjectsApi, store: profiles.ProfileStore, namespace: str, observation: Observation
) -> bool:
    """Add a run to ``status.observations`` of the workload's RuntimeProfile, unless it is there already.

    Runs are only ever written into the job's own ``namespace``: into the
    profile ``find`` resolves there, or, when the job was served by a shared
    or shipped profile, into a new RuntimeProfile in its namespace seeded
    with that profile's runs (from then on the namespace's own profile).
    Optimistic concurrency: the write carries the resourceVersion it read and
    is retried on 409. Raises ``ProfileConflict`` when the profile kept changing.
    """
    assert observation.workload is not None  # learned runs always name their workload
    profile = store.find(namespace, observation.workload)
    target, name = namespace, profile.name
    if profile.namespace != namespace or name is None:
        name = profiles.resource_name(observation.workload)
        _create_seeded(api, target, name, observation.workload, profile.observations)
    item = profiles.observation_to_k8s(observation)
    for _ in range(CONFLICT_RETRIES):
        current = _object(
            api.get_namespaced_custom_object(GROUP, VERSION, target, PLURAL, name, _request_timeout=TIMEOUT_SECONDS)
        )
        learned = list((current.get("status") or {}).get("observations") or [])
        if any(existing.get("source") == observation.source for existing in learned):
            return False
        version = current["metadata"]["resourceVersion"]
        body = {"metadata": {"resourceVersion": version}, "status": {"observations": [*learned, item]}}
        try:
            api.patch_namespaced_custom_object_status(
                GROUP, VERSION, target, PLURAL, name, body, _request_timeout=TIMEOUT_SECONDS
            )
            return True
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
    raise ProfileConflict(f"RuntimeProfile {target}/{name} kept changing")


def _create_seeded(
    api: kubernetes.client.CustomObjectsApi, namespace: str, name: str, workload: str, seed: list[Observation]
) -> None:
    """Create the RuntimeProfile a job served by a shared or shipped profile learns into (it may exist already)."""
    manifest = profiles.runtime_profile_manifest(workload, seed)
    manifest["metadata"] = {"name": name}
    try:
        api.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, manifest, _request_timeout=TIMEOUT_SECONDS
        )
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
