"""CRD schemas as the API server applies them: structural defaulting, then OpenAPI v3.0 validation."""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Callable
from typing import Any

import jsonschema
import yaml


def crd_schema(path: pathlib.Path, version: str) -> dict[str, Any]:
    """The openAPIV3Schema of one version of the CRD in ``path``."""
    crd = yaml.safe_load(path.read_text())
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """Structural defaulting, as the API server does before validating (returns a copy)."""
    if isinstance(value, dict) and "properties" in schema:
        value = {k: apply_defaults(v, schema["properties"].get(k, {})) for k, v in value.items()}
        for key, prop in schema["properties"].items():
            if key not in value and "default" in prop:
                value[key] = copy.deepcopy(prop["default"])
    elif isinstance(value, list) and "items" in schema:
        value = [apply_defaults(v, schema["items"]) for v in value]
    return value


def schema_checker(schema: dict[str, Any]) -> Callable[[Any], list[str]]:
    """Every violation of an object (after defaulting) as "path: message", sorted; none if valid.

    Draft 4 semantics, as in OpenAPI v3.0 (a boolean exclusiveMinimum); the validator is built once.
    """
    validator = jsonschema.Draft4Validator(schema)

    def violations(obj: Any) -> list[str]:
        errors = validator.iter_errors(apply_defaults(obj, schema))
        return sorted(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)

    return violations


def schema_validator(schema: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """Raises ValueError naming every violation: an emulator validator for a CRD."""
    violations = schema_checker(schema)

    def validate(obj: dict[str, Any]) -> None:
        if errors := violations(obj):
            raise ValueError("; ".join(errors))

    return validate


TOKENREVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "token": {"type": "string"},
                "audiences": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
"""``authentication.k8s.io/v1`` TokenReview as a client sends it (its OpenAPI spec; the status is the answer)."""
