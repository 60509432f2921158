"""The Ray cluster a RayJob asks for, as far as its training goes: the pods that train and what each is given.

Training runs on the scaled worker group (``scale-group``, by default the GPU
group, else the largest) or, in a cluster without worker groups, on the head
pod alone. A job on an existing cluster (``clusterSelector``) says nothing of
its size: it can be neither predicted nor resized.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.errors import UnpredictableJob
from rayjob_advisor.kuberay.groups import WorkerGroup, container_resources, scale_group, worker_groups
from rayjob_advisor.kuberay.scheduling import pod_accelerator
from rayjob_advisor.kuberay.training import TrainingCount, training_count

AUTOSCALED = "enableInTreeAutoscaling: the Ray autoscaler owns the replicas of every worker group"
HEAD_ONLY = "the cluster has no worker groups: the job runs on the head pod alone"


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

    @property
    def pods(self) -> int:
        return self.group.workers if self.group else 1


def training_pods(rayjob: Mapping[str, Any], inputs: contract.AdvisorInputs) -> TrainingPods:
    """The pods a RayJob manifest (a dict as the API server returns it) trains on.

    ``inputs`` are its advisor annotations, parsed by ``contract.parse_inputs``.
    Raises ``UnpredictableJob`` when the manifest does not say what will run,
    ``AnnotationError`` when ``scale-group`` names no group.
    """
    spec = rayjob.get("spec") or {}
    if spec.get("clusterSelector"):
        raise UnpredictableJob(
            "spec.clusterSelector runs the job on an existing RayCluster: its size is not in the "
            "RayJob, so it can be neither predicted nor resized"
        )
    cluster = spec.get("rayClusterSpec")
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
        )
    group = scale_group(groups, inputs.scale_group)
    if group.workers == 0:
        reason = "is suspended" if group.suspended else "has 0 replicas"
        raise UnpredictableJob(f"worker group {group.name!r} {reason}: no worker to run the training on")
    return TrainingPods(
        group=group,
        cpus=group.cpus,
        gpus=group.gpus,
        memory_bytes=group.memory_bytes,
        training=training_count(spec, inputs, group.workers),
        resize_blocker=AUTOSCALED if cluster.get("enableInTreeAutoscaling") else None,
        placement=group.placement,
        accelerator=group.accelerator,
    )
