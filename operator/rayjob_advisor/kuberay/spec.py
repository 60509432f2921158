"""The parts of a RayJob (and of a RayCluster) the advisor reads, checked by type before any advice.

At admission a RayJob has not met its CRD's schema yet (validation comes
after mutation), and any RayJob author can send a ``rayClusterSpec`` that is
a list or a ``groupName`` that is a number. ``check`` reads the manifest
into this frozen, strict view first — tolerant of every field it does not
read (``extra="allow"``), exact about the types of those it does — so that a
wrong type is the user's one-line error naming its field path
(``spec.rayClusterSpec.workerGroupSpecs.0.groupName: Input should be a
valid string``), never a traceback deeper in. The adapter's readers
(``groups``, ``cluster``, ``training``, ``scheduling``) then only meet the
types this view allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.errors import UnpredictableJob

_CONFIG = pydantic.ConfigDict(frozen=True, strict=True, extra="allow")
MAX_LISTED = 3  # wrong fields named in one message


class _View(pydantic.BaseModel):
    model_config = _CONFIG


def _quantity(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("a Kubernetes quantity is a string or a number")
    return value


Strings = dict[str, str]
Quantity = Annotated[Any, pydantic.BeforeValidator(_quantity)]


class Requirement(_View):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class LabelSelector(_View):
    matchLabels: Strings | None = None
    matchExpressions: list[Requirement] | None = None


class PodAffinityTerm(_View):
    topologyKey: str | None = None
    labelSelector: LabelSelector | None = None


class PodAffinity(_View):
    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm] | None = None


class NodeSelectorTerm(_View):
    matchExpressions: list[Requirement] | None = None


class NodeSelector(_View):
    nodeSelectorTerms: list[NodeSelectorTerm] | None = None


class NodeAffinity(_View):
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector | None = None


class Affinity(_View):
    nodeAffinity: NodeAffinity | None = None
    podAffinity: PodAffinity | None = None
    podAntiAffinity: PodAffinity | None = None


class TopologySpread(_View):
    topologyKey: str | None = None
    maxSkew: int | None = None
    labelSelector: LabelSelector | None = None


class EnvVar(_View):
    name: str
    value: str | None = None


class Resources(_View):
    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None


class Container(_View):
    name: str | None = None
    env: list[EnvVar] | None = None
    resources: Resources | None = None
    volumeMounts: list[dict[str, Any]] | None = None


class PodSpec(_View):
    containers: list[Container] | None = None
    volumes: list[dict[str, Any]] | None = None
    nodeSelector: Strings | None = None
    affinity: Affinity | None = None
    topologySpreadConstraints: list[TopologySpread] | None = None


class TemplateMetadata(_View):
    labels: Strings | None = None
    annotations: Strings | None = None


class PodTemplate(_View):
    metadata: TemplateMetadata | None = None
    spec: PodSpec | None = None


class HeadGroup(_View):
    rayStartParams: Strings | None = None
    template: PodTemplate | None = None


class WorkerGroup(_View):
    groupName: str | None = None
    replicas: int | None = pydantic.Field(default=None, ge=0)
    minReplicas: int | None = pydantic.Field(default=None, ge=0)
    maxReplicas: int | None = pydantic.Field(default=None, ge=0)
    numOfHosts: int | None = pydantic.Field(default=None, ge=0)
    suspend: bool | None = None
    rayStartParams: Strings | None = None
    template: PodTemplate | None = None


class ClusterSpec(_View):
    """A RayJob's ``rayClusterSpec``, and a RayCluster's ``spec``."""

    enableInTreeAutoscaling: bool | None = None
    headGroupSpec: HeadGroup | None = None
    workerGroupSpecs: list[WorkerGroup] | None = None


class JobSpec(_View):
    entrypoint: str | None = None
    runtimeEnvYAML: str | None = None
    clusterSelector: Strings | None = None
    suspend: bool | None = None
    rayClusterSpec: ClusterSpec | None = None
    submitterPodTemplate: PodTemplate | None = None
    activeDeadlineSeconds: int | None = None
    preRunningDeadlineSeconds: int | None = None


class Metadata(_View):
    name: str | None = None
    namespace: str | None = None
    labels: Strings | None = None
    annotations: Strings | None = None
    creationTimestamp: str | None = None


class RayJobInfo(_View):
    startTime: str | None = None
    endTime: str | None = None


class JobStatus(_View):
    jobDeploymentStatus: str | None = None
    jobStatus: str | None = None
    startTime: str | None = None
    failed: int | None = None
    rayJobInfo: RayJobInfo | None = None


class RayJobView(_View):
    """The RayJob fields the advisor reads, each of the type the KubeRay CRD gives it."""

    metadata: Metadata | None = None
    spec: JobSpec | None = None
    status: JobStatus | None = None


class RayClusterView(_View):
    """The RayCluster fields the advisor reads (a ``clusterSelector`` job's cluster)."""

    metadata: Metadata | None = None
    spec: ClusterSpec | None = None


def check(body: Mapping[str, Any]) -> RayJobView:
    """The RayJob read by type; ``UnpredictableJob`` naming each wrong field's path (pydantic's text)."""
    return _read(RayJobView, body, "")


def check_cluster(body: Mapping[str, Any], what: str) -> RayClusterView:
    """A RayCluster read by type; ``UnpredictableJob`` naming ``what`` and each wrong field's path."""
    return _read(RayClusterView, body, f"{what}: ")


V = TypeVar("V", bound=_View)


def _read(view: type[V], body: Mapping[str, Any], prefix: str) -> V:
    try:
        return view.model_validate(dict(body))
    except pydantic.ValidationError as exc:
        text = prefix + contract.validation_problems(exc, "the object", MAX_LISTED)
        raise UnpredictableJob(text.encode("utf-8", "backslashreplace").decode()) from None  # odd keys, one line
