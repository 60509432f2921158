"""The Helm chart, rendered by helm-python-sdk in several values sets, every object validated strictly."""

from __future__ import annotations

import base64
import json
import tomllib
import urllib.parse

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from kubernetes_validate.utils import latest_version

from rayjob_advisor import contract as ann
from rayjob_advisor.kube.config import load_config
from rayjob_advisor_testkit import schemas
from rayjob_advisor_testkit.advisor import running_advisor
from rayjob_advisor_testkit.chart import by_kind, render
from rayjob_advisor_testkit.paths import CHART, REPO
from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob

KUBERNETES = latest_version()
# Kinds of other projects' CRDs (no schema in kubernetes-validate): checked by hand below.
FOREIGN_KINDS = {"Issuer", "Certificate", "ServiceMonitor", "PrometheusRule", "ClusterKopfPeering", "KopfPeering"}
FOREIGN_GROUPS = ("cert-manager.io/v1", "monitoring.coreos.com/v1", "kopf.dev/v1")

VALUE_SETS = {
    "defaults": {},
    "webhook off": {"webhook": {"enabled": False}},
    "cert-manager": {
        "certManager": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    },
    "single namespace": {"namespaces": ["ml-team"], "dashboard": {"namespace": "monitoring"}},
    "shared profiles": {"namespaces": ["ml-team"], "sharedProfileNamespaces": ["platform", "ml-team"]},
    "network policy off": {"networkPolicy": {"enabled": False}},
    "mutual TLS": {"webhook": {"enabled": True, "clientCA": {"configMap": "apiserver-ca", "key": "client-ca.pem"}}},
    "progress and hooks": {"progress": {"enabled": True}, "hooks": ["kueue", "karpenter", "progress"]},
    "operator certificates": {"certificates": {"mode": "operator"}, "progress": {"enabled": True}},
}

NAMESPACED = [
    {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"]},  # a clusterSelector job's cluster
    {
        "apiGroups": ["rayjob-advisor.io"],
        "resources": ["runtimeprofiles"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    {"apiGroups": ["rayjob-advisor.io"], "resources": ["runtimeprofiles/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]
CLUSTER = [
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
]
EXCLUDED = ["ops", "kube-system"]  # the release namespace and the default webhook.excludedNamespaces


def peering(plural: str) -> list[dict]:
    """kopf's peering: list and watch the peerings, patch only the controller's own (get: whether it leads)."""
    return [
        {"apiGroups": ["kopf.dev"], "resources": [plural], "verbs": ["list", "watch"]},
        {
            "apiGroups": ["kopf.dev"],
            "resources": [plural],
            "resourceNames": ["advisor-rayjob-advisor"],
            "verbs": ["get", "patch"],
        },
    ]


WEBHOOK = [
    {"apiGroups": ["rayjob-advisor.io"], "resources": ["runtimeprofiles"], "verbs": ["list", "watch"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"]},
]


def installed(objects: list[dict]) -> list[dict]:
    """What `helm install` creates: not the `helm test` hook's objects."""
    return [o for o in objects if "helm.sh/hook" not in (o["metadata"].get("annotations") or {})]


@pytest.fixture(scope="module", params=list(VALUE_SETS), ids=list(VALUE_SETS))
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(VALUE_SETS[request.param])


def test_every_object_is_valid_and_labelled(rendered):
    _, objects = rendered
    for obj in objects:
        if obj["kind"] in FOREIGN_KINDS:
            assert obj["apiVersion"] in FOREIGN_GROUPS and (obj.get("spec") or obj["apiVersion"] == "kopf.dev/v1")
        else:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        labels = obj["metadata"]["labels"]
        assert {labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")} == {
            "rayjob-advisor",
            "advisor",
        }
        assert labels["app.kubernetes.io/managed-by"] == "Helm" and labels["app.kubernetes.io/version"]


def test_pods_run_non_root_read_only_with_requests(rendered):
    _, objects = rendered
    for deployment in by_kind(objects, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]


def test_controller_and_webhook_shapes(rendered):
    name, objects = rendered
    deployments = {d["metadata"]["name"]: d for d in by_kind(objects, "Deployment")}
    controller = deployments["advisor-rayjob-advisor-controller"]
    assert controller["spec"]["replicas"] == 2 and controller["spec"]["strategy"]["type"] == "RollingUpdate"
    env = env_of(objects, "advisor-rayjob-advisor-controller")
    assert env["RAYJOB_ADVISOR_PEERING"] == "advisor-rayjob-advisor" and "POD_ID" in env
    assert int(env["RAYJOB_ADVISOR_PEERING_LIFETIME_SECONDS"]) >= 10
    peerings = by_kind(objects, "ClusterKopfPeering") + by_kind(objects, "KopfPeering")
    assert {p["metadata"]["name"] for p in peerings} == {"advisor-rayjob-advisor"}
    if name in ("single namespace", "shared profiles"):  # one KopfPeering in each watched namespace
        assert not by_kind(objects, "ClusterKopfPeering")
        assert sorted(p["metadata"]["namespace"] for p in peerings) == sorted(
            {"ml-team", *(["platform"] if name == "shared profiles" else [])}
        )
    else:
        assert len(peerings) == 1 and peerings[0]["kind"] == "ClusterKopfPeering"
    webhooks = by_kind(objects, "MutatingWebhookConfiguration")
    if name.endswith("webhook off"):
        assert not webhooks and len(deployments) == 1 and not by_kind(objects, "PodDisruptionBudget")
        return
    assert deployments["advisor-rayjob-advisor-webhook"]["spec"]["replicas"] == 2
    assert by_kind(objects, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1
    for deployment in deployments.values():  # a controller ready only once started; a webhook once it listens
        assert all(container["readinessProbe"] for container in deployment["spec"]["template"]["spec"]["containers"])
    (configuration,) = webhooks
    hook, guard = configuration["webhooks"]
    # The held annotation is guarded in every namespace but the excluded ones, on CREATE and UPDATE, failing open.
    assert (guard["name"], guard["clientConfig"]["service"]["path"]) == ("guard.rayjob-advisor.io", "/guard")
    assert guard["failurePolicy"] == "Ignore" and guard["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert guard["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": EXCLUDED}]
    }
    controller = "system:serviceaccount:ops:advisor-rayjob-advisor-controller"
    assert env_of(objects, "advisor-rayjob-advisor-webhook")["RAYJOB_ADVISOR_CONTROLLER_ACCOUNT"] == controller
    assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] <= 5 and hook["sideEffects"] == "None"
    assert hook["namespaceSelector"] == {
        "matchLabels": {"rayjob-advisor.io/webhook": "enabled"},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": EXCLUDED}],
    }
    assert hook["rules"] == [
        {
            "apiGroups": ["ray.io"],
            "apiVersions": ["v1"],
            "resources": ["rayjobs"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        }
    ]
    assert hook["clientConfig"]["service"]["path"] == "/advise"
    if name == "cert-manager":
        assert (
            configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            == "ops/advisor-rayjob-advisor-webhook"
        )
        assert {o["kind"] for o in objects} >= {"Issuer", "Certificate", "ServiceMonitor"}
        assert not list(by_kind(objects, "Secret"))
    elif name == "operator certificates":  # the controller fills both: no key material in the manifests
        (secret,) = by_kind(objects, "Secret")
        assert "data" not in secret and all("caBundle" not in h["clientConfig"] for h in configuration["webhooks"])
    else:
        (secret,) = by_kind(objects, "Secret")
        assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert secret["data"]["tls.crt"] and secret["data"]["tls.key"]


def test_the_dashboard_ships_as_a_labelled_configmap(rendered):
    name, objects = rendered
    (configmap,) = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == ("monitoring" if name == "single namespace" else "ops")
    dashboard = (CHART / "dashboards" / "rayjob-advisor.json").read_text()
    assert json.loads(configmap["data"]["rayjob-advisor.json"]) == json.loads(dashboard)


def rules(objects: list[dict], kind: str, name: str) -> list[list[dict]]:
    return [o["rules"] for o in by_kind(objects, kind) if o["metadata"]["name"] == name]


def test_rbac_is_exactly_what_the_code_needs():
    cluster_wide = installed(render({}))
    assert rules(cluster_wide, "ClusterRole", "advisor-rayjob-advisor-controller") == [
        NAMESPACED + CLUSTER + peering("clusterkopfpeerings")
    ]
    assert rules(cluster_wide, "ClusterRole", "advisor-rayjob-advisor-webhook") == [WEBHOOK + CLUSTER]
    assert not by_kind(cluster_wide, "Role")
    one_namespace = installed(render({"namespaces": ["ml-team"]}))
    # Namespaced: cluster-wide only what is cluster-scoped (namespaces, CRDs); no profile of another namespace.
    assert rules(one_namespace, "ClusterRole", "advisor-rayjob-advisor-controller") == [CLUSTER]
    assert rules(one_namespace, "ClusterRole", "advisor-rayjob-advisor-webhook") == [CLUSTER]
    roles = {r["metadata"]["name"]: r for r in by_kind(one_namespace, "Role")}
    assert {r["metadata"]["namespace"] for r in roles.values()} == {"ml-team"}
    assert roles["advisor-rayjob-advisor-controller"]["rules"] == NAMESPACED + peering("kopfpeerings")
    assert roles["advisor-rayjob-advisor-webhook"]["rules"] == WEBHOOK
    for binding in by_kind(one_namespace, "RoleBinding"):
        name = binding["metadata"]["name"]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "ops"}]
    assert len(by_kind(one_namespace, "RoleBinding")) == 2
    # Shared profile namespaces are watched too: the same Roles there (once), none more cluster-wide.
    shared = installed(render({"namespaces": ["ml-team"], "sharedProfileNamespaces": ["platform", "ml-team"]}))
    assert [(r["metadata"]["namespace"], r["metadata"]["name"]) for r in by_kind(shared, "Role")] == [
        ("ml-team", "advisor-rayjob-advisor-controller"),
        ("platform", "advisor-rayjob-advisor-controller"),
        ("ml-team", "advisor-rayjob-advisor-webhook"),
        ("platform", "advisor-rayjob-advisor-webhook"),
    ]
    assert [b["metadata"]["namespace"] for b in by_kind(shared, "RoleBinding")] == ["ml-team", "platform"] * 2
    assert not by_kind(
        installed(render({"sharedProfileNamespaces": ["platform"]})), "Role"
    )  # all watched: the ClusterRole


def env_of(objects: list[dict], deployment: str) -> dict[str, str]:
    (found,) = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == deployment]
    (container,) = found["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_shared_profile_namespaces_reach_the_controller_and_the_webhook():
    objects = render({"sharedProfileNamespaces": ["platform", "ml-base"]})
    for role in ("controller", "webhook"):
        assert env_of(objects, f"advisor-rayjob-advisor-{role}")["RAYJOB_ADVISOR_SHARED_PROFILE_NAMESPACES"] == (
            "platform,ml-base"
        )
    assert "RAYJOB_ADVISOR_SHARED_PROFILE_NAMESPACES" not in env_of(render({}), "advisor-rayjob-advisor-controller")


def test_the_webhook_never_sees_its_own_namespace_nor_the_excluded_ones():
    selector = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]}
    objects = render({"webhook": {"enabled": True, "namespaceSelector": selector, "excludedNamespaces": ["ops", "x"]}})
    ((hook, _),) = [c["webhooks"] for c in by_kind(objects, "MutatingWebhookConfiguration")]
    assert hook["namespaceSelector"] == {
        "matchLabels": {"rayjob-advisor.io/webhook": "enabled"},  # Helm merges maps with the default
        "matchExpressions": [
            {"key": "team", "operator": "In", "values": ["ml"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ops", "x"]},
        ],
    }
    everything = render({"webhook": {"enabled": True, "namespaceSelector": None, "excludedNamespaces": []}})
    ((hook, _),) = [c["webhooks"] for c in by_kind(everything, "MutatingWebhookConfiguration")]
    assert hook["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ops"]}]
    }


def test_the_webhook_and_the_progress_endpoint_get_their_connection_limits():
    env = env_of(render({}), "advisor-rayjob-advisor-webhook")
    assert env["RAYJOB_ADVISOR_WEBHOOK_HEADER_TIMEOUT_SECONDS"] == "5"
    assert env["RAYJOB_ADVISOR_WEBHOOK_BODY_TIMEOUT_SECONDS"] == "5"
    assert env["RAYJOB_ADVISOR_WEBHOOK_MAX_CONNECTIONS"] == "256"
    env = env_of(
        render({"webhook": {"enabled": True, "limits": {"maxConnections": 64}}}), "advisor-rayjob-advisor-webhook"
    )
    assert (
        env["RAYJOB_ADVISOR_WEBHOOK_MAX_CONNECTIONS"] == "64" and env["RAYJOB_ADVISOR_WEBHOOK_HEADER_TIMEOUT_SECONDS"]
    )
    progress = render({"progress": {"enabled": True}, "webhook": {"limits": {"bodyTimeoutSeconds": 3}}})
    env = env_of(progress, "advisor-rayjob-advisor-controller")
    assert env["RAYJOB_ADVISOR_WEBHOOK_BODY_TIMEOUT_SECONDS"] == "3" and env["RAYJOB_ADVISOR_PROGRESS_PORT"]


TOKENREVIEWS = [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}]
PODS = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]  # whether a reporter's pod is the job's
CONFIGMAPS = [  # the CA's ConfigMap in the namespaces of jobs the progress hook wires: create, then its name only
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
    {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["advisor-rayjob-advisor-ca"],
        "verbs": ["get", "patch"],
    },
]


def test_the_progress_endpoint_is_opt_in_with_tokenreviews_a_service_and_the_webhooks_certificate():
    assert TOKENREVIEWS[0] not in rules(render({}), "ClusterRole", "advisor-rayjob-advisor-controller")[0]
    objects = render(VALUE_SETS["progress and hooks"])
    assert rules(objects, "ClusterRole", "advisor-rayjob-advisor-controller") == [
        NAMESPACED + PODS + CONFIGMAPS + CLUSTER + peering("clusterkopfpeerings") + TOKENREVIEWS
    ]
    assert rules(objects, "ClusterRole", "advisor-rayjob-advisor-webhook") == [WEBHOOK + CLUSTER]  # not the webhook
    namespaced = render({"namespaces": ["ml-team"], "progress": {"enabled": True}})
    assert rules(namespaced, "ClusterRole", "advisor-rayjob-advisor-controller") == [CLUSTER + TOKENREVIEWS]
    (role,) = rules(namespaced, "Role", "advisor-rayjob-advisor-controller")
    assert role == NAMESPACED + PODS + CONFIGMAPS + peering("kopfpeerings")
    env = env_of(objects, "advisor-rayjob-advisor-controller")
    assert env["RAYJOB_ADVISOR_PROGRESS_PORT"] == "8444" and env["RAYJOB_ADVISOR_PROGRESS_AUDIENCE"] == "rayjob-advisor"
    assert env["RAYJOB_ADVISOR_TLS_CERT_FILE"] == "/tls/tls.crt" and env["RAYJOB_ADVISOR_SWEEP_INTERVAL_SECONDS"]
    for role in ("controller", "webhook"):
        assert env_of(objects, f"advisor-rayjob-advisor-{role}")["RAYJOB_ADVISOR_HOOKS"] == "kueue,karpenter,progress"
    (service,) = [s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "advisor-rayjob-advisor-progress"]
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "progress"}]
    (secret,) = by_kind(objects, "Secret")
    certificate = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "advisor-rayjob-advisor-progress.ops.svc" in names.get_values_for_type(x509.DNSName)
    managed = render({"progress": {"enabled": True}, "certManager": {"enabled": True}})
    (certificate_request,) = [c for c in by_kind(managed, "Certificate") if c["metadata"]["name"].endswith("-webhook")]
    assert "advisor-rayjob-advisor-progress.ops.svc" in certificate_request["spec"]["dnsNames"]
    assert "RAYJOB_ADVISOR_PROGRESS_PORT" not in env_of(render({}), "advisor-rayjob-advisor-controller")
    with pytest.raises(helm.HelmRenderError, match=r"progress\.enabled needs webhook\.enabled"):
        render({"progress": {"enabled": True}, "webhook": {"enabled": False}})


def test_the_progress_hook_points_jobs_at_the_progress_service_with_the_ca_of_its_certificate():
    objects = render(VALUE_SETS["progress and hooks"])
    (service,) = [s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "advisor-rayjob-advisor-progress"]
    (port,) = service["spec"]["ports"]
    (secret,) = by_kind(objects, "Secret")
    certificate = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    assert certificate.issuer == ca.subject
    tls = {"role": "webhook", "tls_cert_file": "/tls/tls.crt", "tls_key_file": "/tls/tls.key"}
    for role, flags in (("controller", {}), ("webhook", tls)):
        config = load_config(flags, env_of(objects, f"advisor-rayjob-advisor-{role}"))
        assert config.hooks == ("kueue", "karpenter", "progress") and config.tls_ca_file == "/tls/ca.crt"
        assert config.tls_ca_configmap == "advisor-rayjob-advisor-ca"  # published by the controller, mounted by jobs
        url = urllib.parse.urlsplit(config.progress_url)
        assert (url.scheme, url.path, url.port or 443) == ("https", "/progress", port["port"])
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert url.hostname == "advisor-rayjob-advisor-progress.ops.svc" in names.get_values_for_type(x509.DNSName)
        (deployment,) = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith(role)]
        pod = deployment["spec"]["template"]["spec"]
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "tls"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
        assert mount["mountPath"] == "/tls" and volume["secret"]["secretName"] == secret["metadata"]["name"]
    for role in ("controller", "webhook"):
        assert "RAYJOB_ADVISOR_PROGRESS_URL" not in env_of(render({}), f"advisor-rayjob-advisor-{role}")
    with pytest.raises(helm.HelmRenderError, match=r"hooks: \[progress\] needs progress\.enabled"):
        render({"hooks": ["progress"]})


def test_the_network_policy_is_on_by_default_and_covers_every_port(rendered):
    name, objects = rendered
    policies = by_kind(objects, "NetworkPolicy")
    if name == "network policy off":
        assert not policies
        return
    (policy,) = policies
    spec = policy["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "rayjob-advisor", "app.kubernetes.io/instance": "advisor"}
    }
    assert spec["policyTypes"] == ["Ingress"]
    ports = {rule["ports"][0]["port"]: rule.get("from") for rule in spec["ingress"]}
    monitoring = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    ray_pods = [
        {
            "namespaceSelector": {},
            "podSelector": {"matchExpressions": [{"key": "ray.io/cluster", "operator": "Exists"}]},
        }
    ]
    expected = {"health": None, "metrics": monitoring}
    expected |= {} if name == "webhook off" else {"https": None}
    expected |= {"progress": ray_pods} if name in ("progress and hooks", "operator certificates") else {}
    assert ports == expected
    # Every port of the pods it selects is named in it.
    named = {
        port["name"]
        for deployment in by_kind(objects, "Deployment")
        for container in deployment["spec"]["template"]["spec"]["containers"]
        for port in container["ports"]
    }
    assert set(ports) == named


def test_the_webhooks_and_the_health_peers_may_be_narrowed():
    control_plane = [{"ipBlock": {"cidr": "10.0.0.0/28"}}]
    nodes = [{"ipBlock": {"cidr": "10.128.0.0/20"}}]
    values = {"networkPolicy": {"enabled": True, "webhookFrom": control_plane, "healthFrom": nodes}}
    (policy,) = by_kind(render(values), "NetworkPolicy")
    ports = {rule["ports"][0]["port"]: rule.get("from") for rule in policy["spec"]["ingress"]}
    assert ports["https"] == control_plane and ports["health"] == nodes
    kubernetes_validate.validate(policy, KUBERNETES, strict=True)


def test_metrics_are_on_services_of_their_own_which_the_service_monitor_selects(rendered):
    name, objects = rendered
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    metrics = {n for n, s in services.items() if any(p["name"] == "metrics" for p in s["spec"]["ports"])}
    expected = {"advisor-rayjob-advisor-controller-metrics"}
    assert metrics == expected | (set() if name == "webhook off" else {"advisor-rayjob-advisor-webhook-metrics"})
    for name, service in services.items():  # no Service mixes metrics with a port the API server or the jobs call
        ports = {port["name"] for port in service["spec"]["ports"]}
        assert ports == {"metrics", "health"} if name in metrics else len(ports) == 1
    for monitor in by_kind(objects, "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        selected = {n for n, s in services.items() if selector.items() <= s["metadata"]["labels"].items()}
        assert selected == metrics
        # the series' own namespace (the jobs') is what the alerts group by, not renamed exported_namespace
        assert all(endpoint["honorLabels"] for endpoint in monitor["spec"]["endpoints"])


def test_the_webhook_port_is_a_value_the_service_follows():
    for values, port in (({}, 10250), ({"webhook": {"port": 8443}}, 8443)):
        objects = render(values)
        (container,) = next(
            d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == "advisor-rayjob-advisor-webhook"
        )["spec"]["template"]["spec"]["containers"]
        assert {"name": "https", "containerPort": port} in container["ports"]
        assert {"name": "RAYJOB_ADVISOR_WEBHOOK_PORT", "value": str(port)} in container["env"]
        service = next(
            s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "advisor-rayjob-advisor-webhook"
        )
        assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https"}]


def test_the_metrics_port_is_open_to_the_configured_peers():
    peers = [{"podSelector": {"matchLabels": {"app": "prometheus"}}, "namespaceSelector": {}}]
    (policy,) = by_kind(render({"networkPolicy": {"enabled": True, "metricsFrom": peers}}), "NetworkPolicy")
    assert [rule.get("from") for rule in policy["spec"]["ingress"] if rule["ports"][0]["port"] == "metrics"] == [peers]
    kubernetes_validate.validate(policy, KUBERNETES, strict=True)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"webhook": {"enabled": True, "timeoutSeconds": 30}}, "/webhook/timeoutSeconds"),
        ({"webhook": {"enabled": True, "limits": {"maxConnections": 0}}}, "/webhook/limits/maxConnections"),
        ({"webhook": {"enabled": True, "excludedNamespaces": ["Kube_System"]}}, "/webhook/excludedNamespaces/0"),
        ({"networkPolicy": {"enabled": "yes"}}, "/networkPolicy/enabled"),
        ({"tls": {"minVersion": "1.1"}}, "/tls/minVersion"),
        ({"logFormat": "xml"}, "/logFormat"),
        ({"namespaces": ["Not_A_Namespace"]}, "/namespaces/0"),
        ({"sharedProfileNamespaces": ["Platform"]}, "/sharedProfileNamespaces/0"),
        ({"metrics": {"port": 0}}, "/metrics/port"),
        ({"metrics": {"prometheusRule": {"window": "1 day"}}}, "/metrics/prometheusRule/window"),
        ({"metrics": {"prometheusRule": {"coverageTarget": 1.5}}}, "/metrics/prometheusRule/coverageTarget"),
        ({"replicas": 3}, "replicas"),
        ({"controller": {"replicas": 0}}, "/controller/replicas"),
        ({"helmTest": {"namespace": "Not_A_Namespace"}}, "/helmTest/namespace"),
        ({"hooks": ["slurm"]}, "/hooks/0"),
        ({"progress": {"enabled": True, "port": 0}}, "/progress/port"),
        ({"image": {"digest": "sha256:not-a-digest"}}, "/image/digest"),
        ({"adviseAllJobs": "yes"}, "/adviseAllJobs"),
    ],
)
def test_invalid_values_are_rejected_by_the_schema(values, message):
    with pytest.raises(helm.HelmValuesError, match=message):
        render(values)


def test_a_gpu_hour_may_be_priced_per_accelerator():
    prices = {"prices": {"acceleratorGpuHour": {"a100": 3.7, "t4": 0.35}}}
    for role in ("controller", "webhook"):
        env = env_of(render(prices), f"advisor-rayjob-advisor-{role}")
        assert env["RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES"] == "a100=3.7,t4=0.35"
    assert "RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES" not in env_of(render({}), "advisor-rayjob-advisor-controller")
    for bad, where in (({"A100": 3.7}, "A100"), ({"a100": -1}, "/prices/acceleratorGpuHour/a100")):
        with pytest.raises(helm.HelmValuesError, match=where):
            render({"prices": {"acceleratorGpuHour": bad}})


def test_the_crd_is_a_valid_structural_crd():
    crd = yaml.safe_load((CHART / "crds" / "rayjob-advisor.io_runtimeprofiles.yaml").read_text())
    kubernetes_validate.validate(crd, KUBERNETES, strict=True)
    columns = [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns[:4] == ["Workload", "Samples", "Model", "Error"]


@pytest.mark.parametrize("plural", ["clusterkopfpeerings", "kopfpeerings"])
def test_kopfs_peering_crds_ship_with_the_chart(plural):
    crd = yaml.safe_load((CHART / "crds" / f"kopf.dev_{plural}.yaml").read_text())
    kubernetes_validate.validate(crd, KUBERNETES, strict=True)
    assert crd["metadata"]["name"] == f"{plural}.kopf.dev" and crd["spec"]["names"]["plural"] == plural
    assert crd["spec"]["scope"] == ("Cluster" if plural.startswith("cluster") else "Namespaced")


def chart_metadata() -> dict:
    return yaml.safe_load((CHART / "Chart.yaml").read_text())


def test_every_object_validates_against_the_oldest_kubernetes_the_chart_accepts(rendered):
    _, objects = rendered
    oldest = chart_metadata()["kubeVersion"].removeprefix(">=").removesuffix("-0")
    assert oldest in kubernetes_validate.utils.all_versions()  # kubernetes-validate knows it: the check is real
    for obj in objects:
        if obj["kind"] not in FOREIGN_KINDS:
            kubernetes_validate.validate(obj, oldest, strict=True)


def test_artifact_hub_annotations_describe_the_chart():
    annotations = chart_metadata()["annotations"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert annotations["artifacthub.io/license"] == project["license"]["text"]
    links = yaml.safe_load(annotations["artifacthub.io/links"])
    assert {link["name"] for link in links} >= {"source"} and all(link["url"].startswith("https://") for link in links)
    assert "artifacthub.io/images" not in annotations  # no image is published (docs/releasing.md)
    crds = [yaml.safe_load(path.read_text()) for path in sorted((CHART / "crds").glob("*.yaml"))]
    shipped = {(c["spec"]["names"]["kind"], c["spec"]["versions"][0]["name"], c["metadata"]["name"]) for c in crds}
    assert {(c["kind"], c["version"], c["name"]) for c in yaml.safe_load(annotations["artifacthub.io/crds"])} == shipped
    (example,) = yaml.safe_load(annotations["artifacthub.io/crdsExamples"])
    (profile_crd,) = [c for c in crds if c["spec"]["names"]["kind"] == example["kind"]]
    schema = schemas.crd_schema(CHART / "crds" / "rayjob-advisor.io_runtimeprofiles.yaml", "v1alpha1")
    assert example["apiVersion"] == f"{profile_crd['spec']['group']}/v1alpha1"
    assert schemas.schema_checker(schema)(example) == []


def hook_objects(objects: list[dict]) -> dict[str, dict]:
    """The `helm test` hook's objects by kind."""
    hooks = [o for o in objects if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]
    by_kinds = {o["kind"]: o for o in hooks}
    assert len(by_kinds) == len(hooks)  # one of each kind
    return by_kinds


def test_helm_test_hook_exists_only_with_the_webhook(rendered):
    name, objects = rendered
    hooks = hook_objects(objects)
    if name.endswith("webhook off"):
        assert not hooks
        return
    assert set(hooks) == {"ServiceAccount", "Role", "RoleBinding", "Pod"}
    for obj in hooks.values():  # removed once they pass; a failed run stays for `kubectl logs`
        assert obj["metadata"]["annotations"]["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    weight = {kind: int(o["metadata"]["annotations"].get("helm.sh/hook-weight", "0")) for kind, o in hooks.items()}
    assert max(weight[k] for k in ("ServiceAccount", "Role", "RoleBinding")) < weight["Pod"]  # RBAC first


def test_helm_test_hook_may_only_create_rayjobs_in_its_namespace():
    hooks = hook_objects(render({"helmTest": {"namespace": "ml-team"}}))
    account, role, binding, pod = (hooks[k] for k in ("ServiceAccount", "Role", "RoleBinding", "Pod"))
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "ml-team"
    assert role["rules"] == [{"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["create"]}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "ops"}]
    spec = pod["spec"]
    assert spec["serviceAccountName"] == account["metadata"]["name"] and spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and container["resources"]["requests"]
    assert container["image"] == f"rayjob-advisor:{chart_metadata()['appVersion']}"  # the advisor's own image
    rayjob = json.loads({e["name"]: e.get("value") for e in container["env"]}["RAYJOB"])
    assert rayjob["metadata"]["namespace"] == "ml-team"


def test_helm_test_hook_dry_runs_a_valid_rayjob_the_webhook_predicts():
    """The hook's RayJob passes KubeRay's CRD, and the real webhook answers its dry-run with a prediction."""
    (container,) = hook_objects(render({}))["Pod"]["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["python", "-c"]
    compile(command[2], "helm-test", "exec")
    assert 'dry_run="All"' in command[2] and "rayjob-advisor.io/predicted-runtime" in command[2]
    env = {e["name"]: e.get("value") for e in container["env"]}
    services = {s["metadata"]["name"]: s for s in by_kind(render({}), "Service")}
    roles = set()
    for url in json.loads(env["HEALTHZ"]):  # each role's /healthz, through a Service that forwards it
        parts = urllib.parse.urlsplit(url)
        name, namespace, _ = (parts.hostname or "").split(".")
        assert namespace == "ops" and parts.path == "/healthz"
        assert {"name": "health", "port": parts.port, "targetPort": "health"} in services[name]["spec"]["ports"]
        roles.add(name.removeprefix("advisor-rayjob-advisor-").removesuffix("-metrics"))
    assert roles == {"controller", "webhook"}
    rayjob = json.loads({e["name"]: e.get("value") for e in container["env"]}["RAYJOB"])
    assert_valid_rayjob(rayjob)
    with running_advisor("webhook") as advisor:
        advisor.wait_for_model("digits-cnn")
        stored, response = advisor.webhook.admit(rayjob, dry_run=True)
    written = set(stored["metadata"]["annotations"]) - set(rayjob["metadata"]["annotations"])
    assert ann.PREDICTED_RUNTIME in written and ann.ERROR not in written, response.get("warnings")


def advisor_images(objects: list[dict]) -> set[str]:
    """The images of the controller, the webhook and the `helm test` pod."""
    pods = [d["spec"]["template"]["spec"] for d in by_kind(objects, "Deployment")] + [
        p["spec"] for p in by_kind(objects, "Pod")
    ]
    return {container["image"] for pod in pods for container in pod["containers"]}


def test_the_image_is_what_the_docs_build_or_a_digest():
    """By default the image `docker build -t rayjob-advisor:<appVersion> .` makes (docs/releasing.md); by digest
    once image.digest is set, whatever the tag."""
    app = chart_metadata()["appVersion"]
    assert advisor_images(render({})) == {f"rayjob-advisor:{app}"}
    assert f"-t rayjob-advisor:{app} ." in (REPO / "docs" / "releasing.md").read_text()
    digest = "sha256:" + "ab" * 32
    pinned = render({"image": {"repository": "registry.example/ml/rayjob-advisor", "tag": "x", "digest": digest}})
    assert advisor_images(pinned) == {f"registry.example/ml/rayjob-advisor@{digest}"}


def test_one_webhook_replica_gets_no_disruption_budget_that_would_block_every_drain():
    assert not by_kind(render({"webhook": {"replicas": 1}}), "PodDisruptionBudget")
    assert by_kind(render({"webhook": {"replicas": 3}}), "PodDisruptionBudget")


def test_the_oldest_tls_version_is_a_value_both_roles_get():
    for values, version in (({}, "1.2"), ({"tls": {"minVersion": "1.3"}}, "1.3")):
        objects = render({**values, "progress": {"enabled": True}})
        for name in ("advisor-rayjob-advisor-controller", "advisor-rayjob-advisor-webhook"):
            assert env_of(objects, name)["RAYJOB_ADVISOR_TLS_MIN_VERSION"] == version


def test_a_client_ca_config_map_makes_the_webhook_ask_the_api_server_for_its_certificate():
    """Opt-in mutual TLS: the ConfigMap's key is mounted into the webhook's pods, whose settings point at it; the
    controller (its progress endpoint) asks for no client certificate."""
    webhook, controller = "advisor-rayjob-advisor-webhook", "advisor-rayjob-advisor-controller"
    assert "RAYJOB_ADVISOR_WEBHOOK_CLIENT_CA_FILE" not in env_of(render({}), webhook)
    objects = render({"progress": {"enabled": True}, "webhook": {"clientCA": {"configMap": "apiserver-ca"}}})
    path = env_of(objects, webhook)["RAYJOB_ADVISOR_WEBHOOK_CLIENT_CA_FILE"]
    assert "RAYJOB_ADVISOR_WEBHOOK_CLIENT_CA_FILE" not in env_of(objects, controller)
    (found,) = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == webhook]
    pod = found["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    assert volume["configMap"] == {"name": "apiserver-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert path == f"{mount['mountPath']}/ca.crt"


def test_cert_manager_mode_signs_the_serving_certificate_with_a_ca_of_its_own():
    """Renewals of the serving certificate keep the CA the API server and running jobs trust (a self-signed leaf
    changed the trust anchor at every renewal)."""
    objects = render({"certManager": {"enabled": True}, "progress": {"enabled": True}})
    issuers = {i["metadata"]["name"]: i["spec"] for i in by_kind(objects, "Issuer")}
    certificates = {c["metadata"]["name"]: c["spec"] for c in by_kind(objects, "Certificate")}
    ca, leaf = certificates["advisor-rayjob-advisor-ca"], certificates["advisor-rayjob-advisor-webhook"]
    assert issuers[ca["issuerRef"]["name"]] == {"selfSigned": {}} and ca["isCA"] is True
    assert issuers[leaf["issuerRef"]["name"]] == {"ca": {"secretName": ca["secretName"]}}
    assert not leaf.get("isCA") and leaf["secretName"] == "advisor-rayjob-advisor-webhook-tls"
    (configuration,) = by_kind(objects, "MutatingWebhookConfiguration")
    annotation = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert annotation == "ops/advisor-rayjob-advisor-webhook"  # the leaf's Secret's ca.crt: the CA


def test_the_gitops_modes_render_identically_twice_and_the_generated_mode_does_not():
    """Operator mode, which docs/guides/install.md recommends for `helm template` and Argo CD, and cert-manager mode
    make no key material at render time; the chart's own CA (Helm `lookup`, empty under `helm template`) is new per
    render."""
    for mode in ("operator", "cert-manager"):
        values = {"certificates": {"mode": mode}, "progress": {"enabled": True}}
        assert render(values) == render(values)
    assert render({"certManager": {"enabled": True}}) == render({"certificates": {"mode": "cert-manager"}})
    assert by_kind(render({}), "Secret") != by_kind(render({}), "Secret")
    # `helm upgrade --reuse-values` from a release made before the value renders without it: the default mode.
    assert [s["metadata"]["name"] for s in by_kind(render({"certificates": None}), "Secret")] == [
        "advisor-rayjob-advisor-webhook-tls"
    ]
    with pytest.raises(helm.HelmRenderError, match=r"certManager\.enabled \(deprecated\)"):
        render({"certManager": {"enabled": True}, "certificates": {"mode": "operator"}})


def test_operator_mode_tells_the_controller_what_to_keep_and_grants_that_only():
    """The controller's leader fills the one Secret the chart renders (get, patch: never create) and the caBundle of
    the chart's one webhook configuration; the pods mount the Secret optionally, without the CA's key."""
    objects = installed(render(VALUE_SETS["operator certificates"]))
    (secret,) = by_kind(objects, "Secret")
    name = secret["metadata"]["name"]
    env = env_of(objects, "advisor-rayjob-advisor-controller")
    config = load_config({}, env)
    assert config.tls_secret == f"ops/{name}" and config.webhook_configuration == "advisor-rayjob-advisor"
    assert "advisor-rayjob-advisor-webhook.ops.svc" in config.tls_server_names
    assert "advisor-rayjob-advisor-progress.ops.svc" in config.tls_server_names
    (role,) = rules(objects, "Role", "advisor-rayjob-advisor-controller-certificates")
    assert role == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name], "verbs": ["get", "patch"]}]
    (binding,) = [
        b
        for b in by_kind(objects, "RoleBinding")
        if b["metadata"]["name"] == "advisor-rayjob-advisor-controller-certificates"
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "advisor-rayjob-advisor-controller", "namespace": "ops"}
    ]
    configuration = {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations"],
        "resourceNames": ["advisor-rayjob-advisor"],
        "verbs": ["get", "patch"],
    }
    (cluster_role,) = rules(objects, "ClusterRole", "advisor-rayjob-advisor-controller")
    assert cluster_role == NAMESPACED + PODS + CONFIGMAPS + CLUSTER + peering("clusterkopfpeerings") + TOKENREVIEWS + [
        configuration
    ]
    namespaced = installed(render({**VALUE_SETS["operator certificates"], "namespaces": ["ml-team"]}))
    assert rules(namespaced, "ClusterRole", "advisor-rayjob-advisor-controller") == [
        CLUSTER + TOKENREVIEWS + [configuration]
    ]
    for deployment in by_kind(objects, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
        assert volume["secret"]["optional"] is True and volume["secret"]["secretName"] == name
        assert [item["key"] for item in volume["secret"]["items"]] == ["ca.crt", "tls.crt", "tls.key"]
    for mode in ("helm", "cert-manager"):  # the other modes keep nothing
        other = installed(render({"certificates": {"mode": mode}}))
        assert "RAYJOB_ADVISOR_TLS_SECRET" not in env_of(other, "advisor-rayjob-advisor-controller")
        assert not by_kind(other, "Role")


def test_the_generated_secret_records_the_names_its_certificate_was_made_for():
    """An upgrade reuses the Secret only when these are the Services' names (enabling progress later adds its own)."""
    for values in ({}, {"progress": {"enabled": True}}):
        (secret,) = by_kind(render(values), "Secret")
        certificate = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        recorded = secret["metadata"]["annotations"]["rayjob-advisor.io/certificate-names"].split(",")
        assert recorded == names.get_values_for_type(x509.DNSName)
