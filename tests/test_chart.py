"""The Helm chart, rendered by helm-python-sdk in several values sets, every object validated strictly."""

from __future__ import annotations

import json

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from rayjob_advisor_testkit.paths import REPO

CHART = REPO / "charts" / "rayjob-advisor"
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
    "network policy": {"networkPolicy": {"enabled": True}},
    "network policy, webhook off": {"networkPolicy": {"enabled": True}, "webhook": {"enabled": False}},
}

NAMESPACED = [
    {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["get", "list", "watch", "patch"]},
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


WEBHOOK = [{"apiGroups": ["rayjob-advisor.io"], "resources": ["runtimeprofiles"], "verbs": ["list", "watch"]}]


def render(values: dict) -> list[dict]:
    helm.disable_logging()
    manifests = helm.Chart.load(str(CHART)).render(values, name="advisor", namespace="ops", is_install=True)
    return [
        document
        for path, text in sorted(manifests.items())
        if not path.endswith("NOTES.txt")
        for document in yaml.safe_load_all(text)
        if document
    ]


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


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
    (configuration,) = webhooks
    (hook,) = configuration["webhooks"]
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
    cluster_wide = render({})
    assert rules(cluster_wide, "ClusterRole", "advisor-rayjob-advisor-controller") == [
        NAMESPACED + CLUSTER + peering("clusterkopfpeerings")
    ]
    assert rules(cluster_wide, "ClusterRole", "advisor-rayjob-advisor-webhook") == [WEBHOOK + CLUSTER]
    assert not by_kind(cluster_wide, "Role")
    one_namespace = render({"namespaces": ["ml-team"]})
    assert rules(one_namespace, "ClusterRole", "advisor-rayjob-advisor-controller") == [CLUSTER]
    (role,) = by_kind(one_namespace, "Role")
    assert role["metadata"]["namespace"] == "ml-team" and role["rules"] == NAMESPACED + peering("kopfpeerings")
    (binding,) = by_kind(one_namespace, "RoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "advisor-rayjob-advisor-controller", "namespace": "ops"}
    ]
    # Shared profile namespaces are watched too: the same Role there (once), none more cluster-wide.
    shared = render({"namespaces": ["ml-team"], "sharedProfileNamespaces": ["platform", "ml-team"]})
    assert [(r["metadata"]["namespace"], r["rules"]) for r in by_kind(shared, "Role")] == [
        ("ml-team", NAMESPACED + peering("kopfpeerings")),
        ("platform", NAMESPACED + peering("kopfpeerings")),
    ]
    assert [b["metadata"]["namespace"] for b in by_kind(shared, "RoleBinding")] == ["ml-team", "platform"]
    assert not by_kind(render({"sharedProfileNamespaces": ["platform"]}), "Role")  # all watched: the ClusterRole


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
    ((hook,),) = [c["webhooks"] for c in by_kind(objects, "MutatingWebhookConfiguration")]
    assert hook["namespaceSelector"] == {
        "matchLabels": {"rayjob-advisor.io/webhook": "enabled"},  # Helm merges maps with the default
        "matchExpressions": [
            {"key": "team", "operator": "In", "values": ["ml"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ops", "x"]},
        ],
    }
    everything = render({"webhook": {"enabled": True, "namespaceSelector": None, "excludedNamespaces": []}})
    ((hook,),) = [c["webhooks"] for c in by_kind(everything, "MutatingWebhookConfiguration")]
    assert hook["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ops"]}]
    }


def test_the_webhook_gets_its_connection_limits():
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


def test_the_network_policy_is_opt_in(rendered):
    name, objects = rendered
    policies = by_kind(objects, "NetworkPolicy")
    if not name.startswith("network policy"):
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
    expected = {"health": None, "metrics": monitoring} | ({} if name.endswith("webhook off") else {"https": None})
    assert ports == expected
    # Every port it names is a port of the pods it selects.
    named = {
        port["name"]
        for deployment in by_kind(objects, "Deployment")
        for container in deployment["spec"]["template"]["spec"]["containers"]
        for port in container["ports"]
    }
    assert set(ports) <= named


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
        ({"logFormat": "xml"}, "/logFormat"),
        ({"namespaces": ["Not_A_Namespace"]}, "/namespaces/0"),
        ({"sharedProfileNamespaces": ["Platform"]}, "/sharedProfileNamespaces/0"),
        ({"metrics": {"port": 0}}, "/metrics/port"),
        ({"metrics": {"prometheusRule": {"window": "1 day"}}}, "/metrics/prometheusRule/window"),
        ({"metrics": {"prometheusRule": {"coverageTarget": 1.5}}}, "/metrics/prometheusRule/coverageTarget"),
        ({"replicas": 3}, "replicas"),
        ({"controller": {"replicas": 0}}, "/controller/replicas"),
    ],
)
def test_invalid_values_are_rejected_by_the_schema(values, message):
    with pytest.raises(helm.HelmValuesError, match=message):
        render(values)


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
