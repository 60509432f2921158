"""The object store, as etcd and the API server's registry keep it: one global resourceVersion counter, uid,
creationTimestamp and generation; creates (201, 409), reads (404), merge and JSON patches, updates with optimistic
concurrency (409), the status subresource, no-op writes that change nothing, finalizers and graceful deletion,
reviews that store nothing. Every write goes through admission and becomes a watch event.

It lives in the emulator's event loop: only that loop may call it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime
import secrets
import string
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import jsonpointer

from rayjob_advisor_testkit.emulator.admission import Violation, admit, check_type
from rayjob_advisor_testkit.emulator.errors import ApiError
from rayjob_advisor_testkit.emulator.selectors import query_selector
from rayjob_advisor_testkit.emulator.specs import ResourceSpec

INITIAL_NAMESPACES = ("default", "kube-system")


def rfc3339(moment: datetime.datetime | None = None) -> str:
    """Kubernetes timestamps: UTC, whole seconds, 'Z'."""
    moment = moment or datetime.datetime.now(datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _without_system_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """What metadata.generation tracks: everything except metadata and status."""
    return {key: value for key, value in obj.items() if key not in ("metadata", "status")}


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One write, as the watches deliver it."""

    revision: int
    resource: str
    type: str
    object: dict[str, Any]


class Store:
    """The objects of the served resources, their history of writes, and the violations admission recorded.

    ``on_change`` is called after every write (and on ``close``), from the emulator's loop.
    """

    def __init__(self, specs: tuple[ResourceSpec, ...], on_change: Callable[[], None]) -> None:
        self.specs = specs
        self.revision = 0
        self.history: list[WatchEvent] = []
        self.violations: list[Violation] = []
        self.closing = False
        self._objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self._changed = asyncio.Event()
        self._on_change = on_change
        for name in INITIAL_NAMESPACES:
            self.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def spec_for(
        self, resource: str | None = None, *, api_version: str | None = None, kind: str | None = None
    ) -> ResourceSpec:
        for spec in self.specs:
            if spec.plural == resource or (resource is None and (spec.api_version, spec.kind) == (api_version, kind)):
                return spec
        raise ApiError(404, f"no such resource: {resource or f'{api_version} {kind}'}")

    def list_objects(self, spec: ResourceSpec, namespace: str | None, query: Mapping[str, str]) -> dict[str, Any]:
        select = query_selector(query)
        items = [
            copy.deepcopy(obj)
            for obj in self.stored(spec)
            if namespace in (None, obj["metadata"].get("namespace")) and select(obj)
        ]
        if not spec.group:  # core lists carry apiVersion/kind only on the list, not on items
            for item in items:
                item.pop("apiVersion", None)
                item.pop("kind", None)
        return {
            "apiVersion": spec.api_version,
            "kind": f"{spec.kind}List",
            "metadata": {"resourceVersion": str(self.revision)},  # limit is ignored: all fits in one chunk
            "items": items,
        }

    def read_object(self, spec: ResourceSpec, namespace: str | None, name: str) -> dict[str, Any]:
        return copy.deepcopy(self._existing(spec, namespace, name))

    def create_object(
        self, body: Any, *, spec: ResourceSpec | None = None, namespace: str | None = None
    ) -> tuple[dict[str, Any], list[str]]:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of a create must be an object")
        obj = copy.deepcopy(body)
        spec = spec or self.spec_for(api_version=obj.get("apiVersion"), kind=obj.get("kind"))
        check_type(spec, obj)
        if spec.review is not None:
            return self._review(spec, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "metadata must be an object")
        if spec.namespaced:
            namespace = namespace or meta.get("namespace")
            if meta.get("namespace", namespace) != namespace:
                raise ApiError(
                    400, "the namespace of the provided object does not match the namespace sent on the request"
                )
            if not namespace:
                raise ApiError(422, f"{spec.kind}: metadata.namespace: Required value")
            if ("namespaces", None, namespace) not in self._objects:
                raise ApiError(
                    404, f'namespaces "{namespace}" not found', details={"name": namespace, "kind": "namespaces"}
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise ApiError(500, "resourceVersion should not be set on objects to be created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, f"{spec.kind}: metadata.name: Required value: name or generateName is required")
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5)
            )
        key = (spec.plural, meta.get("namespace"), meta["name"])
        if key in self._objects:
            raise ApiError(
                409,
                f'{spec.qualified} "{meta["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": meta["name"], "group": spec.group, "kind": spec.plural},
            )
        for field in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339()
        if spec.has_generation:
            meta["generation"] = 1
        if spec.status_subresource:
            obj.pop("status", None)  # status is written through the status subresource only
        if spec.plural == "namespaces":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        obj, warnings = admit(spec, obj, self.violations)
        return self._commit(spec, key, obj, "ADDED"), warnings

    def _review(self, spec: ResourceSpec, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A review's answer: the request (pruned, validated) with its computed status; nothing is stored."""
        assert spec.review is not None
        if not isinstance(obj.get("metadata", {}), dict):
            raise ApiError(400, "metadata must be an object")
        if obj.get("metadata", {}).get("namespace"):
            raise ApiError(400, f"namespace is not allowed on this type: {spec.kind}")
        obj.pop("status", None)  # what the client says of the answer is ignored, as the apiserver ignores it
        obj, warnings = admit(spec, obj, self.violations, metadata=False)
        obj["status"] = spec.review(obj)
        return obj, warnings

    def patch_object(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        name: str,
        body: Any,
        content_type: str,
        subresource: str | None,
    ) -> tuple[dict[str, Any], list[str]]:
        current = self._existing(spec, namespace, name)
        if content_type == "application/merge-patch+json":
            if not isinstance(body, dict):
                raise ApiError(400, "a merge patch must be a JSON object")
            patched = merge_patch(copy.deepcopy(current), body)
        elif content_type == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(400, "a JSON patch must be a JSON array")
            try:
                patched = jsonpatch.apply_patch(current, body)
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
                raise ApiError(422, f"the JSON patch cannot be applied: {error}") from error
        else:
            raise ApiError(415, f"the emulator supports merge and JSON patches only, not {content_type!r}")
        return self._update(spec, current, patched, subresource)

    def replace_object(
        self, spec: ResourceSpec, namespace: str | None, name: str, body: Any, subresource: str | None
    ) -> tuple[dict[str, Any], list[str]]:
        current = self._existing(spec, namespace, name)
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            raise ApiError(400, "the body of an update must be an object with metadata")
        body = copy.deepcopy(body)
        check_type(spec, body)
        if spec.group and not body["metadata"].get("resourceVersion"):
            raise ApiError(
                422,
                f'{spec.kind} "{name}" is invalid: metadata.resourceVersion: '
                "Invalid value: 0x0: must be specified for an update",
            )
        return self._update(spec, current, body, subresource)

    def delete_object(self, spec: ResourceSpec, namespace: str | None, name: str, options: Any) -> dict[str, Any]:
        current = self._existing(spec, namespace, name)
        preconditions = (options.get("preconditions") if isinstance(options, dict) else None) or {}
        for field in ("uid", "resourceVersion"):
            if field in preconditions and preconditions[field] != current["metadata"].get(field):
                raise ApiError(
                    409,
                    f"Precondition failed: {field} in precondition: {preconditions[field]}, "
                    f"{field} in object meta: {current['metadata'].get(field)}",
                )
        key = (spec.plural, namespace, name)
        if not current["metadata"].get("finalizers"):
            return self._commit(spec, key, copy.deepcopy(current), "DELETED")
        if current["metadata"].get("deletionTimestamp"):
            return copy.deepcopy(current)
        marked = copy.deepcopy(current)
        marked["metadata"].update(deletionTimestamp=rfc3339(), deletionGracePeriodSeconds=0)
        if spec.has_generation:
            marked["metadata"]["generation"] += 1
        return self._commit(spec, key, marked, "MODIFIED")

    def stored(self, spec: ResourceSpec) -> list[dict[str, Any]]:
        """The objects of one resource in etcd's key order: by namespace, then name."""
        keys = sorted((ns or "", name) for plural, ns, name in self._objects if plural == spec.plural)
        return [self._objects[(spec.plural, ns or None, name)] for ns, name in keys]

    def close(self) -> None:
        """No more waiting for writes: the watches end."""
        self.closing = True
        self._wake()

    async def next_write(self, timeout: float) -> None:
        """Until the next write, ``close``, or ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout=timeout)

    def _existing(self, spec: ResourceSpec, namespace: str | None, name: str) -> dict[str, Any]:
        try:
            return self._objects[(spec.plural, namespace if spec.namespaced else None, name)]
        except KeyError:
            raise ApiError(
                404,
                f'{spec.qualified} "{name}" not found',
                details={"name": name, "group": spec.group, "kind": spec.plural},
            ) from None

    def _update(
        self, spec: ResourceSpec, current: dict[str, Any], new: dict[str, Any], subresource: str | None
    ) -> tuple[dict[str, Any], list[str]]:
        """Common to patch and update (``new`` is a fresh copy): concurrency, immutable and system fields, status."""
        old_meta = current["metadata"]
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(422, f'{spec.kind} "{old_meta["name"]}" is invalid: metadata: Required value')
        if str(meta.get("resourceVersion", old_meta["resourceVersion"])) != old_meta["resourceVersion"]:
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {spec.qualified} "{old_meta["name"]}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
                details={"name": old_meta["name"], "group": spec.group, "kind": spec.plural},
            )
        for field in ("name", "namespace", "uid", "creationTimestamp"):
            if field in meta and meta[field] != old_meta.get(field):
                raise ApiError(
                    422,
                    f'{spec.kind} "{old_meta["name"]}" is invalid: '
                    f"metadata.{field}: Invalid value: {meta[field]!r}: field is immutable",
                )
        if subresource == "status":
            result = copy.deepcopy(current)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            if spec.status_subresource:
                if "status" in current:
                    result["status"] = copy.deepcopy(current["status"])
                else:
                    result.pop("status", None)
        system_fields = (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "resourceVersion",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        )
        for field in system_fields:
            result["metadata"].pop(field, None)
            if field in old_meta:
                result["metadata"][field] = old_meta[field]
        result, warnings = admit(spec, result, self.violations)
        if result == current:
            return copy.deepcopy(current), warnings  # a no-op write changes nothing, not even resourceVersion
        if spec.has_generation and _without_system_fields(result) != _without_system_fields(current):
            result["metadata"]["generation"] += 1
        key = (spec.plural, old_meta.get("namespace"), old_meta["name"])
        released = result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers")
        return self._commit(spec, key, result, "DELETED" if released else "MODIFIED"), warnings

    def _commit(
        self, spec: ResourceSpec, key: tuple[str, str | None, str], obj: dict[str, Any], event_type: str
    ) -> dict[str, Any]:
        """Every write takes the next global resourceVersion and becomes a watch event, as with etcd."""
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        if event_type == "DELETED":
            del self._objects[key]
        else:
            self._objects[key] = obj
        self.history.append(WatchEvent(self.revision, spec.plural, event_type, copy.deepcopy(obj)))
        self._wake()
        return copy.deepcopy(obj)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        self._on_change()
