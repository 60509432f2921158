"""RayJob manifest -> the features a runtime model predicts from.

The worker count follows KubeRay's own rule (``GetWorkerGroupDesiredReplicas``):
a suspended group has none; otherwise replicas are clamped into
``[minReplicas, maxReplicas]`` (``maxReplicas`` wins when ``min > max``) and
multiplied by ``numOfHosts``. Unset fields take the CRD's defaults.
Per-worker resources come from the Ray container (the first one, as KubeRay
assumes), requests first and limits where a request is missing, as
Kubernetes does.

``workers`` is the number of Ray Train workers, which a script sets apart
from the pods (Ray's docs require ``NUM_WORKERS <= replicas``). Where the
driver sees it, first match wins: ``runtimeEnvYAML`` ``env_vars`` (they
override the process environment), the env of the head's Ray container (the
driver runs on the head), the env of the submitter container (it reaches the
entrypoint only through the shell of ``ray job submit``), or an entrypoint
argument (``--num-workers 4`` or ``--num-workers=4``; the last one wins, as
in argparse). ``rayjob-advisor.io/workers-env`` / ``workers-arg`` name the
variable or flag; ``workers-from: cluster`` says the script sizes itself from
the cluster. Without any of these the count is unknown: predicted as one
worker per pod, never resized.

``batch_size`` is the global batch (summed over the Ray Train workers):
``batch-size`` as given, or ``batch-size-per-worker`` x workers. Resizing
(``with_replicas``) keeps the per-worker batch fixed, so the global batch
scales with the workers, unless the job said ``batch-scaling: global``
(the batch rule of ``contract``).

``placement`` is how the scheduler will lay the scaled group's pods on
nodes, where the RayJob says so: the ``placement`` annotation, else what
the group's pod template requires (``placement_hint``); None when nothing
does (the model then assumes packing and says so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import pydantic
import yaml
from kubernetes.utils import parse_quantity

from rayjob_advisor import contract

# CRD defaults of ray.io/v1 WorkerGroupSpec.
DEFAULT_MIN_REPLICAS = 0
DEFAULT_MAX_REPLICAS = 2_147_483_647
DEFAULT_REPLICAS = 0
DEFAULT_NUM_OF_HOSTS = 1

# Where scripts commonly take their Ray Train worker count (KubeRay's pytorch samples use NUM_WORKERS).
DEFAULT_WORKERS_ENV = ("NUM_WORKERS",)
DEFAULT_WORKERS_ARGS = ("--num-workers", "--num_workers", "--workers")

Place = Literal["runtimeEnvYAML", "head env", "submitter env", "entrypoint"]
# The pod templates whose Ray container's env may set the count, from ``spec``.
ENV_PLACES: dict[Place, tuple[str, ...]] = {
    "head env": ("rayClusterSpec", "headGroupSpec", "template", "spec", "containers"),
    "submitter env": ("submitterPodTemplate", "spec", "containers"),
}
NOT_FOUND = (
    f"the RayJob does not say how many Ray Train workers it runs: set {contract.WORKERS_ENV} (an env var of "
    f"runtimeEnvYAML, the head or the submitter) or {contract.WORKERS_ARG} (an entrypoint flag), "
    f"or {contract.WORKERS_FROM}: cluster when the script sizes itself from the cluster"
)


class UnpredictableJob(ValueError):
    """A RayJob whose runtime cannot be predicted from its manifest, and why."""


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


class TrainingCount(pydantic.BaseModel):
    """How a RayJob sets its Ray Train worker count, and how it goes with the scaled group's pods.

    The job's relation is kept when the pods change: spare pods stay spare
    (``count < pods``), else the workers per pod stay the same.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    source: Literal["env", "arg", "cluster", "unknown"] = "unknown"
    name: str | None = None  # the env var or flag
    place: Place | None = None
    count: int | None = None  # as the manifest sets it
    pods: int = 1  # of the scaled group, with ``count``
    span: tuple[int, int] | None = None  # of the count in the entrypoint, to rewrite just that
    problem: str | None = None

    @property
    def method(self) -> str:
        """``env:NAME``, ``arg:FLAG``, ``cluster`` or ``unknown``."""
        return f"{self.source}:{self.name}" if self.name else self.source

    @property
    def blocker(self) -> str | None:
        """Why ``enforce`` may not resize the pods: it could not resize Ray Train with them."""
        return self.problem or (NOT_FOUND if self.source == "unknown" else None)

    def at(self, pods: int) -> int:
        """Ray Train workers on ``pods`` pods."""
        if self.count is None:
            return pods
        if self.count < self.pods:
            return pods - (self.pods - self.count)
        return self.count * pods // self.pods

    @property
    def min_pods(self) -> int:
        """The fewest pods that leave one Ray Train worker."""
        return self.pods - self.count + 1 if self.count is not None and self.count < self.pods else 1


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
        """Why ``enforce`` may not resize: Ray Train cannot follow the pods, or the plan rests on assumed inputs."""
        return self.training.blocker or self.missing_inputs

    accelerator: str | None = None  # canonical (``contract.canonical_accelerator``); None: the job does not say

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


def features_from_rayjob(rayjob: Mapping[str, Any], inputs: contract.AdvisorInputs) -> Features:
    """Extract features from a RayJob manifest (a dict as the API server returns it).

    ``inputs`` are its advisor annotations, parsed by ``contract.parse_inputs``.
    Raises ``UnpredictableJob`` when the manifest does not say what will run,
    ``contract.AnnotationError`` when ``scale-group`` names no group.
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
    groups = tuple(_worker_group(group, index) for index, group in enumerate(cluster.get("workerGroupSpecs") or []))
    if not groups:
        return _head_only(spec, inputs)
    scale_group = _scale_group(groups, inputs.scale_group)
    if scale_group.workers == 0:
        reason = "is suspended" if scale_group.suspended else "has 0 replicas"
        raise UnpredictableJob(f"worker group {scale_group.name!r} {reason}: no worker to run the training on")
    blocker = None
    if cluster.get("enableInTreeAutoscaling"):
        blocker = "enableInTreeAutoscaling: the Ray autoscaler owns the replicas of every worker group"
    training = training_count(spec, inputs, scale_group.workers)
    workers = training.at(scale_group.workers)
    return Features(
        workload=inputs.workload,
        dataset_size=inputs.dataset_size,
        epochs=inputs.epochs,
        workers=workers,
        cpus_per_worker=scale_group.cpus,
        gpus_per_worker=scale_group.gpus,
        memory_bytes_per_worker=scale_group.memory_bytes,
        scale_group=scale_group,
        resize_blocker=blocker,
        training=training,
        placement=inputs.placement or scale_group.placement,
        **_batch(inputs, workers),
        accelerator=inputs.accelerator or scale_group.accelerator,
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


def _head_only(spec: Mapping[str, Any], inputs: contract.AdvisorInputs) -> Features:
    """A cluster without worker groups trains on its head pod: nothing to resize."""
    head = spec["rayClusterSpec"].get("headGroupSpec") or {}
    resources = _container_resources(head, "headGroupSpec")
    training = training_count(spec, inputs, 1)
    workers = training.at(1)
    return Features(
        workload=inputs.workload,
        dataset_size=inputs.dataset_size,
        epochs=inputs.epochs,
        workers=workers,
        cpus_per_worker=resources["cpus"],
        gpus_per_worker=resources["gpus"],
        memory_bytes_per_worker=resources["memory_bytes"],
        scale_group=None,
        resize_blocker="the cluster has no worker groups: the job runs on the head pod alone",
        training=training,
        placement=inputs.placement,
        **_batch(inputs, workers),
        accelerator=inputs.accelerator or pod_accelerator(head.get("template")),
    )


class _Setting(pydantic.BaseModel):
    """One place in the manifest that sets the count."""

    model_config = pydantic.ConfigDict(frozen=True)

    source: Literal["env", "arg"]
    name: str
    place: Place
    value: Any
    span: tuple[int, int] | None = None


def training_count(spec: Mapping[str, Any], inputs: contract.AdvisorInputs, pods: int) -> TrainingCount:
    """Where and how the RayJob ``spec`` sets its Ray Train worker count (see the module docstring).

    Raises ``UnpredictableJob`` for a malformed ``runtimeEnvYAML`` (KubeRay
    could not submit the job either), ``contract.AnnotationError`` when the
    variable or flag the job names is nowhere.
    """
    env_vars = runtime_env(spec).get("env_vars") or {}
    if inputs.workers_from == "cluster":
        return TrainingCount(source="cluster", pods=pods)
    names: tuple[str, ...]
    flags: tuple[str, ...]
    if declared := inputs.workers_env or inputs.workers_arg:
        names, flags = ((declared,), ()) if inputs.workers_env else ((), (declared,))
    else:
        names, flags = DEFAULT_WORKERS_ENV, DEFAULT_WORKERS_ARGS
    found = _env_settings(spec, env_vars, names) + _argument_settings(str(spec.get("entrypoint") or ""), flags)
    if not found and declared:
        key = contract.WORKERS_ENV if names else contract.WORKERS_ARG
        where = "runtimeEnvYAML or the head's or submitter's env" if names else "the entrypoint"
        raise contract.AnnotationError(f"{key}={declared!r}: not set in {where}")
    if not found:
        return TrainingCount(pods=pods)
    if len({setting.source for setting in found}) > 1:
        both = " and ".join(f"{setting.name} in {setting.place}" for setting in (found[0], found[-1]))
        keys = f"{contract.WORKERS_ENV} or {contract.WORKERS_ARG}"
        return TrainingCount(pods=pods, problem=f"the RayJob sets {both}: set {keys} to the one it reads")
    setting = found[0]
    count, problem = _count(setting, pods)
    return TrainingCount(
        source=setting.source, name=setting.name, place=setting.place, count=count, pods=pods, span=setting.span,
        problem=problem,
    )  # fmt: skip


def _count(setting: _Setting, pods: int) -> tuple[int | None, str | None]:
    """The count a setting gives, or why it cannot be resized with the pods."""
    if setting.value is None:
        return None, f"{setting.name} in {setting.place} is not a literal value (valueFrom): it cannot be rewritten"
    what = f"{setting.name}={setting.value!r} in {setting.place}"
    text = str(setting.value).strip() if isinstance(setting.value, str | int) else ""
    if not text.isdigit() or int(text) < 1:
        return None, f"{what} is not a positive whole number that can be rewritten"
    count = int(text)
    if count > pods and count % pods:
        return count, f"{what} on {pods} pods is neither at most one worker per pod nor the same number on each"
    return count, None


def runtime_env(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec.runtimeEnvYAML`` parsed (empty when unset); malformed YAML is the user's error to fix."""
    text = spec.get("runtimeEnvYAML")
    try:
        value = yaml.safe_load(text) if text else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise UnpredictableJob(f"spec.runtimeEnvYAML is not valid YAML{where}: {problem}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise UnpredictableJob(f"spec.runtimeEnvYAML must be a mapping (pip, env_vars, ...), not a {kind}")
    if not isinstance(value.get("env_vars") or {}, dict):
        raise UnpredictableJob("spec.runtimeEnvYAML env_vars must be a mapping of names to values")
    return value


def pod_containers(spec: Mapping[str, Any], place: Place) -> list[dict[str, Any]]:
    """The containers of a pod template in ``ENV_PLACES`` (the first is Ray's); empty when it has none."""
    return list(nested(spec, *ENV_PLACES[place]) or [])


def _env_settings(spec: Mapping[str, Any], env_vars: Mapping[str, Any], names: tuple[str, ...]) -> list[_Setting]:
    """Each env place that sets one of ``names`` (the first name it has), the driver's first."""
    envs: dict[Place, Mapping[str, Any]] = {"runtimeEnvYAML": env_vars}
    for place in ENV_PLACES:  # the last entry of a name wins, as in Kubernetes
        ray_container = (pod_containers(spec, place) or [{}])[0]
        envs[place] = {entry["name"]: entry.get("value") for entry in ray_container.get("env") or []}
    found = []
    for place, env in envs.items():
        name = next((name for name in names if name in env), None)
        if name is not None:
            found.append(_Setting(source="env", name=name, place=place, value=env[name]))
    return found


# FLAG VALUE or FLAG=VALUE, the value optionally quoted, as whole tokens.
_ARGUMENT = r"(?<!\S){flag}(?:=|\s+)(['\"]?)(?P<value>[^\s'\"]*)\1(?!\S)"


def _argument_settings(entrypoint: str, flags: tuple[str, ...]) -> list[_Setting]:
    """The last value of the first flag the entrypoint has (the last wins, as in argparse)."""
    for flag in flags:
        matches = list(re.finditer(_ARGUMENT.format(flag=re.escape(flag)), entrypoint))
        if matches:
            last = matches[-1]
            return [_Setting(source="arg", name=flag, place="entrypoint", value=last["value"], span=last.span("value"))]
    return []


def _scale_group(groups: tuple[WorkerGroup, ...], requested: str | None) -> WorkerGroup:
    """The group named by ``scale-group``; by default the GPU group, else the largest."""
    if requested is not None:
        for group in groups:
            if group.name == requested:
                return group
        names = ", ".join(repr(g.name) for g in groups)
        raise contract.AnnotationError(
            f"{contract.SCALE_GROUP}={requested!r}: no worker group of that name (groups: {names})"
        )
    gpu_groups = [g for g in groups if g.gpus > 0]
    candidates = gpu_groups or list(groups)
    return max(candidates, key=lambda g: g.workers)  # max() keeps the first of equals


def _worker_group(spec: Mapping[str, Any], index: int) -> WorkerGroup:
    where = f"workerGroupSpecs[{index}]"
    name = spec.get("groupName") or where
    min_replicas = _integer(spec, "minReplicas", DEFAULT_MIN_REPLICAS, where)
    max_replicas = _integer(spec, "maxReplicas", DEFAULT_MAX_REPLICAS, where)
    replicas = _integer(spec, "replicas", DEFAULT_REPLICAS, where)
    replicas = max_replicas if min_replicas > max_replicas else min(max(replicas, min_replicas), max_replicas)
    resources = _container_resources(spec, where)
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


HOSTNAME = "kubernetes.io/hostname"


def placement_hint(template: Mapping[str, Any], group: str) -> contract.Placement | None:
    """How a worker group's pod template makes the scheduler lay its pods on nodes, if it says.

    Only hard rules on ``kubernetes.io/hostname`` that select the group's own
    pods count: a required pod anti-affinity puts one on each node
    (``one-per-node``), a topology spread with ``maxSkew: 1`` spreads them
    (``spread``), a required pod affinity packs them (``packed``). Preferred
    (soft) terms, other topology keys and selectors of other pods say nothing
    about this group.
    """
    pod = template.get("spec") or {}
    labels = {**((template.get("metadata") or {}).get("labels") or {}), **kuberay_worker_labels(group)}
    affinity = pod.get("affinity") or {}

    def required(kind: str) -> bool:
        terms = (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        return any(term.get("topologyKey") == HOSTNAME and selects(term.get("labelSelector"), labels) for term in terms)

    if required("podAntiAffinity"):
        return "one-per-node"
    for constraint in pod.get("topologySpreadConstraints") or []:
        if (
            constraint.get("topologyKey") == HOSTNAME
            and constraint.get("maxSkew") == 1
            and selects(constraint.get("labelSelector"), labels)
        ):
            return "spread"
    return "packed" if required("podAffinity") else None


def kuberay_worker_labels(group: str) -> dict[str, str]:
    """The labels KubeRay gives every pod of a worker group, whatever the cluster's (generated) name."""
    return {"ray.io/group": group, "ray.io/node-type": "worker", "ray.io/is-ray-node": "yes"}


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a Kubernetes label selector selects pods with ``labels`` (a missing selector selects none)."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for requirement in selector.get("matchExpressions") or []:
        key, operator, values = requirement.get("key"), requirement.get("operator"), requirement.get("values") or []
        present = key in labels
        matched = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(operator, False)
        if not matched:
            return False
    return True


# Node labels that name the GPU (or TPU) model of a node, as their labellers document them; the first a pod
# template selects wins. Instance types (node.kubernetes.io/instance-type) are left out: no guessing from them.
ACCELERATOR_LABELS: tuple[str, ...] = (
    "nvidia.com/gpu.product",  # NVIDIA GPU feature discovery (GPU operator): NVIDIA-A100-SXM4-80GB
    "cloud.google.com/gke-accelerator",  # GKE: nvidia-tesla-t4, nvidia-a100-80gb
    "karpenter.k8s.aws/instance-gpu-name",  # Karpenter on AWS: t4, a100
    "eks.amazonaws.com/instance-gpu-name",  # EKS Auto Mode: t4, a100
    "amd.com/gpu.product-name",  # AMD GPU node labeller: AMD_Instinct_MI300X_OAM
    "beta.amd.com/gpu.product-name",
    "gpu.intel.com/product",  # Intel GPU plugin's NFD rules: Max_1550
    "cloud.google.com/gke-tpu-accelerator",  # GKE: tpu-v6e-slice
)


def pod_accelerator(template: Any) -> str | None:
    """The accelerator a pod template's nodes have, canonical; None when its scheduling leaves it open.

    A ``nodeSelector`` on one of ``ACCELERATOR_LABELS`` says it; else the
    required node affinity does when every one of its terms (they are ORed)
    holds that label ``In`` values of one accelerator (``NVIDIA-A100-SXM4-40GB``
    and ``-80GB`` are both ``a100``).
    """
    spec = nested(template, "spec")
    if not isinstance(spec, Mapping):
        return None
    selector = spec.get("nodeSelector")
    for label in ACCELERATOR_LABELS:
        if isinstance(selector, Mapping) and isinstance(selector.get(label), str) and selector[label].strip():
            return contract.canonical_accelerator(selector[label])
    terms = nested(
        spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"
    )
    named = [_term_accelerators(term) for term in terms] if isinstance(terms, list) and terms else [set()]
    found = set.union(*named)
    return found.pop() if len(found) == 1 and all(named) else None


def _term_accelerators(term: Any) -> set[str]:
    """The accelerators one node selector term allows, by the first accelerator label it holds ``In``."""
    expressions = nested(term, "matchExpressions")
    held = {
        expression.get("key"): expression["values"]
        for expression in (expressions if isinstance(expressions, list) else [])
        if isinstance(expression, Mapping)
        and expression.get("operator") == "In"
        and isinstance(expression.get("values"), list)
    }
    values: list[Any] = next((held[label] for label in ACCELERATOR_LABELS if label in held), [])
    return {contract.canonical_accelerator(value) for value in values if isinstance(value, str) and value.strip()}


def nested(value: Any, *keys: str) -> Any:
    """The value at ``keys`` in nested mappings; None where one is missing or not a mapping (user YAML, or a
    manifest at admission, before the schema has checked it)."""
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _integer(spec: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = spec.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnpredictableJob(f"{where}.{key}={value!r}: must be a non-negative integer")
    return value


def _container_resources(group: Mapping[str, Any], where: str) -> dict[str, Any]:
    """CPUs, GPUs (any resource key ending in ``gpu``), memory and other accelerators."""
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
