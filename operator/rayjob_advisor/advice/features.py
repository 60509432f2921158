"""A RayJob -> the features a runtime model predicts from, and what the planner may change of them.

What the manifest says (the pods that train, their resources, the Ray Train
worker count, placement and accelerator) is read by the KubeRay adapter
(``kuberay.cluster``); this module adds what the job's annotations say.

``workers`` is the number of Ray Train workers, which a script sets apart
from the pods (``kuberay.training``); without a count it is predicted as one
worker per pod, never resized.

``batch_size`` is the global batch (summed over the Ray Train workers):
``batch-size`` as given, or ``batch-size-per-worker`` x workers. Resizing
(``with_replicas``) keeps the per-worker batch fixed, so the global batch
scales with the workers, unless the job said ``batch-scaling: global``
(the batch rule of ``contract``).

``placement`` is how the scheduler will lay the scaled group's pods on
nodes, where the RayJob says so: the ``placement`` annotation, else what
the group's pod template requires (``kuberay.scheduling.placement_hint``);
None when nothing does (the model then assumes packing and says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.errors import UnpredictableJob
from rayjob_advisor.kuberay.cluster import training_pods
from rayjob_advisor.kuberay.groups import WorkerGroup
from rayjob_advisor.kuberay.training import TrainingCount


class Features(pydantic.BaseModel):
    """What the models need about one RayJob, and what the planner may change."""

    model_config = pydantic.ConfigDict(frozen=True)

    workload: str | None
    dataset_size: int | None
    epochs: int | None
    batch_size: int | None
    workers: int
    cpus_per_worker: float | None
    gpus_per_worker: float
    memory_bytes_per_worker: int | None
    scale_group: WorkerGroup | None
    resize_blocker: str | None = None
    training: TrainingCount = TrainingCount()
    batch_held: contract.BatchScaling = "per-worker"
    batch_size_per_worker: int | float | None = None  # as given, or the global batch / workers
    placement: contract.Placement | None = None

    @property
    def missing_inputs(self) -> str | None:
        """Inputs the job does not give that any plan rests on (the model assumes them from the profile).

        Its batch (how each step's work grows with the workers) and its
        epochs (the work itself): a plan on assumed values could shrink a
        job that needs every worker it has.
        """
        missing = []
        if self.batch_size is None:
            missing.append(f"{contract.BATCH_SIZE_PER_WORKER} (or {contract.BATCH_SIZE})")
        if self.epochs is None:
            missing.append(contract.EPOCHS)
        if not missing:
            return None
        return f"the plan assumes what the job does not say: add {' and '.join(missing)}"

    @property
    def enforce_blocker(self) -> str | None:
        """Why ``enforce`` may not resize: a shared cluster, Ray Train cannot follow the pods, or the plan rests on
        assumed inputs."""
        shared = self.resize_blocker if self.cluster else None
        return shared or self.training.blocker or self.missing_inputs

    accelerator: str | None = None  # canonical (``contract.canonical_accelerator``); None: the job does not say
    cluster: str | None = None  # the existing RayCluster it runs on (``clusterSelector``), whose groups these are
    autoscaling: str | None = None  # that cluster's autoscaler may change the size it is predicted at

    def advice_only(self) -> Features:
        """The job as the planner sizes it when its size is only advice: a shared cluster (``cluster``) is never
        resized, yet the size it would need for a deadline is worth saying."""
        return self.model_copy(update={"resize_blocker": None}) if self.cluster else self

    @property
    def pods(self) -> int:
        """Ray worker pods that run the training (what a replica count costs)."""
        return self.scale_group.workers if self.scale_group else 1

    def with_replicas(self, replicas: int) -> Features:
        """The same job with the scaled group at ``replicas`` and Ray Train resized with it."""
        if self.scale_group is None:
            raise UnpredictableJob("this RayJob has no worker group to resize")
        group = self.scale_group.model_copy(update={"replicas": replicas, "suspended": False})
        workers = self.training.at(group.workers)
        update: dict[str, Any] = {"scale_group": group, "workers": workers}
        if self.batch_held == "per-worker" and self.batch_size_per_worker is not None:
            update["batch_size"] = max(1, round(self.batch_size_per_worker * workers))
        return self.model_copy(update=update)

    @property
    def gpus_resizable(self) -> bool:
        """Whether the planner may change the scaled group's GPUs per worker (when the profile varied them).

        Not for a group it may not resize, a CPU-only one, one whose container
        sets several GPU resources (their sum is the count), nor where Ray
        Train's workers would not follow the pods' GPUs one to one: several
        workers sharing a pod, or a script that sizes itself from the cluster.
        """
        group, training = self.scale_group, self.training
        return (
            group is not None
            and not self.resize_blocker
            and group.gpus > 0
            and len(group.gpu_resources) == 1
            and training.source != "cluster"
            and (training.count is None or training.count <= training.pods)
        )

    def with_gpus(self, gpus: float) -> Features:
        """The same job with ``gpus`` per worker of the scaled group."""
        if self.scale_group is None:
            raise UnpredictableJob("this RayJob has no worker group to resize")
        group = self.scale_group.model_copy(update={"gpus": gpus})
        return self.model_copy(update={"scale_group": group, "gpus_per_worker": gpus})

    def replica_range(self) -> tuple[int, int]:
        """The replica counts the scaled group may take: ``[minReplicas, maxReplicas]``, leaving a Ray Train worker."""
        if self.scale_group is None:
            return (1, 1)
        group = self.scale_group
        low = max(1, group.min_replicas, -(-self.training.min_pods // group.num_of_hosts))
        return (low, max(low, group.max_replicas))


def features_from_rayjob(
    rayjob: Mapping[str, Any], inputs: contract.AdvisorInputs, existing: Mapping[str, Any] | None = None
) -> Features:
    """The features of a RayJob manifest (a dict as the API server returns it).

    ``inputs`` are its advisor annotations, parsed by ``contract.parse_inputs``;
    ``existing``: the RayCluster its ``clusterSelector`` names, if it has one.
    Raises ``UnpredictableJob`` when the manifest does not say what will run,
    ``AnnotationError`` when ``scale-group`` names no group.
    """
    on = training_pods(rayjob, inputs, existing)
    workers = on.training.at(on.pods)
    return Features(
        workload=inputs.workload,
        dataset_size=inputs.dataset_size,
        epochs=inputs.epochs,
        workers=workers,
        cpus_per_worker=on.cpus,
        gpus_per_worker=on.gpus,
        memory_bytes_per_worker=on.memory_bytes,
        scale_group=on.group,
        resize_blocker=on.resize_blocker,
        training=on.training,
        placement=inputs.placement or on.placement,
        **_batch(inputs, workers),
        accelerator=inputs.accelerator or on.accelerator,
        cluster=on.cluster,
        autoscaling=on.autoscaling,
    )


def _batch(inputs: contract.AdvisorInputs, workers: int) -> dict[str, Any]:
    """The global batch, the per-worker one and which of them a resize keeps (the batch rule of ``contract``)."""
    if inputs.batch_size_per_worker is not None:
        per_worker: int | float = inputs.batch_size_per_worker
        return {"batch_size": per_worker * workers, "batch_size_per_worker": per_worker}
    if inputs.batch_size is None:
        return {"batch_size": None}
    per_worker = inputs.batch_size / workers
    return {
        "batch_size": inputs.batch_size,
        "batch_size_per_worker": int(per_worker) if per_worker.is_integer() else round(per_worker, 3),
        "batch_held": inputs.batch_scaling,
    }
