"""What the API server checks of an object before it stores it, in its order: the object's type, ObjectMeta's rules,
pruning of fields the schema does not declare, CRD defaulting, validation. Pruned fields and rejected objects are
recorded as violations, for the tests to assert none."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from rayjob_advisor_testkit import schemas
from rayjob_advisor_testkit.emulator.errors import ApiError
from rayjob_advisor_testkit.emulator.specs import ResourceSpec

MAX_ANNOTATIONS_BYTES = 256 * 1024
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@dataclasses.dataclass(frozen=True)
class Violation:
    """A schema problem in an object someone tried to store: rejected (422) or pruned (unknown field)."""

    resource: str
    namespace: str | None
    name: str | None
    message: str
    rejected: bool


def check_type(spec: ResourceSpec, obj: dict[str, Any]) -> None:
    """Custom resources must say what they are; core objects get it defaulted from the URL."""
    if spec.group and not (obj.get("apiVersion") and obj.get("kind")):
        raise ApiError(400, "Object 'Kind' or 'apiVersion' is missing")
    if (obj.setdefault("apiVersion", spec.api_version), obj.setdefault("kind", spec.kind)) != (
        spec.api_version,
        spec.kind,
    ):
        raise ApiError(
            400,
            f"the object {obj['apiVersion']}/{obj['kind']} does not match the endpoint {spec.api_version}/{spec.kind}",
        )


def admit(
    spec: ResourceSpec, obj: dict[str, Any], violations: list[Violation], *, metadata: bool = True
) -> tuple[dict[str, Any], list[str]]:
    """Prune unknown fields, default, validate — the apiserver's order; pruning and rejections go to ``violations``.

    ``metadata``: check ObjectMeta (reviews have none worth the name: no name, never stored).
    """
    if metadata:
        _check_metadata(spec, obj)
    meta = obj.setdefault("metadata", {})
    warnings = []
    if spec.schema is not None:
        obj, dropped = _prune(obj, spec.schema)
        obj = schemas.apply_defaults(obj, spec.schema)
        for path in dropped:
            warnings.append(f'unknown field "{path}"')
            violations.append(
                Violation(
                    spec.plural,
                    meta.get("namespace"),
                    meta.get("name"),
                    f"unknown field {path!r} pruned",
                    rejected=False,
                )
            )
    if spec.validate is not None:
        try:
            spec.validate(obj)
        except Exception as error:
            violations.append(
                Violation(spec.plural, meta.get("namespace"), meta.get("name"), str(error), rejected=True)
            )
            raise ApiError(
                422,
                f'{spec.kind}.{spec.group} "{meta.get("name")}" is invalid: {error}',
                details={"name": meta.get("name"), "group": spec.group, "kind": spec.kind},
            ) from error
    return obj, warnings


def _check_metadata(spec: ResourceSpec, obj: dict[str, Any]) -> None:
    """The ObjectMeta rules every apiserver enforces: name format, label and annotation syntax and types."""
    meta = obj["metadata"]
    name = meta["name"]
    name_pattern, name_limit = (DNS_LABEL, 63) if spec.plural == "namespaces" else (DNS_SUBDOMAIN, 253)
    problems = []
    if not isinstance(name, str) or len(name) > name_limit or not name_pattern.fullmatch(name):
        problems.append(f"metadata.name: Invalid value: {name!r}: must be a lowercase RFC 1123 name")
    for field in ("labels", "annotations"):
        entries = meta.get(field) or {}
        if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
            raise ApiError(400, f"metadata.{field}: values must be strings, got {entries!r}")
        for key, val in entries.items():
            prefix, _, local = key.rpartition("/")
            if (
                (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)))
                or len(local) > 63
                or not QUALIFIED_NAME.fullmatch(local)
            ):
                problems.append(f"metadata.{field}: Invalid value: {key!r}: not a qualified name")
            if field == "labels" and (len(val) > 63 or not LABEL_VALUE.fullmatch(val)):
                problems.append(f"metadata.labels: Invalid value: {val!r}: not a valid label value")
    if sum(len(k) + len(v) for k, v in (meta.get("annotations") or {}).items()) > MAX_ANNOTATIONS_BYTES:
        problems.append("metadata.annotations: Too long: must have at most 262144 bytes")
    if problems:
        raise ApiError(
            422,
            f'{spec.kind} "{name}" is invalid: ' + "; ".join(problems),
            details={"name": name, "group": spec.group, "kind": spec.kind},
        )


def _prune(value: Any, schema: Mapping[str, Any], path: str = "") -> tuple[Any, list[str]]:
    """Drop fields the structural schema does not declare, as the apiserver does silently.

    Only objects with ``properties`` are pruned (and not under x-kubernetes-preserve-unknown-fields);
    the root's apiVersion/kind/metadata are always kept.
    """
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return value, []
    dropped: list[str] = []
    if isinstance(value, dict) and ("properties" in schema or isinstance(schema.get("additionalProperties"), dict)):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        kept = {}
        for key, item in value.items():
            item_schema = properties.get(key, extra if isinstance(extra, dict) else None)
            if not path and key in ("apiVersion", "kind", "metadata"):
                kept[key] = item
            elif item_schema is None and "properties" in schema and extra is not True:
                dropped.append(f"{path}.{key}" if path else key)
            else:
                kept[key], below = _prune(item, item_schema or {}, f"{path}.{key}" if path else key)
                dropped += below
        return kept, dropped
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        pruned = []
        for index, item in enumerate(value):
            kept_item, below = _prune(item, schema["items"], f"{path}[{index}]")
            pruned.append(kept_item)
            dropped += below
        return pruned, dropped
    return value, dropped
