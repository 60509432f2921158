"""Wrong-typed RayJobs: a value of another JSON kind at every field the advisor reads, as an author may send them.

The fields read are those of the adapter's typed view (``rayjob_advisor.kuberay.spec``) that a rich RayJob
(``rich_rayjob``: head and submitter env, scheduling rules, runtime env, every group field) sets; each case
puts a list, an object, a string, a number, a boolean or a list holding null where that field's kind is
another, so that the advisor must answer with that field's path.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Iterator
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.kuberay import spec
from rayjob_advisor_testkit.profiles import profiled_rayjob
from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob, env

WRONG: tuple[Any, ...] = ([], {}, "text", 7, True, [None])


def rich_rayjob() -> dict[str, Any]:
    """The operator tests' RayJob with every field the advisor reads set, valid against KubeRay's CRD."""
    body = profiled_rayjob("rich", **{contract.DEADLINE: "2h", contract.WORKERS_ENV: "NUM_WORKERS"})
    spec_ = body["spec"]
    spec_["runtimeEnvYAML"] = "env_vars:\n  OTHER: '1'\n"
    spec_["submitterPodTemplate"] = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "submitter", "image": "rayproject/ray:2.52.0", "env": env(OTHER="1")}]}}  # fmt: skip
    head = spec_["rayClusterSpec"]["headGroupSpec"]
    head["template"]["spec"]["containers"][0]["env"] = env(NUM_WORKERS="4")
    head["template"]["metadata"] = {"labels": {"team": "a"}, "annotations": {"note": "x"}}
    group = spec_["rayClusterSpec"]["workerGroupSpecs"][0]
    group.update(numOfHosts=1, suspend=False, rayStartParams={"num-cpus": "2"})
    selector = {"matchLabels": {"ray.io/group": "workers"},
                "matchExpressions": [{"key": "ray.io/node-type", "operator": "In", "values": ["worker"]}]}  # fmt: skip
    group["template"]["metadata"] = {"labels": {"team": "a"}}
    group["template"]["spec"].update(
        nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
        affinity={
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}]},
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["Tesla-T4"]}]}]}},
        },
        topologySpreadConstraints=[{"topologyKey": "kubernetes.io/hostname", "maxSkew": 1, "whenUnsatisfiable":
                                    "DoNotSchedule", "labelSelector": selector}],
    )  # fmt: skip
    group["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": 2, "memory": "4Gi"}
    spec_.update(activeDeadlineSeconds=7200, preRunningDeadlineSeconds=600)
    assert_valid_rayjob(body)
    return body


def wrong_typed(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(the dotted path of the wrong field, as pydantic names it; the RayJob with it) for every case."""
    for path, value in _read_fields(body, spec.RayJobView, ()):
        quantity = len(path) > 2 and path[-2] in ("limits", "requests")
        kinds = {"string", "number"} if quantity else {_kind(value)}
        for wrong in WRONG:
            if wrong == [None]:
                if isinstance(value, list):
                    yield ".".join(map(str, (*path, 0))), _with(body, path, wrong)
            elif _kind(wrong) not in kinds:
                yield ".".join(map(str, path)), _with(body, path, wrong)


def _kind(value: Any) -> str:
    """A value's JSON kind."""
    kinds = ((bool, "boolean"), (int | float, "number"), (str, "string"), (list, "array"), (dict, "object"))
    return next((kind for python, kind in kinds if isinstance(value, python)), "null")


def _read_fields(value: Any, annotation: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) of ``value`` that the typed view's ``annotation`` declares, outermost first."""
    annotation = _unwrapped(annotation)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel) and isinstance(value, dict):
        for key, item in value.items():
            field = annotation.model_fields.get(key)
            if field is not None:
                yield (*path, key), item
                yield from _read_fields(item, field.annotation, (*path, key))
    elif typing.get_origin(annotation) is list and isinstance(value, list):
        (inner,) = typing.get_args(annotation)
        for index, item in enumerate(value):
            if isinstance(item, dict | list):
                yield from _read_fields(item, inner, (*path, index))
    elif typing.get_origin(annotation) is dict and isinstance(value, dict):
        inner = typing.get_args(annotation)[1]
        for key, item in value.items():
            yield (*path, key), item
            yield from _read_fields(item, inner, (*path, key))


def _unwrapped(annotation: Any) -> Any:
    """``X`` of ``X | None``."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        return members[0] if len(members) == 1 else annotation
    return annotation


def _with(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of ``body`` with ``value`` at ``path``."""
    case = copy.deepcopy(body)
    at: Any = case
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = copy.deepcopy(value)
    return case
