"""What an admission webhook must hold to, as plain data: the AdmissionReview it accepts, the answer it gives.

The envelope is checked at the boundary against what the API server
guarantees of every request it sends (``admission.k8s.io/v1``, a uid, an
operation, an object whose ``metadata`` is a typed ObjectMeta: annotation
and label values are strings). A body that breaks it was not sent by an API
server, and gets a 4xx naming the first problems, never a guess. The object's
``spec`` is not checked here: mutating admission runs before the API server
validates it against the CRD, so the advice must survive any spec.

The answer never makes the object invalid: if the advisor's annotations
would take ``metadata.annotations`` past Kubernetes' 256 KiB, they are
left out (a held job is still released) and a warning says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic

from rayjob_advisor import contract, reasons
from rayjob_advisor.application import Advice, Message
from rayjob_advisor.errors import BadReview
from rayjob_advisor.kuberay.manifest import MergePatch
from rayjob_advisor.kuberay.rayjob import RayJob

MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""The API server's own limit on a request body (``--max-request-body-bytes``): no bigger review can come."""

ANNOTATIONS_LIMIT = 256 * 1024
"""Kubernetes' limit on the total size of ``metadata.annotations``, keys and values (TotalAnnotationSizeLimitB)."""

WARNING_LIMIT = 1024
"""Characters of one warning: ours fit the API server's 4 KiB of warnings per request (past that it cuts or drops
them); only a warning that echoes a huge annotation value is this long."""

Text = pydantic.StrictStr


class _Lenient(pydantic.BaseModel):
    """Checks the fields it declares; Kubernetes adds fields over time, so the rest pass through."""

    model_config = pydantic.ConfigDict(extra="allow", frozen=True)


class GroupVersionKind(_Lenient):
    group: Text
    version: Text
    kind: Text

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class GroupVersionResource(_Lenient):
    group: Text
    version: Text
    resource: Text


class UserInfo(_Lenient):
    username: Text = ""
    uid: Text = ""
    groups: list[Text] = pydantic.Field(default_factory=list)
    extra: dict[Text, list[Text]] = pydantic.Field(default_factory=dict)


def _timestamp(text: str) -> str:
    if contract.parse_timestamp(text).tzinfo is None:
        raise ValueError("an RFC 3339 time needs a time zone offset")
    return text


class ObjectMeta(_Lenient):
    """The ObjectMeta fields the advisor or kopf read, typed as the API server types them."""

    name: Text = ""
    generateName: Text = ""
    namespace: Text = ""
    uid: Text = ""
    creationTimestamp: Annotated[Text, pydantic.AfterValidator(_timestamp)] | None = None
    labels: dict[Text, Text] = pydantic.Field(default_factory=dict)
    annotations: dict[Text, Text] = pydantic.Field(default_factory=dict)


class KubeObject(_Lenient):
    apiVersion: Text
    kind: Text
    metadata: ObjectMeta = ObjectMeta()


class AdmissionRequest(_Lenient):
    uid: Annotated[Text, pydantic.Field(min_length=1)]
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: Text | None = None
    name: Text | None = None
    namespace: Text | None = None
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    userInfo: UserInfo
    object: KubeObject | None = None
    oldObject: KubeObject | None = None
    dryRun: pydantic.StrictBool | None = None

    @pydantic.model_validator(mode="after")
    def _objects(self) -> AdmissionRequest:
        """DELETE carries the old object only, UPDATE both, the rest the new one; each of ``kind``."""
        needed = {"CREATE": ("object",), "UPDATE": ("object", "oldObject"), "DELETE": ("oldObject",)}
        for field in needed.get(self.operation, ("object",)):
            obj: KubeObject | None = getattr(self, field)
            if obj is None:
                raise ValueError(f"{self.operation} needs request.{field}")
            if (obj.apiVersion, obj.kind) != (self.kind.api_version, self.kind.kind):
                raise ValueError(
                    f"request.{field} is {obj.apiVersion} {obj.kind}, but request.kind says "
                    f"{self.kind.api_version} {self.kind.kind}"
                )
        return self


class AdmissionReview(_Lenient):
    apiVersion: Literal["admission.k8s.io/v1"]  # the only version the chart's webhook configuration asks for
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_review(body: bytes) -> tuple[dict[str, Any], AdmissionReview]:
    """The AdmissionReview in ``body``: as parsed (what kopf is given) and as checked; raises ``BadReview``."""
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, NaN, or nested past Python's stack
        raise BadReview(f"not JSON: {type(exc).__name__}: {exc}") from None
    try:
        return data, AdmissionReview.model_validate(data)
    except pydantic.ValidationError as exc:
        raise BadReview(f"not an AdmissionReview: {contract.validation_problems(exc, 'body', 5)}") from None


def unchanged(review: AdmissionReview, warning: str) -> dict[str, Any]:
    """An AdmissionReview response that admits the object as it is, saying why."""
    response = {"uid": review.request.uid, "allowed": True, "warnings": warnings([warning])}
    return {"apiVersion": review.apiVersion, "kind": review.kind, "response": response}


def warnings(texts: list[str]) -> list[str]:
    """Warnings as the API server passes them on: one line each, at most ``WARNING_LIMIT`` characters."""
    lines = (" ".join(text.split()) for text in texts)
    return [line if len(line) <= WARNING_LIMIT else line[: WARNING_LIMIT - 1] + "…" for line in lines]


def annotations_size(annotations: Mapping[str, str]) -> int:
    """Kubernetes' measure of ``metadata.annotations``: bytes of every key and value (a lone surrogate counts as
    the 3 bytes of the replacement character Go decodes it to)."""
    return sum(len(_utf8(key)) + len(_utf8(value)) for key, value in annotations.items())


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _annotated(body: Mapping[str, Any], patch: MergePatch) -> dict[str, str]:
    """The object's annotations once the merge ``patch`` is applied."""
    annotations = dict(RayJob(body).annotations)
    for key, value in patch.get("metadata", {}).get("annotations", {}).items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    return annotations


def within_limits(body: Mapping[str, Any], advice: Advice, *, may_resize: bool) -> Advice:
    """``advice``, unless its annotations take the object past ``ANNOTATIONS_LIMIT``.

    Then none of ours is written (and no resize, which must be recorded in
    ``original-replicas``): only the release of a held job, which takes no
    room. The user's own warnings (bad input) are kept.
    """
    size = annotations_size(_annotated(body, advice.patch))
    if size <= ANNOTATIONS_LIMIT:
        return advice
    text = (
        f"the advisor's annotations would take metadata.annotations to {size} bytes, over Kubernetes' limit of "
        f"{ANNOTATIONS_LIMIT}: none written, replicas unchanged"
    )
    kept = tuple(message for message in advice.messages if message.warning)
    release = RayJob(body).release() if may_resize else {}
    return Advice(patch=release, messages=(Message(reason=reasons.NOT_ADVISED, text=text, warning=True), *kept))
