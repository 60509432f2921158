"""What the emulator serves for the advisor: RayJobs and RayClusters (real KubeRay CRDs), RuntimeProfiles (our CRD),
kopf's peerings, core resources, pods (the Ray pods KubeRay would make), TokenReviews of the service-account tokens
it issues, and what the controller keeps in ``certificates.mode: operator``: Secrets, ConfigMaps (the CA's) and
MutatingWebhookConfigurations."""

from __future__ import annotations

import dataclasses
import datetime
import secrets
import threading
import uuid
from collections.abc import Iterable
from typing import Any

from rayjob_advisor_testkit import emulator, schemas
from rayjob_advisor_testkit.paths import CRDS, KUBERAY_CRDS
from rayjob_advisor_testkit.rayjobs import RAYJOB_SCHEMA

RAYCLUSTER_SCHEMA = schemas.crd_schema(KUBERAY_CRDS / "ray.io_rayclusters.yaml", "v1")
RUNTIMEPROFILE_SCHEMA = schemas.crd_schema(CRDS / "rayjob-advisor.io_runtimeprofiles.yaml", "v1alpha1")
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"  # the API server's own, for tokens that name none


@dataclasses.dataclass(frozen=True)
class _Token:
    namespace: str
    service_account: str
    audiences: tuple[str, ...]
    expires: datetime.datetime
    pod: str | None
    pod_uid: str | None


class TokenAuthority:
    """The API server's service-account token authenticator: the tokens it issued (projected ones, as the
    kubelet mounts them), reviewed as ``authentication.k8s.io/v1`` TokenReview answers them.

    Strict where the API server is: a review needs a token (400); a token it did not issue, an expired one,
    or one for none of the requested audiences is not authenticated (with the API server's kind of error);
    the answer's audiences are those the token and the request share.
    """

    def __init__(self) -> None:
        self._tokens: dict[str, _Token] = {}
        self._lock = threading.Lock()

    def issue(
        self,
        namespace: str,
        service_account: str = "default",
        *,
        audiences: Iterable[str] = (API_AUDIENCE,),
        pod: str | None = None,
        expires_in: float = 3600,
    ) -> str:
        """A new token of ``namespace/service_account`` (bound to ``pod`` if named), valid ``expires_in`` s."""
        token = "emulated." + secrets.token_urlsafe(32)
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=expires_in)
        entry = _Token(namespace, service_account, tuple(audiences), expires, pod, str(uuid.uuid4()) if pod else None)
        with self._lock:
            self._tokens[token] = entry
        return token

    def review(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The ``status`` of a TokenReview (the request is already checked against ``TOKENREVIEW_SCHEMA``)."""
        spec = obj.get("spec") or {}
        token = spec.get("token")
        if not token:
            raise emulator.ApiError(400, "token is required for TokenReview in authentication")
        wanted = list(spec.get("audiences") or [API_AUDIENCE])
        with self._lock:
            entry = self._tokens.get(token)
        if entry is None:
            return {"authenticated": False, "user": {}, "error": "[invalid bearer token, token lookup failed]"}
        if entry.expires <= datetime.datetime.now(datetime.UTC):
            return {
                "authenticated": False,
                "user": {},
                "error": "[invalid bearer token, service account token has expired]",
            }
        shared = [audience for audience in wanted if audience in entry.audiences]
        if not shared:
            error = (
                f"[invalid bearer token, token audiences {list(entry.audiences)} is invalid for the target "
                f"audiences {wanted}]"
            )
            return {"authenticated": False, "user": {}, "error": error}
        user: dict[str, Any] = {
            "username": f"system:serviceaccount:{entry.namespace}:{entry.service_account}",
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{entry.namespace}/{entry.service_account}")),
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{entry.namespace}", "system:authenticated"],
        }
        if entry.pod is not None:
            user["extra"] = {
                "authentication.kubernetes.io/pod-name": [entry.pod],
                "authentication.kubernetes.io/pod-uid": [entry.pod_uid],
            }
        return {"authenticated": True, "user": user, "audiences": shared}


def advisor_resources(tokens: TokenAuthority | None = None) -> list[emulator.ResourceSpec]:
    """RayJobs, RayClusters (what a clusterSelector job names) and RuntimeProfiles, pruned, defaulted and validated by
    their CRD schemas, the core resources, and TokenReviews answered by ``tokens`` (a new authority if none)."""
    tokens = tokens or TokenAuthority()
    return [
        emulator.ResourceSpec(
            "ray.io", "v1", "rayjobs", "RayJob", namespaced=True, status_subresource=True,
            categories=("all",), schema=RAYJOB_SCHEMA, validate=schemas.schema_validator(RAYJOB_SCHEMA),
        ),
        emulator.ResourceSpec(
            "ray.io", "v1", "rayclusters", "RayCluster", namespaced=True, status_subresource=True,
            categories=("all",), schema=RAYCLUSTER_SCHEMA, validate=schemas.schema_validator(RAYCLUSTER_SCHEMA),
        ),
        emulator.ResourceSpec(
            "rayjob-advisor.io", "v1alpha1", "runtimeprofiles", "RuntimeProfile", namespaced=True,
            status_subresource=True, short_names=("rtp",), schema=RUNTIMEPROFILE_SCHEMA,
            validate=schemas.schema_validator(RUNTIMEPROFILE_SCHEMA),
        ),
        emulator.ResourceSpec(
            "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False,
            verbs=frozenset({"create"}), schema=schemas.TOKENREVIEW_SCHEMA,
            validate=schemas.schema_validator(schemas.TOKENREVIEW_SCHEMA), review=tokens.review,
        ),
        emulator.ResourceSpec("", "v1", "pods", "Pod", namespaced=True, short_names=("po",)),
        emulator.ResourceSpec("", "v1", "secrets", "Secret", namespaced=True),
        emulator.ResourceSpec("", "v1", "configmaps", "ConfigMap", namespaced=True, short_names=("cm",)),
        emulator.ResourceSpec(
            "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
            namespaced=False,
        ),
        *emulator.PEERING_RESOURCES,
        *emulator.KUBE_RESOURCES,
    ]  # fmt: skip


class AdvisorEmulator(emulator.Emulator):
    """The emulator serving ``advisor_resources()``, which can act as KubeRay on the RayJobs' status."""

    def __init__(self) -> None:
        self.tokens = TokenAuthority()
        super().__init__(advisor_resources(self.tokens))

    def set_rayjob_status(
        self,
        namespace: str,
        name: str,
        *,
        deployment_status: str,
        job_status: str | None = None,
        start_time: datetime.datetime | str | None = None,
        end_time: datetime.datetime | str | None = None,
    ) -> dict[str, Any]:
        """Act as KubeRay: set jobDeploymentStatus/jobStatus and the Ray job's start/end (rayJobInfo and top-level)."""
        status: dict[str, Any] = {"jobDeploymentStatus": deployment_status}
        if job_status is not None:
            status["jobStatus"] = job_status
        for field, moment in (("startTime", start_time), ("endTime", end_time)):
            if moment is not None:
                stamp = moment if isinstance(moment, str) else emulator.rfc3339(moment)
                status[field] = stamp
                status.setdefault("rayJobInfo", {})[field] = stamp
        return self.patch_status("rayjobs", namespace, name, status)

    def ray_pod(self, namespace: str, rayjob: str, *, service_account: str = "default", audience: str) -> str:
        """Act as KubeRay and the kubelet: name the job's RayCluster in its status (``<rayjob>-<5 characters>``) if
        it has none, make a head pod of it, and issue that pod's projected token for ``audience``."""
        status = self.get("rayjobs", namespace, rayjob).get("status") or {}
        cluster = status.get("rayClusterName") or f"{rayjob}-{secrets.token_hex(3)[:5]}"
        self.patch_status("rayjobs", namespace, rayjob, {"rayClusterName": cluster})
        pod = f"{cluster}-head-{secrets.token_hex(3)[:5]}"
        labels = {"ray.io/cluster": cluster, "ray.io/node-type": "head"}
        self.create({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": namespace, "labels": labels},
            "spec": {"serviceAccountName": service_account, "containers": [{"name": "ray-head", "image": "ray"}]},
        })  # fmt: skip
        return self.tokens.issue(namespace, service_account, audiences=[audience], pod=pod)
