"""From an HTTP request to the store: a resource URL parsed into its target and Kubernetes verb, the query checked,
faults acted out, the answer rendered by kmock (which serves discovery itself)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import aiohttp.web
import attrs
import kmock

from rayjob_advisor_testkit.emulator.errors import ApiError
from rayjob_advisor_testkit.emulator.faults import RecordedRequest, Traffic
from rayjob_advisor_testkit.emulator.specs import ResourceSpec
from rayjob_advisor_testkit.emulator.store import Store
from rayjob_advisor_testkit.emulator.watches import watch

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


@dataclasses.dataclass(frozen=True)
class Target:
    """A resource URL: /api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION/..."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None

    @classmethod
    def parse(cls, path: str) -> Target | None:
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


def verb_of(method: str, target: Target, query: Mapping[str, str]) -> str | None:
    """The Kubernetes verb of a request; None for what the emulator does not serve (deletecollection, ...)."""
    if method == "GET":
        return "watch" if query.get("watch") in ("true", "1") else "get" if target.name else "list"
    if target.name:
        return {"PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method)
    return "create" if method == "POST" else None


def respond(
    status: int, payload: Any, warnings: Iterable[str] = (), headers: dict[str, str] | None = None
) -> kmock.Response:
    """A kmock response; unknown-field warnings go into a Warning header, like the apiserver's."""
    headers = dict(headers or {})
    if warnings:
        headers["Warning"] = ", ".join('299 - "{}"'.format(w.replace('"', '\\"')) for w in warnings)
    return kmock.Response(status=status, payload=payload, headers=headers or None)


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesScaffold):
    """The kmock handler: kmock serves discovery and renders; the resources are served from our store.

    Runs entirely in the emulator's event loop; only ``traffic`` is shared with other threads (under its lock).
    """

    specs: tuple[ResourceSpec, ...]
    on_activity: Callable[[], None]
    store: Store = attrs.field(init=False)
    traffic: Traffic = attrs.field(factory=Traffic)
    crashes: list[Exception] = attrs.field(factory=list)

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
        self.store = Store(self.specs, on_change=self.on_activity)

    async def _serve_version(self, request: kmock.Request) -> Any:
        """kmock 0.8 names the core group version "/v1"; the apiserver says "v1"."""
        listing = cast(dict[str, Any], await super()._serve_version(request))
        listing["groupVersion"] = listing["groupVersion"].lstrip("/")
        return listing

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Serve resource URLs ourselves: kmock 0.8 parses /api/v1/namespaces[/NAME] wrongly (or crashes)."""
        body = await raw_request.read()
        target = Target.parse(raw_request.path)
        query = dict(raw_request.query)
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = body.decode(errors="replace")
        record = RecordedRequest(raw_request.method, raw_request.path, query, data)
        if target is not None:
            record.verb = verb_of(raw_request.method, target, query)
            record.resource, record.namespace = target.plural, target.namespace
            record.name, record.subresource = target.name, target.subresource
        self.traffic.record(record)
        self.on_activity()
        if target is None:
            served = await super().__call__(raw_request)
            record.status = served.status
            return served

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
            await self.traffic.act_out_fault(record)
            if isinstance(data, str):
                raise ApiError(400, "the request body is not valid JSON")
            response = self._dispatch(target, record, raw_request)
        except ApiError as error:
            response = respond(error.code, error.status())
        except Exception as error:  # noqa: BLE001 - an emulator bug: answer as the apiserver would, fail the test on exit
            self.crashes.append(error)
            response = respond(500, ApiError(500, repr(error)).status())
        record.status = response.status
        return await response(request)

    def _spec(self, target: Target) -> ResourceSpec:
        for spec in self.specs:
            if (spec.group, spec.version, spec.plural) == (target.group, target.version, target.plural):
                if target.namespace is not None and not spec.namespaced:
                    break
                return spec
        raise ApiError(404, "the server could not find the requested resource")

    def _dispatch(
        self, target: Target, record: RecordedRequest, raw_request: aiohttp.web.BaseRequest
    ) -> kmock.Response:
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
        namespace, name = target.namespace, target.name or ""  # verb_of() gives object verbs for named URLs only
        store = self.store
        match verb:
            case "list":
                return respond(200, store.list_objects(spec, namespace, query))
            case "watch":
                return respond(
                    200,
                    watch(store, spec, namespace, target.name, query, raw_request),
                    headers={"Content-Type": "application/json"},
                )
            case "get":
                return respond(200, store.read_object(spec, namespace, name))
            case "create":
                if spec.namespaced and namespace is None:
                    raise ApiError(405, f"{spec.qualified} must be created in a namespace")
                obj, warnings = store.create_object(body, spec=spec, namespace=namespace)
                return respond(201, obj, warnings)
            case "patch":
                content_type = raw_request.headers.get("Content-Type", "").split(";")[0].strip()
                obj, warnings = store.patch_object(spec, namespace, name, body, content_type, target.subresource)
                return respond(200, obj, warnings)
            case "update":
                obj, warnings = store.replace_object(spec, namespace, name, body, target.subresource)
                return respond(200, obj, warnings)
            case "delete":
                return respond(200, store.delete_object(spec, namespace, name, body))
        raise AssertionError(f"unreachable: the verb {verb!r}")
