"""The resources an emulator serves: what discovery announces of each and how its objects are admitted; the core
resources every kopf operator needs, and kopf's peerings."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import kopf

Validator = Callable[[dict[str, Any]], object]
"""Checks a complete object about to be stored; raises (any exception) to reject it with 422."""

ALL_VERBS = frozenset({"create", "delete", "get", "list", "patch", "update", "watch"})


@dataclasses.dataclass(frozen=True)
class ResourceSpec:
    """One served resource: what discovery announces and how objects are admitted."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    verbs: frozenset[str] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    schema: dict[str, Any] | None = None  # openAPIV3Schema: pruning and defaulting, as the apiserver does
    validate: Validator | None = None
    # A review (TokenReview, SubjectAccessReview): a create is answered with the object and the status this
    # computes from it (it may raise ApiError), and nothing is stored.
    review: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How the apiserver names the resource in messages: ``rayjobs.ray.io``, ``namespaces``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_generation(self) -> bool:
        """Custom resources (and CRDs) carry metadata.generation; core namespaces and events do not."""
        return self.group != ""

    def kopf_resource(self) -> kopf.Resource:
        return kopf.Resource(
            self.group,
            self.version,
            self.plural,
            kind=self.kind,
            singular=self.kind.lower(),
            shortcuts=frozenset(self.short_names),
            categories=frozenset(self.categories),
            namespaced=self.namespaced,
            verbs=self.verbs,
            subresources=frozenset({"status"} if self.status_subresource else ()),
        )


PEERING_RESOURCES = (
    ResourceSpec("kopf.dev", "v1", "clusterkopfpeerings", "ClusterKopfPeering", namespaced=False),
    ResourceSpec("kopf.dev", "v1", "kopfpeerings", "KopfPeering", namespaced=True),
)
"""kopf's peering CRDs (no status subresource, no schema: kopf keeps its peers in ``status``)."""

KUBE_RESOURCES = (
    ResourceSpec("", "v1", "events", "Event", namespaced=True, short_names=("ev",)),
    # Without namespaces and CRDs in discovery, kopf's observers wait forever, silently.
    ResourceSpec(
        "", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",), verbs=ALL_VERBS - {"delete"}
    ),
    ResourceSpec(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        verbs=frozenset({"get", "list", "watch"}),
    ),
)
"""The core resources any kopf operator needs; the store needs namespaces (it creates default and kube-system)."""
