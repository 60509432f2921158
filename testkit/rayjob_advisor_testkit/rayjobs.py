"""RayJob builders and checks against the real KubeRay CRD, and the KubeRay samples (both vendored: testkit/kuberay)."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from rayjob_advisor_testkit import schemas
from rayjob_advisor_testkit.paths import KUBERAY_CRDS, SAMPLES

RAYJOB_SCHEMA = schemas.crd_schema(KUBERAY_CRDS / "ray.io_rayjobs.yaml", "v1")
rayjob_violations = schemas.schema_checker(RAYJOB_SCHEMA)
"""Every schema violation of a RayJob (after defaulting) against the real KubeRay CRD, as "path: message"."""


def assert_valid_rayjob(rayjob: dict[str, Any]) -> None:
    """Fail with every schema violation of a RayJob (after defaulting) against the real KubeRay CRD."""
    errors = rayjob_violations(rayjob)
    assert not errors, "\n".join(errors)


def sample_rayjobs() -> list[tuple[str, dict[str, Any]]]:
    """Every RayJob document of the KubeRay samples, by file name."""
    found = []
    for path in sorted(SAMPLES.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "RayJob":
                found.append((str(path.relative_to(SAMPLES)), document))
    return found


def make_rayjob(
    *,
    annotations: dict[str, str] | None = None,
    groups: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A minimal valid RayJob with the given worker groups; validated before it is returned."""
    worker = {
        "groupName": "workers",
        "replicas": 2,
        "minReplicas": 1,
        "maxReplicas": 8,
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.52.0",
                        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                    }
                ]
            }
        },
    }
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job", "namespace": "default", "annotations": dict(annotations or {})},
        "spec": {
            "entrypoint": "python train.py",
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}},
                },
                "workerGroupSpecs": groups if groups is not None else [worker],
            },
            **spec,
        },
    }
    assert_valid_rayjob(rayjob)
    return rayjob


def worker_group(name: str = "workers", resources: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The default worker group of ``make_rayjob``, renamed, with other resources or fields."""
    group: dict[str, Any] = copy.deepcopy(make_rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"][0])
    group["groupName"] = name
    if resources is not None:
        group["template"]["spec"]["containers"][0]["resources"] = resources
    group.update(fields)
    return group


def counted(
    notes: dict[str, str] | None = None,
    runtime_env: str | None = None,
    head_env: list[dict[str, str]] | None = None,
    submitter_env: list[dict[str, str]] | None = None,
    entrypoint: str = "python train.py",
    **group: int,
) -> dict[str, Any]:
    """A RayJob that sets its worker count in the given places (2 replicas unless ``group`` says otherwise)."""
    spec: dict[str, Any] = {"entrypoint": entrypoint}
    if runtime_env is not None:
        spec["runtimeEnvYAML"] = runtime_env
    if submitter_env is not None:
        container = {"name": "submitter", "image": "rayproject/ray:2.52.0", "env": submitter_env}
        spec["submitterPodTemplate"] = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    fields: dict[str, Any] = {"replicas": 2, **group}
    rayjob = make_rayjob(annotations=notes, groups=[worker_group(**fields)], **spec)
    if head_env is not None:
        rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = head_env
    return rayjob


def env(**values: str) -> list[dict[str, str]]:
    """A container's ``env`` list."""
    return [{"name": name, "value": value} for name, value in values.items()]
