"""Runtime estimates that other schedulers read, written before KubeRay builds the cluster (opt-in).

- ``kueue``: ``provreq.kueue.x-k8s.io/maxRunDurationSeconds`` on the RayJob. Kueue passes a job's
  ``provreq.kueue.x-k8s.io/*`` annotations on as parameters of the ProvisioningRequest it makes for it
  (queued GPU provisioning books nodes for that long; its default is seven days).
- ``karpenter``: ``karpenter.sh/do-not-disrupt`` on every pod template of the cluster, with a duration
  counted from the pod's start (Karpenter's accepted value besides ``"true"``), so consolidation
  and drift leave the nodes alone while the job is expected to run, and no longer.

Both carry the job's expected walltime: predicted start-up plus the upper bound of its execution at
its confidence (raise ``confidence`` for more margin). A value the user set is never replaced.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from typing import Any

from rayjob_advisor import contract
from rayjob_advisor.rayjob import MergePatch

HOOKS = ("kueue", "karpenter")


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


def patch(rayjob: Mapping[str, Any], hooks: frozenset[str], walltime_seconds: float) -> MergePatch:
    """The merge patch writing ``hooks`` for a job expected to take ``walltime_seconds`` (empty if none apply).

    ``rayjob`` is the job as it will be once the advice is applied (a resize replaces the worker group
    list, which this patch must carry whole as well).
    """
    seconds = max(1, math.ceil(walltime_seconds))
    result: MergePatch = {}
    annotations = (rayjob.get("metadata") or {}).get("annotations") or {}
    if "kueue" in hooks and not annotations.get(contract.KUEUE_MAX_RUN_DURATION):
        result["metadata"] = {"annotations": {contract.KUEUE_MAX_RUN_DURATION: str(seconds)}}
    cluster = (rayjob.get("spec") or {}).get("rayClusterSpec")
    if "karpenter" in hooks and isinstance(cluster, Mapping):
        duration = contract.format_duration(seconds)
        head = cluster.get("headGroupSpec")
        spec: dict[str, Any] = {}
        if isinstance(head, Mapping) and _unset(head):
            spec["headGroupSpec"] = {
                "template": {"metadata": {"annotations": {contract.KARPENTER_DO_NOT_DISRUPT: duration}}}
            }
        groups = cluster.get("workerGroupSpecs")
        if isinstance(groups, list) and any(_unset(group) for group in groups):
            groups = copy.deepcopy(groups)
            for group in groups:
                if _unset(group):
                    metadata = group["template"].setdefault("metadata", {})
                    metadata.setdefault("annotations", {})[contract.KARPENTER_DO_NOT_DISRUPT] = duration
            spec["workerGroupSpecs"] = groups
        if spec:
            result["spec"] = {"rayClusterSpec": spec}
    return result


def _unset(group: object) -> bool:
    """Whether a group has a pod template without a do-not-disrupt of its own (admission sees any spec)."""
    template = group.get("template") if isinstance(group, Mapping) else None
    if not isinstance(template, Mapping):
        return False
    metadata = template.get("metadata") or {}
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return not isinstance(annotations, Mapping) or contract.KARPENTER_DO_NOT_DISRUPT not in annotations
