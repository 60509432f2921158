"""The Ray Train worker count of a RayJob: where its manifest sets it, and the rewrite that changes it.

A script sets its Ray Train workers apart from the pods (Ray's docs require
``NUM_WORKERS <= replicas``). Where the driver sees it, first match wins:
``runtimeEnvYAML`` ``env_vars`` (they override the process environment), the
env of the head's Ray container (the driver runs on the head), the env of
the submitter container (it reaches the entrypoint only through the shell of
``ray job submit``), or an entrypoint argument (``--num-workers 4`` or
``--num-workers=4``; the last one wins, as in argparse).
``rayjob-advisor.io/workers-env`` / ``workers-arg`` name the variable or
flag; ``workers-from: cluster`` says the script sizes itself from the
cluster. Without any of these the count is unknown: predicted as one worker
per pod, never resized.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Literal

import pydantic
import yaml

from rayjob_advisor import contract
from rayjob_advisor.errors import AnnotationError, UnpredictableJob
from rayjob_advisor.kuberay.manifest import MergePatch, nested

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
    could not submit the job either), ``AnnotationError`` when the
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
        raise AnnotationError(f"{key}={declared!r}: not set in {where}")
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


def _pod_containers(spec: Mapping[str, Any], place: Place) -> list[dict[str, Any]]:
    """The containers of a pod template in ``ENV_PLACES`` (the first is Ray's); empty when it has none."""
    return list(nested(spec, *ENV_PLACES[place]) or [])


def _env_settings(spec: Mapping[str, Any], env_vars: Mapping[str, Any], names: tuple[str, ...]) -> list[_Setting]:
    """Each env place that sets one of ``names`` (the first name it has), the driver's first."""
    envs: dict[Place, Mapping[str, Any]] = {"runtimeEnvYAML": env_vars}
    for place in ENV_PLACES:  # the last entry of a name wins, as in Kubernetes
        ray_container = (_pod_containers(spec, place) or [{}])[0]
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


def rewrite(spec: Mapping[str, Any], training: TrainingCount, count: int) -> MergePatch:
    """The merge patch setting the Ray Train worker count of a RayJob ``spec`` to ``count`` where ``training``
    found it.

    Nothing else changes: the runtime environment is re-serialised with
    only that value changed, a container's env keeps every other entry,
    the entrypoint only that token. Empty when the job sets no count.
    """
    if training.place is None or training.name is None:
        return {}
    if training.place == "entrypoint":
        assert training.span is not None  # found in the entrypoint, so its position is known
        start, end = training.span
        entrypoint = str(spec["entrypoint"])
        return {"spec": {"entrypoint": entrypoint[:start] + str(count) + entrypoint[end:]}}
    if training.place == "runtimeEnvYAML":
        environment = runtime_env(spec)
        env_vars = environment["env_vars"]
        env_vars[training.name] = str(count) if isinstance(env_vars[training.name], str) else count
        return {"spec": {"runtimeEnvYAML": yaml.safe_dump(environment, sort_keys=False)}}
    containers = copy.deepcopy(_pod_containers(spec, training.place))
    containers[0]["env"] = [
        {**entry, "value": str(count)} if entry.get("name") == training.name else entry
        for entry in containers[0]["env"]
    ]
    patch: Any = containers
    for key in reversed(("spec", *ENV_PLACES[training.place])):
        patch = {key: patch}
    return dict(patch)
