"""A strict Kubernetes API emulator on kmock, and a runner for a real kopf operator against it.

The generic core: it serves whatever ``ResourceSpec``s it is given (by default the core resources
every kopf operator needs); ``resources`` declares the advisor's.

No kube-apiserver can run on these machines (DESIGN §9), so integration tests run the real
kopf operator against this emulator. kmock (0.8) serves discovery, renders responses and
streams, and listens on a local port; the object store is ours because kmock's
``KubernetesEmulator`` is lax exactly where operators break in production: it keeps no
resourceVersion, answers 200 to creations, replays every object on every watch, has no
status subresource, no optimistic concurrency, no schema, and crashes on ``/api/v1/namespaces``.

Semantics follow the kube-apiserver for custom resources: one global resourceVersion counter,
uid/creationTimestamp/generation, 201/409/404/422 with ``Status`` bodies, merge and JSON patches,
the status subresource, no-op writes that change nothing, finalizers, pruning of fields unknown
to the CRD schema (recorded as violations too), CRD defaulting and validation, and watches that
resume after a resourceVersion. Unsupported features (strategic merge, server-side apply,
dry-run, set-based label selectors, ...) are refused with 4xx instead of being ignored.

The emulator runs in its own thread and event loop, so tests are plain synchronous pytest tests,
and ``run_operator`` runs kopf in another thread with its own loop.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import copy
import dataclasses
import datetime
import json
import re
import secrets
import string
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, TypeVar, cast

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
import kopf
from kopf._cogs.structs.credentials import Vault  # kopf.operator(vault=...) takes it, kopf does not export it

from rayjob_advisor_testkit import schemas

Validator = Callable[[dict[str, Any]], object]
"""Checks a complete object about to be stored; raises (any exception) to reject it with 422."""

T = TypeVar("T")

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
ALL_VERBS = frozenset({"create", "delete", "get", "list", "patch", "update", "watch"})
# fieldValidation is accepted but always acts as "Warn": unknown fields are pruned with a warning.
SUPPORTED_PARAMS = frozenset(
    {
        "allowWatchBookmarks",
        "fieldManager",
        "fieldSelector",
        "fieldValidation",
        "labelSelector",
        "limit",
        "pretty",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
    }
)
INITIAL_NAMESPACES = ("default", "kube-system")
MAX_ANNOTATIONS_BYTES = 256 * 1024
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def rfc3339(moment: datetime.datetime | None = None) -> str:
    """Kubernetes timestamps: UTC, whole seconds, 'Z'."""
    moment = moment or datetime.datetime.now(datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """A failed API call, rendered as the apiserver's ``Status`` object; also raised to Python callers."""

    def __init__(self, code: int, message: str, *, reason: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(f"{code} {reason or REASONS.get(code, 'Unknown')}: {message}")
        self.code = code
        self.reason = reason or REASONS.get(code, "Unknown")
        self.message = message
        self.details = details or {}

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


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


@dataclasses.dataclass
class RecordedRequest:
    """One request as it reached the emulator; ``status`` is filled once the answer is known."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    verb: str | None = None  # list, watch, get, create, patch, update, delete; None for discovery
    resource: str | None = None  # plural
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    status: int | None = None


@dataclasses.dataclass
class Fault:
    """The next ``remaining`` requests matching the pattern answer ``status`` instead of being served.

    With ``delay``: they are served (or answer ``status``, if set) only after ``delay`` seconds, a hung server.
    """

    method: str
    resource: str
    name: str | None
    namespace: str | None
    subresource: str | None
    status: int | None
    message: str
    remaining: int
    delay: float = 0.0


@dataclasses.dataclass(frozen=True)
class Violation:
    """A schema problem in an object someone tried to store: rejected (422) or pruned (unknown field)."""

    resource: str
    namespace: str | None
    name: str | None
    message: str
    rejected: bool


@dataclasses.dataclass(frozen=True)
class _WatchEvent:
    revision: int
    resource: str
    type: str
    object: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class _Target:
    """A resource URL: /api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION/..."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None

    @classmethod
    def parse(cls, path: str) -> _Target | None:
        """None for discovery and non-Kubernetes paths (kmock serves those)."""
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            return None
        plural, *tail = rest
        return cls(group, version, plural, namespace, tail[0] if tail else None, tail[1] if len(tail) > 1 else None)


def _matches(
    record: RecordedRequest,
    method: str | None,
    resource: str | None,
    name: str | None,
    namespace: str | None,
    subresource: str | None,
) -> bool:
    """Request patterns for faults and queries: None matches anything, subresource "" the main resource."""
    return (
        (method is None or method.upper() in (record.method, (record.verb or "").upper()))
        and (resource is None or resource == record.resource)
        and (name is None or name == record.name)
        and (namespace is None or namespace == record.namespace)
        and (subresource is None or subresource == (record.subresource or ""))
    )


def _verb(method: str, target: _Target, query: Mapping[str, str]) -> str | None:
    """The Kubernetes verb of a request; None for what the emulator does not serve (deletecollection, ...)."""
    if method == "GET":
        return "watch" if query.get("watch") in ("true", "1") else "get" if target.name else "list"
    if target.name:
        return {"PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method)
    return "create" if method == "POST" else None


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


def _selector(text: str | None, fields: bool) -> Callable[[dict[str, Any]], bool]:
    """Equality-based label selectors and metadata.name/namespace field selectors; others answer 400."""
    if not text:
        return lambda obj: True
    if "(" in text:
        raise ApiError(400, f"set-based selectors are not supported by the emulator: {text!r}")
    checks = []
    for term in text.split(","):
        match = re.fullmatch(r"\s*(!?)([^!=\s]+)\s*(?:(==|=|!=)\s*(\S*))?\s*", term)
        if not match:
            raise ApiError(400, f"unable to parse requirement: {term!r}")
        negated, key, operator, wanted = match.groups()
        if fields and (negated or operator is None or key not in ("metadata.name", "metadata.namespace")):
            raise ApiError(400, f'field label not supported: "{key}"')
        checks.append((key, negated == "!", operator, wanted))

    def value(obj: dict[str, Any], key: str) -> str | None:
        meta = obj.get("metadata", {})
        return meta.get(key.removeprefix("metadata.")) if fields else meta.get("labels", {}).get(key)

    def select(obj: dict[str, Any]) -> bool:
        for key, negated, operator, wanted in checks:
            found = value(obj, key)
            if operator is None and (found is None) != negated:
                return False
            if operator in ("=", "==") and found != wanted:
                return False
            if operator == "!=" and found == wanted:
                return False
        return True

    return select


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


def _without_system_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """What metadata.generation tracks: everything except metadata and status."""
    return {key: value for key, value in obj.items() if key not in ("metadata", "status")}


@attrs.define(kw_only=True)
class _ApiServer(kmock.KubernetesScaffold):
    """The kmock handler: kmock serves discovery and renders; the resources are served from our store.

    Runs entirely in the emulator's event loop; only ``records`` and ``faults`` are shared with other
    threads (under a lock).
    """

    specs: tuple[ResourceSpec, ...]
    on_activity: Callable[[], None]
    records: list[RecordedRequest] = attrs.field(factory=list)
    faults: list[Fault] = attrs.field(factory=list)
    violations: list[Violation] = attrs.field(factory=list)
    crashes: list[Exception] = attrs.field(factory=list)
    revision: int = 0
    _objects: dict[tuple[str, str | None, str], dict[str, Any]] = attrs.field(factory=dict)
    _history: list[_WatchEvent] = attrs.field(factory=list)
    _changed: asyncio.Event = attrs.field(factory=asyncio.Event)
    _closing: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)  # guards records and faults only

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for spec in self.specs:
            self.resources[kmock.resource(spec.group, spec.version, spec.plural)] = kmock.ResourceInfo(
                namespaced=spec.namespaced,
                kind=spec.kind,
                singular=spec.kind.lower(),
                verbs=spec.verbs,
                shortnames=spec.short_names,
                categories=spec.categories,
                subresources={"status"} if spec.status_subresource else set(),
            )
        for name in INITIAL_NAMESPACES:
            self.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # ---- HTTP -----------------------------------------------------------------------------------

    async def _serve_version(self, request: kmock.Request) -> Any:
        """kmock 0.8 names the core group version "/v1"; the apiserver says "v1"."""
        listing = cast(dict[str, Any], await super()._serve_version(request))
        listing["groupVersion"] = listing["groupVersion"].lstrip("/")
        return listing

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Serve resource URLs ourselves: kmock 0.8 parses /api/v1/namespaces[/NAME] wrongly (or crashes)."""
        body = await raw_request.read()
        target = _Target.parse(raw_request.path)
        query = dict(raw_request.query)
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = body.decode(errors="replace")
        record = RecordedRequest(raw_request.method, raw_request.path, query, data)
        if target is not None:
            record.verb = _verb(raw_request.method, target, query)
            record.resource, record.namespace = target.plural, target.namespace
            record.name, record.subresource = target.name, target.subresource
        with self._lock:
            self.records.append(record)
        self.on_activity()
        if target is None:
            response = await super().__call__(raw_request)
            record.status = response.status
            return response

        request = kmock.Request(
            method=raw_request.method,
            url=raw_request.url,
            params=query,
            headers=dict(raw_request.headers),
            body=body,
            data=data,
            resource=kmock.resource(target.group, target.version, target.plural),
            namespace=target.namespace,
            name=target.name,
            subresource=target.subresource,
            raw_request=raw_request,
        )
        self._requests.append(request)  # keeps kmock's own request views complete
        try:
            fault = self._take_fault(record)
            if fault is not None and fault.delay:
                await asyncio.sleep(fault.delay)
            if fault is not None and fault.status is not None:
                raise ApiError(fault.status, fault.message, details={"name": record.name, "kind": record.resource})
            if isinstance(data, str):
                raise ApiError(400, "the request body is not valid JSON")
            response = self._dispatch(target, record, raw_request)
        except ApiError as error:
            response = _respond(error.code, error.status())
        except Exception as error:  # noqa: BLE001 - an emulator bug: answer as the apiserver would, fail the test on exit
            self.crashes.append(error)
            response = _respond(500, ApiError(500, repr(error)).status())
        record.status = response.status
        return await response(request)

    def snapshot_records(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self.records)

    def add_fault(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def _take_fault(self, record: RecordedRequest) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.remaining > 0 and _matches(
                    record, fault.method, fault.resource, fault.name, fault.namespace, fault.subresource
                ):
                    fault.remaining -= 1
                    return fault
        return None

    def _spec(self, target: _Target) -> ResourceSpec:
        for spec in self.specs:
            if (spec.group, spec.version, spec.plural) == (target.group, target.version, target.plural):
                if target.namespace is not None and not spec.namespaced:
                    break
                return spec
        raise ApiError(404, "the server could not find the requested resource")

    def _dispatch(self, target: _Target, record: RecordedRequest, raw_request: aiohttp.web.BaseRequest) -> Any:
        spec = self._spec(target)
        verb, query, body = record.verb, record.query, record.body
        if verb is None or verb not in spec.verbs:
            raise ApiError(405, f"{record.method} {record.path} is not supported")
        if unsupported := set(query) - SUPPORTED_PARAMS:
            raise ApiError(400, f"query parameters not supported by the emulator: {sorted(unsupported)}")
        if (
            target.subresource not in (None, "status")
            or (target.subresource and not spec.status_subresource)
            or (target.subresource and verb not in ("get", "patch", "update"))
        ):
            raise ApiError(404, "the server could not find the requested resource")
        namespace, name = target.namespace, target.name or ""  # _verb() gives object verbs for named URLs only
        match verb:
            case "list":
                return _respond(200, self.list_objects(spec, namespace, query))
            case "watch":
                return _respond(
                    200,
                    self._watch(spec, namespace, target.name, query, raw_request),
                    headers={"Content-Type": "application/json"},
                )
            case "get":
                return _respond(200, self.read_object(spec, namespace, name))
            case "create":
                if spec.namespaced and namespace is None:
                    raise ApiError(405, f"{spec.qualified} must be created in a namespace")
                obj, warnings = self.create_object(body, spec=spec, namespace=namespace)
                return _respond(201, obj, warnings)
            case "patch":
                content_type = raw_request.headers.get("Content-Type", "").split(";")[0].strip()
                obj, warnings = self.patch_object(spec, namespace, name, body, content_type, target.subresource)
                return _respond(200, obj, warnings)
            case "update":
                obj, warnings = self.replace_object(spec, namespace, name, body, target.subresource)
                return _respond(200, obj, warnings)
            case "delete":
                return _respond(200, self.delete_object(spec, namespace, name, body))

    # ---- the store --------------------------------------------------------------------------------

    def spec_for(
        self, resource: str | None = None, *, api_version: str | None = None, kind: str | None = None
    ) -> ResourceSpec:
        for spec in self.specs:
            if spec.plural == resource or (resource is None and (spec.api_version, spec.kind) == (api_version, kind)):
                return spec
        raise ApiError(404, f"no such resource: {resource or f'{api_version} {kind}'}")

    def list_objects(self, spec: ResourceSpec, namespace: str | None, query: Mapping[str, str]) -> dict[str, Any]:
        select = self._query_selector(query)
        items = [
            copy.deepcopy(obj)
            for obj in self._stored(spec)
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
        self._check_type(spec, obj)
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
        obj, warnings = self._admit(spec, obj)
        return self._commit(spec, key, obj, "ADDED"), warnings

    def _review(self, spec: ResourceSpec, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A review's answer: the request (pruned, validated) with its computed status; nothing is stored."""
        assert spec.review is not None
        if not isinstance(obj.get("metadata", {}), dict):
            raise ApiError(400, "metadata must be an object")
        if obj.get("metadata", {}).get("namespace"):
            raise ApiError(400, f"namespace is not allowed on this type: {spec.kind}")
        obj.pop("status", None)  # what the client says of the answer is ignored, as the apiserver ignores it
        obj, warnings = self._admit(spec, obj, metadata=False)
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
        self._check_type(spec, body)
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

    def close_watches(self) -> None:
        self._closing = True
        self._wake()

    def _stored(self, spec: ResourceSpec) -> list[dict[str, Any]]:
        """The objects of one resource in etcd's key order: by namespace, then name."""
        keys = sorted((ns or "", name) for plural, ns, name in self._objects if plural == spec.plural)
        return [self._objects[(spec.plural, ns or None, name)] for ns, name in keys]

    def _existing(self, spec: ResourceSpec, namespace: str | None, name: str) -> dict[str, Any]:
        try:
            return self._objects[(spec.plural, namespace if spec.namespaced else None, name)]
        except KeyError:
            raise ApiError(
                404,
                f'{spec.qualified} "{name}" not found',
                details={"name": name, "group": spec.group, "kind": spec.plural},
            ) from None

    def _check_type(self, spec: ResourceSpec, obj: dict[str, Any]) -> None:
        """Custom resources must say what they are; core objects get it defaulted from the URL."""
        if spec.group and not (obj.get("apiVersion") and obj.get("kind")):
            raise ApiError(400, "Object 'Kind' or 'apiVersion' is missing")
        if (obj.setdefault("apiVersion", spec.api_version), obj.setdefault("kind", spec.kind)) != (
            spec.api_version,
            spec.kind,
        ):
            raise ApiError(
                400,
                f"the object {obj['apiVersion']}/{obj['kind']} does not match "
                f"the endpoint {spec.api_version}/{spec.kind}",
            )

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
        result, warnings = self._admit(spec, result)
        if result == current:
            return copy.deepcopy(current), warnings  # a no-op write changes nothing, not even resourceVersion
        if spec.has_generation and _without_system_fields(result) != _without_system_fields(current):
            result["metadata"]["generation"] += 1
        key = (spec.plural, old_meta.get("namespace"), old_meta["name"])
        released = result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers")
        return self._commit(spec, key, result, "DELETED" if released else "MODIFIED"), warnings

    def _admit(
        self, spec: ResourceSpec, obj: dict[str, Any], *, metadata: bool = True
    ) -> tuple[dict[str, Any], list[str]]:
        """Prune unknown fields, default, validate — the apiserver's order; pruning and rejections are recorded.

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
                self.violations.append(
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
                self.violations.append(
                    Violation(spec.plural, meta.get("namespace"), meta.get("name"), str(error), rejected=True)
                )
                raise ApiError(
                    422,
                    f'{spec.kind}.{spec.group} "{meta.get("name")}" is invalid: {error}',
                    details={"name": meta.get("name"), "group": spec.group, "kind": spec.kind},
                ) from error
        return obj, warnings

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
        self._history.append(_WatchEvent(self.revision, spec.plural, event_type, copy.deepcopy(obj)))
        self._wake()
        return copy.deepcopy(obj)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        self.on_activity()

    def _query_selector(self, query: Mapping[str, str]) -> Callable[[dict[str, Any]], bool]:
        labels = _selector(query.get("labelSelector"), fields=False)
        fields = _selector(query.get("fieldSelector"), fields=True)
        return lambda obj: labels(obj) and fields(obj)

    def _watch(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        name: str | None,
        query: Mapping[str, str],
        raw_request: aiohttp.web.BaseRequest,
    ) -> AsyncIterator[Any]:
        """Validate the watch parameters now (to answer 4xx), then stream from the requested revision."""
        select = self._query_selector(query)
        since = query.get("resourceVersion") or "0"
        if not since.isdigit():
            raise ApiError(400, f"resourceVersion: Invalid value: {since!r}: must be an integer")
        initial = query.get("sendInitialEvents") == "true"
        if initial and query.get("resourceVersionMatch") != "NotOlderThan":
            raise ApiError(422, "sendInitialEvents requires resourceVersionMatch=NotOlderThan")
        timeout = float(query.get("timeoutSeconds") or "inf")

        def wanted(obj: dict[str, Any]) -> bool:
            meta = obj["metadata"]
            return namespace in (None, meta.get("namespace")) and name in (None, meta["name"]) and select(obj)

        async def stream() -> AsyncIterator[Any]:
            yield b""  # sends the headers at once, as the apiserver does
            deadline = time.monotonic() + timeout
            if since == "0" or initial:
                # "Any"/unset resourceVersion: the current state as synthetic ADDED events, then changes.
                position = len(self._history)
                for obj in self._stored(spec):
                    if wanted(obj):
                        yield {"type": "ADDED", "object": obj}
                if initial:
                    bookmark = {
                        "apiVersion": spec.api_version,
                        "kind": spec.kind,
                        "metadata": {
                            "resourceVersion": str(self.revision),
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    }
                    yield {"type": "BOOKMARK", "object": bookmark}
            else:
                position = bisect.bisect_right(self._history, int(since), key=lambda event: event.revision)
            while True:
                while position < len(self._history):
                    event = self._history[position]
                    position += 1
                    if event.resource == spec.plural and wanted(event.object):
                        yield {"type": event.type, "object": event.object}
                changed = self._changed
                transport = raw_request.transport
                if self._closing or time.monotonic() >= deadline or transport is None or transport.is_closing():
                    return
                with contextlib.suppress(TimeoutError):  # wake up now and then to notice gone clients
                    await asyncio.wait_for(changed.wait(), timeout=min(1.0, max(0.0, deadline - time.monotonic())))

        return stream()


def _respond(status: int, payload: Any, warnings: Iterable[str] = (), headers: dict[str, str] | None = None) -> Any:
    """A kmock response; unknown-field warnings go into a Warning header, like the apiserver's."""
    headers = dict(headers or {})
    if warnings:
        headers["Warning"] = ", ".join('299 - "{}"'.format(w.replace('"', '\\"')) for w in warnings)
    return kmock.Response(status=status, payload=payload, headers=headers or None)


class Emulator:
    """The strict API server in a background thread and loop, with synchronous accessors for tests.

    Use as a context manager; ``url`` is where clients (kopf) connect. Python-side writes go through
    the same admission, resourceVersion and watch machinery as HTTP requests, and raise ``ApiError``.
    """

    def __init__(
        self,
        resources: Iterable[ResourceSpec] = KUBE_RESOURCES,
        *,
        validators: Mapping[str, Validator | None] | None = None,
    ):
        """``validators`` replaces the validators of the named resources (by plural); None disables one."""
        specs = list(resources)
        index = {spec.plural: i for i, spec in enumerate(specs)}
        for plural, validate in (validators or {}).items():
            if plural not in index:
                raise KeyError(f"no served resource {plural!r} to validate")
            specs[index[plural]] = dataclasses.replace(specs[index[plural]], validate=validate)
        self.resources: tuple[ResourceSpec, ...] = tuple(specs)
        self._activity = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._api: _ApiServer | None = None
        self._http: kmock.Server | None = None

    def __enter__(self) -> Emulator:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="k8s-emulator", daemon=True)
        self._thread.start()
        self._run(self._open)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        assert self._loop is not None and self._thread is not None
        self._run(self._close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        if self._server.crashes and exc_type is None:
            raise RuntimeError(
                f"the emulator failed on {len(self._server.crashes)} request(s)"
            ) from self._server.crashes[0]

    async def _open(self) -> None:
        self._api = _ApiServer(specs=self.resources, on_activity=self._notify)
        await self._api.__aenter__()
        self._http = kmock.Server(self._api)
        await self._http.__aenter__()

    async def _close(self) -> None:
        assert self._api is not None and self._http is not None
        self._api.close_watches()
        await self._http.__aexit__(None, None, None)
        await self._api.__aexit__(None, None, None)

    def _notify(self) -> None:
        with self._activity:
            self._activity.notify_all()

    def _run(self, fn: Callable[[], Any], timeout: float = 10) -> Any:
        """Run ``fn`` (sync, or an async function) in the emulator's loop, where all state lives."""
        assert self._loop is not None, "the emulator is not started: use it as a context manager"

        async def call() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout)

    @property
    def url(self) -> str:
        assert self._http is not None
        return str(self._http.url).rstrip("/")

    @property
    def revision(self) -> int:
        """The global resourceVersion: that of the latest write."""
        return self._run(lambda: self._server.revision)

    @property
    def _server(self) -> _ApiServer:
        assert self._api is not None, "the emulator is not started: use it as a context manager"
        return self._api

    # ---- objects ----------------------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create any object (resource chosen by apiVersion/kind), as a client would; returns it as stored."""
        return self._run(lambda: self._server.create_object(obj))[0]

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
        )

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object (a copy); ApiError 404 if absent."""
        return self._run(lambda: self._server.read_object(self._server.spec_for(resource), namespace, name))

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """All stored objects of a resource (copies), by namespace and name."""
        return self._run(lambda: self._server.list_objects(self._server.spec_for(resource), namespace, {}))["items"]

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """A merge patch (dict) or JSON patch (list), as a client would send it."""
        content_type = "application/merge-patch+json" if isinstance(patch, dict) else "application/json-patch+json"
        return self._run(
            lambda: self._server.patch_object(
                self._server.spec_for(resource), namespace, name, patch, content_type, subresource
            )
        )[0]

    def patch_status(self, resource: str, namespace: str | None, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge ``status`` through the status subresource, as the owning controller would (MODIFIED event)."""
        return self.patch(resource, namespace, name, {"status": status}, subresource="status")

    def delete(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        return self._run(lambda: self._server.delete_object(self._server.spec_for(resource), namespace, name, None))

    # ---- requests, faults, violations -----------------------------------------------------------------

    def requests(
        self,
        method: str | None = None,
        resource: str | None = None,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> list[RecordedRequest]:
        """Recorded requests, oldest first; ``method`` is an HTTP method or a verb ("watch"); subresource "" = main."""
        return [
            r for r in self._server.snapshot_records() if _matches(r, method, resource, name, namespace, subresource)
        ]

    def inject_fault(
        self,
        method: str,
        resource: str,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        status: int | None = 500,
        times: int = 1,
        message: str = "injected by the test",
        delay: float = 0.0,
    ) -> Fault:
        """Answer the next ``times`` matching requests with ``status`` (a Status body); then serve normally.

        ``delay``: answer them only after so many seconds (``status=None``: then serve them as usual),
        as a hung or overloaded API server does.
        """
        fault = Fault(method, resource, name, namespace, subresource, status, message, times, delay)
        self._server.add_fault(fault)
        return fault

    @property
    def violations(self) -> list[Violation]:
        """Schema violations seen so far: rejected objects and pruned unknown fields."""
        return self._run(lambda: list(self._server.violations))

    def wait_until(self, condition: Callable[[], T], timeout: float = 5.0) -> T:
        """Re-check ``condition`` after every request and write (and every 0.1 s) until it is truthy."""
        deadline = time.monotonic() + timeout
        while not (result := condition()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"condition not met within {timeout} s")
            with self._activity:
                self._activity.wait(min(0.1, remaining))
        return result


def operator_settings(settings: kopf.OperatorSettings | None = None) -> kopf.OperatorSettings:
    """``settings`` (or new ones) tuned for tests: fast API retries; everything else as in production."""
    settings = settings if settings is not None else kopf.OperatorSettings()
    settings.networking.error_backoffs = [0.1, 0.2, 0.5, 1.0]
    return settings


def _watched_resources(registry: kopf.OperatorRegistry, specs: Collection[ResourceSpec]) -> set[str]:
    """The plurals kopf will watch for this registry, selected as kopf's own observer selects them."""
    selectors = (
        registry._indexing.get_all_selectors()
        | registry._watching.get_all_selectors()
        | registry._spawning.get_all_selectors()
        | registry._changing.get_all_selectors()
    )
    resources = [spec.kopf_resource() for spec in specs]
    return {resource.plural for selector in selectors for resource in selector.select(resources)}


@contextlib.contextmanager
def run_operator(
    emulator: Emulator,
    *,
    registry: kopf.OperatorRegistry | None = None,
    settings: kopf.OperatorSettings | None = None,
    namespaces: Collection[str] = (),
    memo: object | None = None,
    timeout: float = 10.0,
    liveness_endpoint: str | None = None,
    peering_name: str | None = None,
    priority: int | None = None,
    standby: bool = False,
) -> Iterator[None]:
    """Run kopf against the emulator in a thread with its own loop, until the block ends.

    Enters once the operator watches every resource its registry handles (a WATCH request reached
    the emulator for each), not on kopf's ready flag, which is set before any watch starts. Can be
    entered again with the same emulator, to emulate operator restarts. Errors that crash the
    operator are re-raised on exit. With ``peering_name``, kopf's peering (leader election) is on;
    ``standby``: an operator expected to pause for a peer enters once it watches the peering only.
    """
    registry = registry if registry is not None else kopf.get_default_registry()
    settings = settings if settings is not None else operator_settings()
    expected = _watched_resources(registry, emulator.resources)
    if standby:
        expected = {"clusterkopfpeerings" if not namespaces else "kopfpeerings"}
    already_seen = len(emulator.requests())
    started: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = concurrent.futures.Future()
    crashes: list[BaseException] = []

    async def operate() -> None:
        stop = asyncio.Event()
        started.set_result((asyncio.get_running_loop(), stop))
        await kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=not namespaces,
            namespaces=namespaces,
            standalone=peering_name is None,
            peering_name=peering_name,
            priority=priority,
            stop_flag=stop,
            memo=memo,
            liveness_endpoint=liveness_endpoint,
            vault=Vault({"emulator": kopf.ConnectionInfo(server=emulator.url)}),
        )

    def main() -> None:
        try:
            asyncio.run(operate())
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            crashes.append(error)
            if not started.done():
                started.set_exception(error)

    thread = threading.Thread(target=main, name="kopf-operator", daemon=True)
    thread.start()
    loop, stop = started.result(timeout)

    def watching() -> bool:
        if not thread.is_alive():
            raise RuntimeError("the operator exited while starting") from (crashes[0] if crashes else None)
        watched = {r.resource for r in emulator.requests()[already_seen:] if r.verb == "watch"}
        return bool(watched) and expected <= watched

    try:
        emulator.wait_until(watching, timeout)
        yield
    finally:
        with contextlib.suppress(RuntimeError):  # the loop is closed already if the operator crashed
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(f"the operator did not stop within {timeout} s")
    if crashes:
        raise crashes[0]
