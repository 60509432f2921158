"""What the admission webhook writes into a RayJob for others, before KubeRay builds the cluster (opt-in hooks).

Runtime estimates that other schedulers read:

- ``kueue``: ``provreq.kueue.x-k8s.io/maxRunDurationSeconds`` on the RayJob. Kueue passes a job's
  ``provreq.kueue.x-k8s.io/*`` annotations on as parameters of the ProvisioningRequest it makes for it
  (queued GPU provisioning books nodes for that long; its default is seven days).
- ``karpenter``: ``karpenter.sh/do-not-disrupt`` on every pod template of the cluster, with a duration
  counted from the pod's start (Karpenter's accepted value besides ``"true"``), so consolidation
  and drift leave the nodes alone while the job is expected to run, and no longer.

Both carry the job's expected walltime: predicted start-up plus the upper bound of its execution at
its confidence (raise ``confidence`` for more margin).

KubeRay's own deadlines, which it enforces on the job:

- ``kuberay``: ``spec.activeDeadlineSeconds`` (KubeRay kills a job that runs longer) from the walltime,
  and ``spec.preRunningDeadlineSeconds`` (KubeRay fails a job not running by then) from the start-up's
  upper quantile (``startup.UPPER_QUANTILE`` of the profile's runs of as many workers), both with
  ``DEADLINE_MARGIN`` and ``PROVISIONING_SECONDS`` (``kuberay_deadlines``). A value the user set is never
  changed, lowered nor raised: where it is below the advisor's, the ``recommendation`` says so
  (``kuberay_advice``).

And the wiring of progress reports, as service meshes inject their sidecars:

- ``progress``: into the head pod (where the entrypoint, and so Ray Train's controller with the
  ``AdvisorProgress`` callback, runs), a projected service-account token for the advisor's audience mounted
  at ``contract.PROGRESS_TOKEN_DIR``, the ConfigMap holding the CA of the endpoint's certificate (public) mounted
  at ``contract.PROGRESS_CA_DIR`` (optional: the controller publishes it, and the kubelet brings a renewed CA
  to the running job), and in its Ray container (KubeRay's is the first) the endpoint's URL, the job's name
  and the CA file's path as environment variables. A job created
  with ``generateName`` has no name yet at admission: it gets its RayCluster's instead (KubeRay's
  ``ray.io/cluster`` pod label, by the Downward API), from which the callback takes the RayJob's.
  Only where progress reporting is on (``OperatorConfig.progress_url``); elsewhere the job is told so.

A value the user set is never replaced nor duplicated (matched by annotation, volume, mount path, env name).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.kuberay.manifest import MergePatch, merge, nested

HOOKS = ("kueue", "karpenter", "progress", "kuberay")
ACTIVE_DEADLINE, PRE_RUNNING_DEADLINE = "activeDeadlineSeconds", "preRunningDeadlineSeconds"
INT32_MAX = 2**31 - 1  # both fields are int32 in KubeRay's CRD

DEADLINE_MARGIN = 1.5
"""KubeRay's deadlines are this many times what the advisor expects (plus ``PROVISIONING_SECONDS``).

A job KubeRay kills at ``activeDeadlineSeconds`` loses all its work, while a
deadline set too late only lets a hung job hold its pods a little longer:
the upper bound is a quantile (0.9 by default), which one run in ten
exceeds by design, so the deadline must not sit on it. Half as long again
leaves a run slower than its bound room to finish, and still stops one that
hangs. Raise the job's ``confidence`` for more (the bound moves with it)."""

PROVISIONING_SECONDS = 600
"""Added to both deadlines: KubeRay counts them from the job's start, when it creates the cluster, so they
include pod scheduling, node provisioning and image pulls before the Ray job runs, which no profile measures
(its start-up begins in the driver's ``fit()``). Ten minutes: a GPU node coming up and pulling a Ray image."""

_RISKS = {
    ACTIVE_DEADLINE: "KubeRay may kill the job before it can finish",
    PRE_RUNNING_DEADLINE: "KubeRay may fail the job before it can start",
}
TOKEN_VOLUME, CA_VOLUME = "rayjob-advisor-token", "rayjob-advisor-ca"
TOKEN_SECONDS = 3600  # the kubelet renews a projected token at 80 % of its life; the callback re-reads it
PROGRESS_OFF = "the progress hook is on for this namespace, but progress reporting is off (progress.enabled=false)"


class Progress(pydantic.BaseModel):
    """Where the ``progress`` hook points a job's reporter: the endpoint, its tokens' audience, the ConfigMap in the
    job's namespace that holds the endpoint's CA (``ca.crt``; None: the system's CAs verify the endpoint)."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    url: str
    audience: str
    ca_configmap: str | None = None


def enabled(configured: Iterable[str], namespace_labels: Mapping[str, str]) -> frozenset[str]:
    """The hooks for a namespace: the configured ones, a label ``rayjob-advisor.io/hook-NAME`` turning one on or off."""
    result = set(configured)
    for hook in HOOKS:
        value = namespace_labels.get(contract.HOOK_LABEL_PREFIX + hook, "").strip().lower()
        if value == "true":
            result.add(hook)
        elif value == "false":
            result.discard(hook)
    return frozenset(result)


def kuberay_deadlines(walltime_seconds: float, startup_upper_seconds: float) -> dict[str, int]:
    """KubeRay's deadline fields for a job expected to take ``walltime_seconds`` (start-up included) and to start
    within ``startup_upper_seconds`` (module docstring): whole seconds, at least 1, within the CRD's int32."""
    active = PROVISIONING_SECONDS + DEADLINE_MARGIN * walltime_seconds
    pre_running = PROVISIONING_SECONDS + DEADLINE_MARGIN * startup_upper_seconds
    return {field: min(INT32_MAX, max(1, math.ceil(seconds))) for field, seconds in
            ((ACTIVE_DEADLINE, active), (PRE_RUNNING_DEADLINE, pre_running))}  # fmt: skip


def kuberay_advice(rayjob: Mapping[str, Any], walltime_seconds: float, startup_upper_seconds: float) -> dict[str, Any]:
    """What the ``recommendation`` shows of the ``kuberay`` hook: the advisor's deadlines and, where the user set a
    lower one (kept as it is), what that risks."""
    spec = _own_spec(rayjob)
    wanted = kuberay_deadlines(walltime_seconds, startup_upper_seconds)
    lower = [
        f"spec.{field}={spec[field]} is below the advisor's {seconds}: {_RISKS[field]}"
        for field, seconds in wanted.items()
        if isinstance(spec.get(field), int) and spec[field] < seconds
    ]
    return {**wanted, **({"reason": "; ".join(lower)} if lower else {})}


def _own_spec(rayjob: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = rayjob.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def patch(
    rayjob: Mapping[str, Any],
    hooks: frozenset[str],
    walltime_seconds: float,
    progress: Progress | None = None,
    startup_upper_seconds: float = 0.0,
) -> MergePatch:
    """The merge patch writing ``hooks`` for a job expected to take ``walltime_seconds`` (empty if none apply).

    ``rayjob`` is the job as it will be once the advice is applied (a resize replaces the worker group
    list, which this patch must carry whole as well). ``progress``: where reports go; None: nowhere, and
    the ``progress`` hook writes nothing. ``startup_upper_seconds``: the start-up the job stays under at
    ``startup.UPPER_QUANTILE`` (``kuberay``).
    """
    seconds = max(1, math.ceil(walltime_seconds))
    result: MergePatch = {}
    if "kuberay" in hooks:
        own = _own_spec(rayjob)
        wanted = kuberay_deadlines(walltime_seconds, startup_upper_seconds)
        unset = {field: value for field, value in wanted.items() if own.get(field) is None}
        if unset:
            result["spec"] = unset
    annotations = (rayjob.get("metadata") or {}).get("annotations") or {}
    if "kueue" in hooks and not annotations.get(contract.KUEUE_MAX_RUN_DURATION):
        result["metadata"] = {"annotations": {contract.KUEUE_MAX_RUN_DURATION: str(seconds)}}
    cluster = (rayjob.get("spec") or {}).get("rayClusterSpec")
    if "karpenter" in hooks and isinstance(cluster, Mapping):
        duration = contract.format_duration(seconds)
        spec: dict[str, Any] = {}
        if _unset(cluster.get("headGroupSpec")):
            spec["headGroupSpec"] = {
                "template": {"metadata": {"annotations": {contract.KARPENTER_DO_NOT_DISRUPT: duration}}}
            }
        groups = cluster.get("workerGroupSpecs")
        if isinstance(groups, list) and any(_unset(group) for group in groups):
            groups = copy.deepcopy(groups)
            for group in groups:
                if _unset(group):
                    template = group["template"]
                    metadata = template.get("metadata") if isinstance(template.get("metadata"), Mapping) else {}
                    annotations = nested(metadata, "annotations")
                    annotations = annotations if isinstance(annotations, Mapping) else {}
                    template["metadata"] = {
                        **metadata,
                        "annotations": {**annotations, contract.KARPENTER_DO_NOT_DISRUPT: duration},
                    }
            spec["workerGroupSpecs"] = groups
        if spec:
            merge(result, {"spec": {"rayClusterSpec": spec}})
    if "progress" in hooks and progress is not None and isinstance(cluster, Mapping):
        pod = _reporting_pod(rayjob, nested(cluster, "headGroupSpec", "template", "spec"), progress)
        if pod:
            merge(result, {"spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": pod}}}}})
    return result


def _reporting_pod(rayjob: Mapping[str, Any], pod: object, progress: Progress) -> dict[str, Any]:
    """The head pod's volumes and containers with what the progress reporter needs and lacks (empty: nothing).

    A pod the schema would reject (admission comes before validation) is left alone.
    """
    if not isinstance(pod, Mapping):
        return {}
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], Mapping):
        return {}
    ray = dict(containers[0])  # KubeRay's Ray container is the first of the pod
    volumes, mounts, env = _items(pod.get("volumes")), _items(ray.get("volumeMounts")), _items(ray.get("env"))
    if volumes is None or mounts is None or env is None:
        return {}
    result: dict[str, Any] = {}
    named = {variable.get("name") for variable in env}
    missing = [variable for names, variable in _settings(rayjob, progress) if not names & named]
    if missing:
        ray["env"] = [*env, *missing]
    wanted = [(contract.PROGRESS_TOKEN_DIR, _token_volume(progress.audience))]
    if progress.ca_configmap and any(variable["name"] == contract.PROGRESS_CA_ENV for variable in missing):
        wanted.append((contract.PROGRESS_CA_DIR, _ca_volume(progress.ca_configmap)))
    new_mounts, new_volumes = list(mounts), list(volumes)
    for path, volume in wanted:  # a path the user mounts, or a volume name the user has, is theirs
        if not any(mount.get("mountPath") == path for mount in mounts):
            new_mounts.append({"name": volume["name"], "mountPath": path, "readOnly": True})
            if not any(existing.get("name") == volume["name"] for existing in volumes):
                new_volumes.append(volume)
    if new_mounts != mounts:
        ray["volumeMounts"] = new_mounts
    if new_volumes != volumes:
        result["volumes"] = new_volumes
    if ray != containers[0]:
        result["containers"] = [ray, *containers[1:]]
    return result


def _items(value: object) -> list[Mapping[str, Any]] | None:
    """A list of objects (unset: empty); None when it is something else."""
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(item, Mapping) for item in value):
        return value
    return None


def _token_volume(audience: str) -> dict[str, Any]:
    """A projected service-account token for the advisor (the kubelet renews it): the reporter's credential."""
    token = {"audience": audience, "expirationSeconds": TOKEN_SECONDS, "path": contract.PROGRESS_TOKEN_PATH}
    return {"name": TOKEN_VOLUME, "projected": {"sources": [{"serviceAccountToken": token}]}}


def _ca_volume(configmap: str) -> dict[str, Any]:
    """The CA's ConfigMap, optional: a pod admitted before the controller published it still starts (the kubelet
    adds the file once it exists, and updates it when the CA changes)."""
    items = [{"key": contract.PROGRESS_CA_PATH, "path": contract.PROGRESS_CA_PATH}]
    return {"name": CA_VOLUME, "configMap": {"name": configmap, "items": items, "optional": True}}


def _settings(rayjob: Mapping[str, Any], progress: Progress) -> list[tuple[set[str], dict[str, Any]]]:
    """The reporter's environment variables, each with the names that, set by the user, already give it."""
    name = (rayjob.get("metadata") or {}).get("name")
    job_names = {contract.PROGRESS_RAYJOB_ENV, contract.PROGRESS_RAY_CLUSTER_ENV}
    if isinstance(name, str) and name:
        job: dict[str, Any] = {"name": contract.PROGRESS_RAYJOB_ENV, "value": name}
    else:  # generateName: the name comes after admission; KubeRay labels the pods with the cluster's
        label = {"fieldRef": {"fieldPath": f"metadata.labels['{contract.RAY_CLUSTER_LABEL}']"}}
        job = {"name": contract.PROGRESS_RAY_CLUSTER_ENV, "valueFrom": label}
    result = [
        ({contract.PROGRESS_URL_ENV}, {"name": contract.PROGRESS_URL_ENV, "value": progress.url}),
        (job_names, job),
    ]
    if progress.ca_configmap:
        ca_names = {contract.PROGRESS_CA_ENV, contract.PROGRESS_CA_PEM_ENV}
        ca_file = f"{contract.PROGRESS_CA_DIR}/{contract.PROGRESS_CA_PATH}"
        result.append((ca_names, {"name": contract.PROGRESS_CA_ENV, "value": ca_file}))
    return result


def _unset(group: object) -> bool:
    """Whether a group has a pod template without a do-not-disrupt of its own (admission sees any spec)."""
    template = nested(group, "template")
    if not isinstance(template, Mapping):
        return False
    annotations = nested(template, "metadata", "annotations")
    return not isinstance(annotations, Mapping) or contract.KARPENTER_DO_NOT_DISRUPT not in annotations
