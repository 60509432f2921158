"""The operator's settings: one typed object, from flags over environment over defaults.

Environment variables are ``RAYJOB_ADVISOR_<FIELD>`` (upper case); lists are
comma-separated. Flags of ``rayjob-advisor run`` override them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.advice.planner import Prices
from rayjob_advisor.application import Policy
from rayjob_advisor.kuberay.hooks import Progress
from rayjob_advisor.models.runtime import RELIABLE_EXTRAPOLATION

ENV_PREFIX = "RAYJOB_ADVISOR_"
ADVICE_SETTINGS = frozenset({
    "advise_all_jobs", "default_workload", "cpu_hour_price", "gpu_hour_price", "accelerator_gpu_hour_prices", "hooks",
    "progress_url", "progress_audience", "tls_ca_configmap", "enforce_max_extrapolation",
})  # fmt: skip
"""The settings a forecast depends on (``OperatorConfig.policy``); the rest are the running operator's own."""


class OperatorConfig(pydantic.BaseModel):
    """How ``rayjob-advisor run`` behaves."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    role: Literal["controller", "webhook"] = pydantic.Field(
        default="controller",
        description="the controller (one leader at a time), or a stateless admission webhook replica",
    )
    peering: str | None = pydantic.Field(
        default=None,
        description="leader election of controller replicas: the name of their kopf peering object "
        "(ClusterKopfPeering; KopfPeering in each watched namespace with a namespaces list); unset: standalone, "
        "one replica only",
    )
    peering_lifetime_seconds: int = pydantic.Field(
        default=60, ge=2, description="how long a controller replica that stops renewing stays the leader"
    )
    namespaces: tuple[str, ...] = pydantic.Field(default=(), description="watched namespaces; empty: all")
    controller_account: str | None = pydantic.Field(
        default=None,
        description="the webhook's: the username of the controller (system:serviceaccount:<namespace>:<name>), "
        "the only one whose RayJob updates may change the held annotation; unset: nobody's",
    )
    shared_profile_namespaces: tuple[str, ...] = pydantic.Field(
        default=(),
        description="namespaces whose RuntimeProfiles serve jobs of every namespace without one of their own "
        "(first listed first); always watched. Profiles elsewhere serve only their own namespace",
    )
    log_format: Literal["text", "json"] = "text"
    liveness_port: int = pydantic.Field(default=8080, ge=0, le=65535, description="0 disables /healthz")
    advise_all_jobs: bool = pydantic.Field(
        default=False,
        description="advise every RayJob of the watched namespaces; unset: only those that ask for it (an annotation "
        "of ours or the workload label on the job, or the mode label on its namespace: docs/scope.md)",
    )
    default_workload: str | None = pydantic.Field(
        default=None, description="profile for RayJobs that name no workload; unset: they get an error"
    )
    kube_api: str | None = pydantic.Field(
        default=None, description="API server URL (e.g. kubectl proxy); unset: in-cluster or kubeconfig"
    )
    refit_interval_seconds: float = pydantic.Field(default=2.0, gt=0, description="how often stale profiles refit")
    refit_duty: float = pydantic.Field(
        default=0.1, gt=0, le=1, description="largest share of time refits take while a profile's runs keep changing"
    )
    shipped_profiles: bool = pydantic.Field(default=True, description="fall back on the embedded default profiles")
    metrics_port: int = pydantic.Field(default=9090, ge=0, le=65535, description="/metrics port; 0: none")
    metrics_job_ttl_seconds: float = pydantic.Field(
        default=600.0, ge=0, description="how long per-job gauges stay after the job ends"
    )
    webhook_port: int = pydantic.Field(default=8443, ge=1, le=65535, description="HTTPS port of the webhook role")
    tls_cert_file: str | None = pydantic.Field(default=None, description="the webhook's certificate (PEM)")
    tls_key_file: str | None = pydantic.Field(default=None, description="the webhook's private key (PEM)")
    tls_min_version: Literal["1.2", "1.3"] = pydantic.Field(
        default="1.2",
        description="the oldest TLS version the webhook and the progress endpoint speak (1.2: AEAD suites only)",
    )
    tls_ca_file: str | None = pydantic.Field(
        default=None,
        description="the CA of tls_cert_file (PEM; the chart's Secret's ca.crt), which the controller publishes in "
        "tls_ca_configmap (a certificate, public; never a key); unused with tls_secret (its CA is published)",
    )
    tls_ca_configmap: str | None = pydantic.Field(
        default=None,
        description="the ConfigMap (key ca.crt) in which the controller publishes the CA in every namespace with "
        "RayJobs the progress hook wires, and which the hook mounts into their head pods (optional: a CA that "
        "changes reaches running jobs); unset: jobs get no CA (the system's CAs verify the endpoint)",
    )
    tls_secret: str | None = pydantic.Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
        description="NAMESPACE/NAME of the Secret whose CA and serving certificate for tls_server_names the "
        "controller's leader keeps (creates in it, renews, reissues when the names differ; the chart's "
        "certificates.mode operator); unset: the certificates are someone else's (cert-manager, the chart)",
    )
    tls_server_names: tuple[str, ...] = pydantic.Field(
        default=(),
        description="with tls_secret: the DNS names (or IP addresses) the serving certificate is for (the webhook's "
        "and the progress endpoint's Services)",
    )
    webhook_configuration: str | None = pydantic.Field(
        default=None,
        description="with tls_secret: the MutatingWebhookConfiguration whose caBundle the controller's leader keeps "
        "(every webhook of it)",
    )
    webhook_client_ca_file: str | None = pydantic.Field(
        default=None,
        description="the webhook's: the CA (PEM) of the client certificate the API server presents to webhooks "
        "(its admission configuration's kubeconfig); set: the webhook port completes a TLS handshake only with a "
        "client certificate it signed (mutual TLS; reloaded when it changes). The progress endpoint, /healthz and "
        "/metrics ask for none",
    )
    webhook_header_timeout_seconds: float = pydantic.Field(
        default=5.0,
        gt=0,
        description="every port (the webhook, progress, /healthz, /metrics) closes a connection whose TLS "
        "handshake, or whose request line and headers, are not all in within this long (from its handshake or its "
        "previous answer; also the idle keep-alive)",
    )
    webhook_body_timeout_seconds: float = pydantic.Field(
        default=5.0,
        gt=0,
        description="every port answers 408 and closes when a request body takes longer to arrive",
    )
    webhook_max_connections: int = pydantic.Field(
        default=256,
        ge=1,
        description="open connections of each port (the webhook, progress, /healthz, /metrics); beyond: 503 and "
        "closed (the API server fails open)",
    )
    sweep_interval_seconds: float = pydantic.Field(
        default=15.0, gt=0, description="how often the leader checks running jobs (DeadlineAtRisk, RuntimeOverrun)"
    )
    progress_port: int = pydantic.Field(
        default=0,
        ge=0,
        le=65535,
        description="HTTPS port of the controller's progress endpoint (POST /progress, with tls_cert_file and "
        "tls_key_file, reloaded when they change, and the webhook's connection limits); 0: none",
    )
    progress_audience: str = pydantic.Field(
        default="rayjob-advisor", min_length=1, description="the audience progress reporters' tokens must be for"
    )
    progress_url: str | None = pydantic.Field(
        default=None,
        pattern=r"^https://",
        description="where progress reporters post (the chart: its progress Service), which the progress hook "
        "gives jobs; unset: progress reporting is off, and the hook injects nothing",
    )
    hooks: tuple[Literal["kueue", "karpenter", "progress", "kuberay"], ...] = pydantic.Field(
        default=(),
        description="hooks written at admission for every namespace (a namespace label "
        "rayjob-advisor.io/hook-NAME: 'true'|'false' overrides): kueue (maxRunDurationSeconds), karpenter "
        "(do-not-disrupt for the expected walltime), progress (the head pod wired to report progress), kuberay "
        "(KubeRay's activeDeadlineSeconds and preRunningDeadlineSeconds, where the job sets none)",
    )
    cpu_hour_price: float = pydantic.Field(default=0.05, ge=0, description="planner cost of a CPU-hour")
    gpu_hour_price: float = pydantic.Field(
        default=2.5, ge=0, description="planner cost of a GPU-hour of an accelerator not priced on its own"
    )
    accelerator_gpu_hour_prices: dict[str, pydantic.NonNegativeFloat] = pydantic.Field(
        default_factory=dict,
        description="planner cost of a GPU-hour per accelerator (canonical names, e.g. a100=3.7,h100=9.8)",
    )
    enforce_max_extrapolation: float = pydantic.Field(
        default=RELIABLE_EXTRAPOLATION,
        ge=1.0,
        le=1000.0,
        description="enforce resizes a job to at most this many times the most workers its profile measured; "
        "a plan beyond stays a recommendation",
    )

    @pydantic.model_validator(mode="after")
    def _webhook_needs_tls(self) -> OperatorConfig:
        if self.role == "webhook" and not (self.tls_cert_file and self.tls_key_file):
            raise ValueError("the webhook role needs tls_cert_file and tls_key_file (the API server calls it over TLS)")
        return self

    @pydantic.model_validator(mode="after")
    def _progress_needs_tls(self) -> OperatorConfig:
        if self.progress_port and not (self.tls_cert_file and self.tls_key_file):
            raise ValueError("the progress endpoint needs tls_cert_file and tls_key_file (reporters send tokens)")
        return self

    @pydantic.model_validator(mode="after")
    def _kept_certificate_needs_names(self) -> OperatorConfig:
        if self.tls_secret and not self.tls_server_names:
            raise ValueError("tls_secret needs tls_server_names (what the serving certificate is for)")
        return self

    @pydantic.model_validator(mode="after")
    def _progress_hook_needs_an_endpoint(self) -> OperatorConfig:
        if "progress" in self.hooks and not self.progress_url:
            raise ValueError("the progress hook needs progress_url (where the jobs it wires report)")
        return self

    def policy(self, namespace_labels: Mapping[str, str]) -> Policy:
        """What these settings and a namespace's labels decide for every job in it (``application.Policy``)."""
        return Policy(
            advise_all_jobs=self.advise_all_jobs,
            default_workload=self.default_workload,
            prices=self.prices,
            namespace_labels=namespace_labels,
            hooks=frozenset(self.hooks),
            progress=progress_endpoint(self),
            max_extrapolation=self.enforce_max_extrapolation,
        )

    @property
    def prices(self) -> Prices:
        return Prices(
            cpu_hour=self.cpu_hour_price,
            gpu_hour=self.gpu_hour_price,
            accelerator_gpu_hour=self.accelerator_gpu_hour_prices,
        )

    @property
    def watched_namespaces(self) -> tuple[str, ...]:
        """What the operator watches: ``namespaces`` and the shared profile namespaces; empty: all."""
        if not self.namespaces:
            return ()
        return tuple(dict.fromkeys((*self.namespaces, *self.shared_profile_namespaces)))

    @pydantic.field_validator("namespaces", "shared_profile_namespaces", "hooks", "tls_server_names", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return tuple(n.strip() for n in value.split(",") if n.strip()) if isinstance(value, str) else value

    @pydantic.field_validator("accelerator_gpu_hour_prices", mode="before")
    @classmethod
    def _accelerator_prices(cls, value: Any) -> Any:
        """``a100=3.7,h100=9.8`` (a variable) or a mapping; names made canonical (``NVIDIA-A100`` is ``a100``)."""
        if isinstance(value, str):
            pairs = [pair.partition("=") for pair in value.split(",") if pair.strip()]
            if any(not sep or not name.strip() for name, sep, _ in pairs):
                raise ValueError(f"{value!r}: expected ACCELERATOR=PRICE pairs separated by commas (a100=3.7,t4=0.35)")
            value = {name: price.strip() for name, _, price in pairs}
        if isinstance(value, Mapping):
            return {contract.canonical_accelerator(str(name)): price for name, price in value.items()}
        return value


def advice_config(environ: Mapping[str, str] = os.environ) -> OperatorConfig:
    """The ``ADVICE_SETTINGS`` from the ``RAYJOB_ADVISOR_*`` variables the operator reads: what ``predict`` and the
    kubectl plugin forecast with (the operator's other settings, e.g. a webhook role without TLS, are no business
    of theirs)."""
    names = {ENV_PREFIX + name.upper() for name in ADVICE_SETTINGS}
    return load_config({}, {key: value for key, value in environ.items() if key in names})


def load_config(flags: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> OperatorConfig:
    """Defaults, overridden by ``RAYJOB_ADVISOR_*`` variables, overridden by flags that were given."""
    values: dict[str, Any] = {
        name: environ[ENV_PREFIX + name.upper()]
        for name in OperatorConfig.model_fields
        if ENV_PREFIX + name.upper() in environ
    }
    values.update({name: value for name, value in flags.items() if value not in (None, [], ())})
    return OperatorConfig.model_validate(values)


def progress_endpoint(config: OperatorConfig) -> Progress | None:
    """Where the ``progress`` hook points jobs; None while progress reporting is off (no ``progress_url``)."""
    if not config.progress_url:
        return None
    return Progress(url=config.progress_url, audience=config.progress_audience, ca_configmap=config.tls_ca_configmap)
