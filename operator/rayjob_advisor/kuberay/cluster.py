"""The Ray cluster a RayJob asks for, as far as its training goes: the pods that train and what each is given.

Training runs on the scaled worker group (``scale-group``, by default the GPU
group, else the largest) or, in a cluster without worker groups, on the head
pod alone. A job on an existing RayCluster (``clusterSelector``, KubeRay's
``ray.io/cluster`` label naming it, in the job's namespace) says nothing of its
size: it is predicted from that cluster's groups (``cluster``), and never
resized — the cluster is shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.errors import UnpredictableJob
from rayjob_advisor.kuberay.groups import WorkerGroup, container_resources, scale_group, worker_groups
from rayjob_advisor.kuberay.manifest import nested
from rayjob_advisor.kuberay.scheduling import pod_accelerator
from rayjob_advisor.kuberay.training import TrainingCount, training_count

AUTOSCALED = "enableInTreeAutoscaling: the Ray autoscaler owns the replicas of every worker group"
HEAD_ONLY = "the cluster has no worker groups: the job runs on the head pod alone"
CLUSTER_LABEL = "ray.io/cluster"  # what a clusterSelector matches: KubeRay's label of a RayCluster's name


def selected_cluster(rayjob: Mapping[str, Any]) -> str | None:
    """The RayCluster a job's ``clusterSelector`` names (None: the job makes its own cluster).

    Raises ``UnpredictableJob`` for a selector without KubeRay's ``ray.io/cluster`` label.
    """
    selector = nested(rayjob, "spec", "clusterSelector")
    if not selector:
        return None
    name = selector.get(CLUSTER_LABEL)
    if not name:
        raise UnpredictableJob(f"spec.clusterSelector has no {CLUSTER_LABEL} label: it names no RayCluster")
    return str(name)


class TrainingPods(pydantic.BaseModel):
    """The pods a RayJob trains on: the scaled group (None: the head pod), each pod's resources, the Ray Train
    worker count, and what the manifest says of placement, accelerator and resizing."""

    model_config = pydantic.ConfigDict(frozen=True)

    group: WorkerGroup | None
    cpus: float | None
    gpus: float
    memory_bytes: int | None
    training: TrainingCount
    resize_blocker: str | None = None
    placement: contract.Placement | None = None  # what the group's pod template requires
    accelerator: str | None = None  # the accelerator the pods select
    cluster: str | None = None  # the existing RayCluster it runs on (``clusterSelector``)
    autoscaling: str | None = None  # that cluster's autoscaler may change the group's size: the range it may take

    @property
    def pods(self) -> int:
        return self.group.workers if self.group else 1


def training_pods(
    rayjob: Mapping[str, Any], inputs: contract.AdvisorInputs, existing: Mapping[str, Any] | None = None
) -> TrainingPods:
    """The pods a RayJob manifest (a dict as the API server returns it) trains on.

    ``inputs`` are its advisor annotations, parsed by ``contract.parse_inputs``;
    ``existing``: the RayCluster its ``clusterSelector`` names, if it has one.
    Raises ``UnpredictableJob`` when the manifest does not say what will run,
    ``AnnotationError`` when ``scale-group`` names no group.
    """
    spec = rayjob.get("spec") or {}
    name = selected_cluster(rayjob)
    if name is not None and existing is None:
        raise UnpredictableJob(
            f"spec.clusterSelector runs the job on an existing RayCluster ({name!r}): its size is in that cluster, "
            "not in the RayJob (offline: rayjob-advisor predict -f JOB --cluster CLUSTER)"
        )
    shared = f"the job runs on the existing RayCluster {name!r} (clusterSelector): a shared cluster is never resized"
    cluster = nested(existing, "spec") if name is not None else spec.get("rayClusterSpec")
    if not cluster:
        raise UnpredictableJob("spec.rayClusterSpec is missing: the RayJob does not say what cluster it runs on")
    groups = worker_groups(cluster)
    if not groups:
        head = cluster.get("headGroupSpec") or {}
        resources = container_resources(head, "headGroupSpec")
        return TrainingPods(
            group=None,
            cpus=resources["cpus"],
            gpus=resources["gpus"],
            memory_bytes=resources["memory_bytes"],
            training=training_count(spec, inputs, 1),
            resize_blocker=HEAD_ONLY,
            accelerator=pod_accelerator(head.get("template")),
            cluster=name,
        )
    group = scale_group(groups, inputs.scale_group)
    autoscaled = AUTOSCALED if cluster.get("enableInTreeAutoscaling") else None
    if group.workers == 0:
        reason = "is suspended" if group.suspended else "has 0 replicas"
        raise UnpredictableJob(f"worker group {group.name!r} {reason}: no worker to run the training on")
    return TrainingPods(
        group=group,
        cpus=group.cpus,
        gpus=group.gpus,
        memory_bytes=group.memory_bytes,
        training=training_count(spec, inputs, group.workers),
        resize_blocker="; ".join(blocker for blocker in (name and shared, autoscaled) if blocker) or None,
        placement=group.placement,
        accelerator=group.accelerator,
        cluster=name,
        autoscaling=_autoscaling(group) if name is not None and autoscaled else None,
    )


def _autoscaling(group: WorkerGroup) -> str | None:
    """What a shared cluster's autoscaler may do to the group the job is predicted on (None: its size is fixed):
    the prediction assumes the replicas it has now."""
    if group.min_replicas == group.max_replicas:
        return None
    span = f"{group.min_replicas}-{group.max_replicas}"
    return f"{group.replicas} replicas of {group.name} as now; the Ray autoscaler may run {span}"
