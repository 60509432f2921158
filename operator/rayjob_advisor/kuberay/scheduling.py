"""What a pod template tells the scheduler: how a worker group's pods land on nodes, and which accelerator they get.

``placement_hint``: only hard rules on ``kubernetes.io/hostname`` that select
the group's own pods count. ``pod_accelerator``: only node labels that name
the accelerator model, as their labellers document them (``ACCELERATOR_LABELS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayjob_advisor import contract
from rayjob_advisor.kuberay.manifest import nested

HOSTNAME = "kubernetes.io/hostname"


def placement_hint(template: Mapping[str, Any], group: str) -> contract.Placement | None:
    """How a worker group's pod template makes the scheduler lay its pods on nodes, if it says.

    A required pod anti-affinity puts one on each node (``one-per-node``), a
    topology spread with ``maxSkew: 1`` spreads them (``spread``), a required
    pod affinity packs them (``packed``). Preferred (soft) terms, other
    topology keys and selectors of other pods say nothing about this group.
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
