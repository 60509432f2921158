"""A RayJob's worker groups: their size as KubeRay will make it, their pods' resources, and their resize.

The worker count follows KubeRay's own rule (``GetWorkerGroupDesiredReplicas``):
a suspended group has none; otherwise replicas are clamped into
``[minReplicas, maxReplicas]`` (``maxReplicas`` wins when ``min > max``) and
multiplied by ``numOfHosts``. Unset fields take the CRD's defaults.
Per-pod resources come from the Ray container (the first one, as KubeRay
assumes), requests first and limits where a request is missing, as
Kubernetes does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import pydantic
from kubernetes.utils import parse_quantity

from rayjob_advisor import contract
from rayjob_advisor.errors import AnnotationError, UnpredictableJob
from rayjob_advisor.kuberay.manifest import MergePatch
from rayjob_advisor.kuberay.scheduling import placement_hint, pod_accelerator

# CRD defaults of ray.io/v1 WorkerGroupSpec.
DEFAULT_MIN_REPLICAS = 0
DEFAULT_MAX_REPLICAS = 2_147_483_647
DEFAULT_REPLICAS = 0
DEFAULT_NUM_OF_HOSTS = 1
_RESIZED_FIELDS = ("groupName", "replicas", "minReplicas", "maxReplicas")


class WorkerGroup(pydantic.BaseModel):
    """One worker group, its size rule and per-worker resources."""

    model_config = pydantic.ConfigDict(frozen=True)

    name: str
    index: int
    replicas: int
    min_replicas: int
    max_replicas: int
    num_of_hosts: int
    suspended: bool
    cpus: float | None
    gpus: float
    gpu_resources: tuple[str, ...] = ()  # the GPU resource names its Ray container sets
    memory_bytes: int | None
    accelerators: dict[str, float]
    placement: contract.Placement | None = None  # what its pod template requires (``placement_hint``)
    accelerator: str | None = None  # the GPU model its pods select (``pod_accelerator``)

    @property
    def workers(self) -> int:
        """Ray worker pods of this group as KubeRay will create them."""
        return 0 if self.suspended else self.replicas * self.num_of_hosts


def worker_groups(cluster: Mapping[str, Any]) -> tuple[WorkerGroup, ...]:
    """The worker groups of a ``rayClusterSpec``, in order."""
    return tuple(worker_group(group, index) for index, group in enumerate(cluster.get("workerGroupSpecs") or []))


def worker_group(spec: Mapping[str, Any], index: int) -> WorkerGroup:
    where = f"workerGroupSpecs[{index}]"
    name = spec.get("groupName") or where
    min_replicas = _integer(spec, "minReplicas", DEFAULT_MIN_REPLICAS, where)
    max_replicas = _integer(spec, "maxReplicas", DEFAULT_MAX_REPLICAS, where)
    replicas = _integer(spec, "replicas", DEFAULT_REPLICAS, where)
    replicas = max_replicas if min_replicas > max_replicas else min(max(replicas, min_replicas), max_replicas)
    resources = container_resources(spec, where)
    return WorkerGroup(
        name=name,
        index=index,
        replicas=replicas,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        num_of_hosts=max(1, _integer(spec, "numOfHosts", DEFAULT_NUM_OF_HOSTS, where)),
        suspended=bool(spec.get("suspend")),
        placement=placement_hint(spec.get("template") or {}, name),
        accelerator=pod_accelerator(spec.get("template")),
        **resources,
    )


def scale_group(groups: tuple[WorkerGroup, ...], requested: str | None) -> WorkerGroup:
    """The group named by ``scale-group``; by default the GPU group, else the largest."""
    if requested is not None:
        for group in groups:
            if group.name == requested:
                return group
        names = ", ".join(repr(g.name) for g in groups)
        raise AnnotationError(f"{contract.SCALE_GROUP}={requested!r}: no worker group of that name (groups: {names})")
    gpu_groups = [g for g in groups if g.gpus > 0]
    candidates = gpu_groups or list(groups)
    return max(candidates, key=lambda g: g.workers)  # max() keeps the first of equals


def _integer(spec: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = spec.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnpredictableJob(f"{where}.{key}={value!r}: must be a non-negative integer")
    return value


def container_resources(group: Mapping[str, Any], where: str) -> dict[str, Any]:
    """CPUs, GPUs (any resource key ending in ``gpu``), memory and other accelerators of a group's Ray container."""
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
    if not containers:
        raise UnpredictableJob(f"{where}.template.spec.containers is empty: no Ray container to read resources from")
    resources = containers[0].get("resources") or {}
    merged: dict[str, Any] = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    amounts = {
        key: _quantity(value, f"{where} container {containers[0].get('name', 0)!r} resource {key!r}")
        for key, value in merged.items()
    }
    gpu_resources = tuple(key for key in amounts if is_gpu(key))
    accelerators = {k: float(v) for k, v in amounts.items() if "/" in k and not is_gpu(k)}
    cpus = amounts.get("cpu")
    memory = amounts.get("memory")
    return {
        "cpus": float(cpus) if cpus is not None else None,
        "gpus": sum(float(amounts[key]) for key in gpu_resources),
        "gpu_resources": gpu_resources,
        "memory_bytes": int(memory) if memory is not None else None,
        "accelerators": accelerators,
    }


def is_gpu(resource: str) -> bool:
    """A GPU resource name: ``nvidia.com/gpu``, ``amd.com/gpu``, ... any that ends in ``gpu``."""
    return resource.lower().endswith("gpu")


def _quantity(value: Any, what: str) -> Decimal:
    """A Kubernetes quantity (``500m``, ``2``, ``1.5``, ``4Gi``), never negative."""
    try:
        amount: Decimal = parse_quantity(value)  # kubernetes leaves it unannotated
    except (ValueError, TypeError, InvalidOperation) as exc:
        raise UnpredictableJob(f"{what}: {value!r} is not a Kubernetes quantity ({exc})") from None
    if amount < 0:
        raise UnpredictableJob(f"{what}: {value!r} is negative")
    return amount


def resize(
    spec: Mapping[str, Any], index: int, replicas: int, gpus: float | None = None
) -> tuple[MergePatch, dict[str, Any]]:
    """The merge patch setting worker group ``index`` of a RayJob ``spec`` to ``replicas`` (and ``gpus`` per
    worker), and what it had.

    ``minReplicas``/``maxReplicas`` widen only as far as needed to keep
    min <= replicas <= max. GPUs change in the Ray container's limits and
    requests alike (Kubernetes wants them equal) and in Ray's ``num-gpus``
    where the group sets it, so that Ray and Kubernetes agree. A merge
    patch replaces lists whole, so the patch carries every worker group.
    """
    groups = copy.deepcopy(list(spec["rayClusterSpec"]["workerGroupSpecs"]))
    group = groups[index]
    original = {key: group.get(key) for key in _RESIZED_FIELDS}
    group["replicas"] = replicas
    group["minReplicas"] = min(group.get("minReplicas", replicas), replicas)
    group["maxReplicas"] = max(group.get("maxReplicas", replicas), replicas)
    if gpus is not None:
        _set_gpus(group, str(round(gpus)))
    return {"spec": {"rayClusterSpec": {"workerGroupSpecs": groups}}}, original


def _set_gpus(group: dict[str, Any], quantity: str) -> None:
    """Every GPU resource the group's Ray container sets, and its ``num-gpus`` rayStartParam if set, to ``quantity``."""
    resources = group["template"]["spec"]["containers"][0].get("resources") or {}
    for amounts in (resources.get("limits") or {}, resources.get("requests") or {}):
        for resource in amounts:
            if is_gpu(resource):
                amounts[resource] = quantity
    if "num-gpus" in (group.get("rayStartParams") or {}):
        group["rayStartParams"]["num-gpus"] = quantity
