"""The RuntimeProfile object (``rayjob-advisor.io/v1alpha1``) <-> runs: its observations, manifest and conditions."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.errors import BadProfile
from rayjob_advisor.observations import Observation

API_VERSION = f"{contract.API_GROUP}/v1alpha1"
KIND = "RuntimeProfile"
MAX_SEED_RUNS = 16384
"""The most runs ``spec.observations`` holds (the CRD's ``maxItems``): a bound on what every replica parses and
keeps of one tenant's profile, at about what etcd's 1.5 MiB takes of typical runs. Checked here too, for a
cluster whose CRD predates the bound (Helm does not upgrade CRDs)."""


def camel_case(field: str) -> str:
    """A field's key in Kubernetes objects (API conventions): ``dataset_size`` -> ``datasetSize``."""
    first, *rest = field.split("_")
    return first + "".join(word.capitalize() for word in rest)


K8S_KEYS: dict[str, str] = {field: camel_case(field) for field in Observation.model_fields if field != "workload"}
"""Observation field -> its key in a RuntimeProfile's runs (the workload is the profile's own)."""


def observation_to_k8s(observation: Observation) -> dict[str, object]:
    """One observation as it is stored in a RuntimeProfile; unknown fields left out."""
    values = observation.model_dump()
    return {key: values[field] for field, key in K8S_KEYS.items() if values[field] is not None}


def observation_from_k8s(workload: str, item: dict[str, object]) -> Observation:
    """The inverse of ``observation_to_k8s``, validated like a CSV row."""
    fields = {field: item[key] for field, key in K8S_KEYS.items() if key in item}
    return Observation.model_validate({"workload": workload, **fields})


def observations_from_k8s(workload: str, items: Sequence[dict[str, object]] | None) -> list[Observation]:
    """A RuntimeProfile's list of observations (``spec`` or ``status``)."""
    return [observation_from_k8s(workload, item) for item in items or []]


def runs_from_k8s(
    spec: Mapping[str, Any] | None, status: Mapping[str, Any] | None
) -> tuple[str, list[Observation], list[Observation]]:
    """A RuntimeProfile's workload, its seed runs (``spec``) and learned runs (``status``). Raises ``BadProfile``."""
    try:
        if not isinstance(spec, Mapping) or not isinstance(spec.get("workload"), str) or not spec["workload"]:
            raise BadProfile("spec.workload is missing: the profile names no workload")
        workload = spec["workload"]
        if len(spec.get("observations") or ()) > MAX_SEED_RUNS:
            raise BadProfile(f"spec.observations holds {len(spec['observations'])} runs: at most {MAX_SEED_RUNS}")
        seed = observations_from_k8s(workload, spec.get("observations"))
        learned = observations_from_k8s(workload, (status or {}).get("observations"))
    except (pydantic.ValidationError, TypeError, AttributeError) as exc:
        raise BadProfile(f"an observation is invalid: {exc}") from exc
    return workload, seed, learned


def resource_name(workload: str) -> str:
    """A DNS-1123 object name for a workload class (lower case, '-' for anything else)."""
    name = re.sub(r"[^a-z0-9-]+", "-", workload.lower()).strip("-")[:63].strip("-")
    return name or "profile"


def runtime_profile_manifest(workload: str, observations: Sequence[Observation]) -> dict[str, object]:
    """A RuntimeProfile (DESIGN §4) seeded with ``observations``, ready for ``kubectl apply``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": resource_name(workload)},
        "spec": {"workload": workload, "observations": [observation_to_k8s(o) for o in observations]},
    }


def condition(
    kind: str, status: str, reason: str, message: str, since: dt.datetime | None, generation: int | None
) -> dict[str, object]:
    """One entry of ``status.conditions``: type, status, reason, message, lastTransitionTime, observedGeneration."""
    since = since or contract.now()
    result: dict[str, object] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message[:MAX_CONDITION_MESSAGE],
        "lastTransitionTime": contract.format_timestamp(since),
    }
    if generation is not None:
        result["observedGeneration"] = generation
    return result


MAX_CONDITION_MESSAGE = 4000
