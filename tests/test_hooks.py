"""Hooks other schedulers read (Kueue's maxRunDurationSeconds, Karpenter's do-not-disrupt), and suggestedWalltime;
the progress hook, which wires a job's head pod to report progress."""

from __future__ import annotations

import copy
import json
import math

import pydantic
import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor.advice.features import features_from_rayjob
from rayjob_advisor.application import Policy, advise
from rayjob_advisor.kube.config import OperatorConfig, progress_endpoint
from rayjob_advisor.kuberay import hooks
from rayjob_advisor_testkit.advice import NOW, applied, notes_of
from rayjob_advisor_testkit.advisor import QUICK_REFITS, running_advisor
from rayjob_advisor_testkit.profiles import deadline_job, profile_manifest
from rayjob_advisor_testkit.rayjobs import make_rayjob, sample_rayjobs, worker_group

BOTH = Policy(hooks=frozenset({"kueue", "karpenter"}))
URL = "https://advisor-rayjob-advisor-progress.ops.svc/progress"
CA_CONFIGMAP = "advisor-rayjob-advisor-ca"
PROGRESS = Policy(
    hooks=frozenset({"progress"}),
    progress=hooks.Progress(url=URL, audience="advisor-audience", ca_configmap=CA_CONFIGMAP),
)
TOKEN_VOLUME = {
    "name": "rayjob-advisor-token",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"audience": "advisor-audience", "expirationSeconds": 3600, "path": "token"}}
        ]
    },
}
TOKEN_MOUNT = {"name": "rayjob-advisor-token", "mountPath": "/var/run/secrets/rayjob-advisor", "readOnly": True}
# The CA from the ConfigMap the controller keeps in the job's namespace: optional (the pod starts before it exists),
# updated by the kubelet when the CA changes.
CA_VOLUME = {
    "name": "rayjob-advisor-ca",
    "configMap": {"name": CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}], "optional": True},
}
CA_MOUNT = {"name": "rayjob-advisor-ca", "mountPath": "/var/run/rayjob-advisor-ca", "readOnly": True}
CA_FILE = {"name": "RAYJOB_ADVISOR_PROGRESS_CA", "value": "/var/run/rayjob-advisor-ca/ca.crt"}


def job(**notes: str) -> dict:
    annotations = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "16000", ann.BATCH_SIZE: "64", **notes}
    return make_rayjob(annotations=annotations, groups=[worker_group(replicas=2), worker_group(name="spare")])


def walltime(advice_notes: dict[str, str], startup: float) -> int:
    return max(1, math.ceil(startup + json.loads(advice_notes[ann.PREDICTION])["upper"]))


def annotations_of(template: dict) -> dict[str, str]:
    return template.get("metadata", {}).get("annotations", {})


def test_hooks_are_configured_and_namespace_labels_turn_them_on_or_off():
    assert hooks.enabled((), {}) == frozenset()
    assert hooks.enabled(("kueue",), {}) == {"kueue"}
    labels = {"rayjob-advisor.io/hook-kueue": "false", "rayjob-advisor.io/hook-karpenter": "true"}
    assert hooks.enabled(("kueue",), labels) == {"karpenter"}


def test_enabled_hooks_carry_the_expected_walltime_at_admission(store):
    rayjob = job()
    advice = advise(rayjob, store, policy=BOTH, may_resize=True, now=NOW)
    after = applied(rayjob, advice)  # valid against the KubeRay CRD
    own = features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))
    seconds = walltime(notes_of(advice), store.find("default", "synthetic").model.startup([own])[0])
    assert advice.walltime is not None and seconds == max(1, math.ceil(advice.walltime))
    assert after["metadata"]["annotations"][ann.KUEUE_MAX_RUN_DURATION] == str(seconds)
    cluster = after["spec"]["rayClusterSpec"]
    templates = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    assert len(templates) == 3
    for template in templates:
        assert ann.parse_duration(annotations_of(template)[ann.KARPENTER_DO_NOT_DISRUPT]).total_seconds() == seconds
    # the rest of the spec is the user's
    before = rayjob["spec"]["rayClusterSpec"]
    assert [(g["replicas"], g["template"]["spec"]) for g in cluster["workerGroupSpecs"]] == [
        (g["replicas"], g["template"]["spec"]) for g in before["workerGroupSpecs"]
    ]
    assert cluster["headGroupSpec"]["template"]["spec"] == before["headGroupSpec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("policy", "may_resize"), [(Policy(), True), (BOTH, False)], ids=["not enabled", "not at admission"]
)
def test_no_hooks_unless_enabled_and_before_the_cluster_is_built(store, policy, may_resize):
    advice = advise(job(), store, policy=policy, may_resize=may_resize, now=NOW)
    assert ann.KUEUE_MAX_RUN_DURATION not in notes_of(advice) and "spec" not in advice.patch


def test_values_the_user_set_are_kept(store):
    rayjob = job(**{ann.KUEUE_MAX_RUN_DURATION: "7200"})
    rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"].setdefault("metadata", {})["annotations"] = {
        ann.KARPENTER_DO_NOT_DISRUPT: "true"
    }
    after = applied(rayjob, advise(rayjob, store, policy=BOTH, may_resize=True, now=NOW))
    assert after["metadata"]["annotations"][ann.KUEUE_MAX_RUN_DURATION] == "7200"
    cluster = after["spec"]["rayClusterSpec"]
    assert annotations_of(cluster["headGroupSpec"]["template"])[ann.KARPENTER_DO_NOT_DISRUPT] == "true"
    assert ann.parse_duration(annotations_of(cluster["workerGroupSpecs"][0]["template"])[ann.KARPENTER_DO_NOT_DISRUPT])


@pytest.mark.parametrize("metadata", [None, {"annotations": None}, {"labels": {"team": "a"}, "annotations": None}])
def test_a_worker_template_with_null_metadata_gets_the_walltime_and_keeps_the_rest(store, metadata):
    """Admission sees the spec before validation: a null metadata or annotations is filled, not a crash."""
    rayjob = job()
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["metadata"] = copy.deepcopy(metadata)
    advice = advise(rayjob, store, policy=BOTH, may_resize=True, now=NOW)
    assert notes_of(advice).get(ann.ERROR) is None
    template = applied(rayjob, advice)["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    assert ann.parse_duration(annotations_of(template)[ann.KARPENTER_DO_NOT_DISRUPT])
    assert template["metadata"].get("labels") == (metadata or {}).get("labels")


def test_a_resized_job_gets_the_walltime_of_its_new_size_on_its_resized_groups(store):
    rayjob = deadline_job("enforce", deadline="20s")
    advice = advise(rayjob, store, policy=BOTH, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    plan = json.loads(after["metadata"]["annotations"][ann.RECOMMENDATION])
    (group,) = after["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert advice.resized and group["replicas"] == plan["replicas"] > 1  # the resize survives the hooks' list
    expected = max(1, math.ceil(plan["startupSeconds"] + plan["upperSeconds"]))
    assert abs(int(after["metadata"]["annotations"][ann.KUEUE_MAX_RUN_DURATION]) - expected) <= 1
    assert ann.parse_duration(annotations_of(group["template"])[ann.KARPENTER_DO_NOT_DISRUPT])
    # the recommendation says it too, always (our own annotation), as a Go duration
    suggested = ann.parse_duration(plan["suggestedWalltime"]).total_seconds()
    assert abs(suggested - (plan["startupSeconds"] + plan["upperSeconds"])) <= 1  # whole seconds, rounded up
    unhooked = advise(rayjob, store, policy=Policy(), may_resize=True, now=NOW)
    assert json.loads(notes_of(unhooked)[ann.RECOMMENDATION])["suggestedWalltime"] == plan["suggestedWalltime"]


def admit_in_labelled_namespace(advisor, label: str) -> dict:
    """A job admitted in a new namespace ``batch`` whose ``label`` is "true", once the webhook knows the label."""
    advisor.api.create_namespace("batch", {label: "true"})
    advisor.wait_for_model("synthetic", "batch")
    advisor.api.wait_until(lambda: "batch" in advisor.memo.namespace_labels)
    rayjob = job()
    rayjob["metadata"]["namespace"] = "batch"
    admitted, _ = advisor.webhook.admit(rayjob)
    return admitted


def test_the_webhook_writes_a_namespaces_hooks_at_create():
    shared = {"shared_profile_namespaces": ("default",)}
    with running_advisor("webhook", objects=[profile_manifest()], **QUICK_REFITS, **shared) as advisor:
        admitted = admit_in_labelled_namespace(advisor, "rayjob-advisor.io/hook-kueue")
        assert admitted["metadata"]["annotations"][ann.KUEUE_MAX_RUN_DURATION].isdigit()
        elsewhere, _ = advisor.webhook.admit(job())  # default: no label, no configured hook
        assert ann.PREDICTION in elsewhere["metadata"]["annotations"]
        assert ann.KUEUE_MAX_RUN_DURATION not in elsewhere["metadata"]["annotations"]


# The progress hook.


def head_pod(rayjob: dict) -> dict:
    return rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]


def sidecar_job(**notes: str) -> dict:
    """``job()`` whose head pod has a user's volume, mount and env, and a second container (a log shipper)."""
    rayjob = job(**notes)
    pod = head_pod(rayjob)
    pod["volumes"] = [{"name": "data", "emptyDir": {}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    pod["containers"][0]["env"] = [{"name": "EPOCHS", "value": "3"}]
    pod["containers"].append({"name": "logs", "image": "fluent/fluent-bit:3.0"})
    return rayjob


def test_the_progress_hook_adds_the_token_and_the_reporters_settings_to_the_ray_container_only(store):
    rayjob = sidecar_job()
    advice = advise(rayjob, store, policy=PROGRESS, may_resize=True, now=NOW)
    after = applied(rayjob, advice)  # valid against the KubeRay CRD
    pod, before = head_pod(after), head_pod(rayjob)
    assert pod["volumes"] == [*before["volumes"], TOKEN_VOLUME, CA_VOLUME]
    ray, logs = pod["containers"]
    assert ray["volumeMounts"] == [*before["containers"][0]["volumeMounts"], TOKEN_MOUNT, CA_MOUNT]
    assert ray["env"] == [
        *before["containers"][0]["env"],
        {"name": "RAYJOB_ADVISOR_PROGRESS_URL", "value": URL},
        {"name": "RAYJOB_ADVISOR_RAYJOB", "value": "job"},
        CA_FILE,
    ]
    assert not any(variable["name"] == "RAYJOB_ADVISOR_PROGRESS_CA_PEM" for variable in ray["env"])
    assert logs == before["containers"][1]  # not the Ray container: KubeRay's is the first
    assert {k: v for k, v in ray.items() if k not in ("env", "volumeMounts")} == {
        k: v for k, v in before["containers"][0].items() if k not in ("env", "volumeMounts")
    }
    assert after["spec"]["rayClusterSpec"]["workerGroupSpecs"] == rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert ann.KUEUE_MAX_RUN_DURATION not in notes_of(advice) and not advice.messages


def test_the_progress_hook_adds_nothing_a_second_time(store):
    after = applied(sidecar_job(), advise(sidecar_job(), store, policy=PROGRESS, may_resize=True, now=NOW))
    again = advise(after, store, policy=PROGRESS, may_resize=True, now=NOW)
    assert "spec" not in again.patch and applied(after, again)["spec"] == after["spec"]
    assert hooks.patch(after, frozenset({"progress"}), 60, PROGRESS.progress) == {}


def test_the_progress_hook_keeps_what_the_user_set(store):
    rayjob = sidecar_job()
    pod = head_pod(rayjob)
    pod["volumes"].append({"name": "own-token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}})
    ray = pod["containers"][0]
    ray["volumeMounts"].append({"name": "own-token", "mountPath": "/var/run/secrets/rayjob-advisor"})
    ray["env"] += [
        {"name": "RAYJOB_ADVISOR_PROGRESS_URL", "value": "https://elsewhere/progress"},
        {"name": "RAYJOB_ADVISOR_PROGRESS_CA", "value": "/etc/ca/ca.crt"},  # a CA of their own, as a file
    ]
    after = applied(rayjob, advise(rayjob, store, policy=PROGRESS, may_resize=True, now=NOW))
    (ray_after, _) = head_pod(after)["containers"]
    assert head_pod(after)["volumes"] == pod["volumes"] and ray_after["volumeMounts"] == ray["volumeMounts"]
    assert ray_after["env"] == [*ray["env"], {"name": "RAYJOB_ADVISOR_RAYJOB", "value": "job"}]


def test_the_progress_hook_mounts_no_ca_where_the_user_gives_one_or_there_is_none(store):
    rayjob = sidecar_job()
    head_pod(rayjob)["containers"][0]["env"].append({"name": "RAYJOB_ADVISOR_PROGRESS_CA_PEM", "value": "PEM"})
    after = applied(rayjob, advise(rayjob, store, policy=PROGRESS, may_resize=True, now=NOW))
    assert CA_VOLUME not in head_pod(after)["volumes"] and TOKEN_VOLUME in head_pod(after)["volumes"]
    assert CA_MOUNT not in head_pod(after)["containers"][0]["volumeMounts"]
    without = PROGRESS.model_copy(update={"progress": hooks.Progress(url=URL, audience="advisor-audience")})
    after = applied(sidecar_job(), advise(sidecar_job(), store, policy=without, may_resize=True, now=NOW))
    ray = head_pod(after)["containers"][0]
    assert CA_VOLUME not in head_pod(after)["volumes"] and CA_MOUNT not in ray["volumeMounts"]
    assert not {"RAYJOB_ADVISOR_PROGRESS_CA", "RAYJOB_ADVISOR_PROGRESS_CA_PEM"} & {v["name"] for v in ray["env"]}


def test_a_job_without_a_name_yet_gets_its_clusters_name_from_kuberays_pod_label(store):
    rayjob = job()
    del rayjob["metadata"]["name"]
    rayjob["metadata"]["generateName"] = "train-"
    after = applied(rayjob, advise(rayjob, store, policy=PROGRESS, may_resize=True, now=NOW))
    env = {variable["name"]: variable for variable in head_pod(after)["containers"][0]["env"]}
    assert "RAYJOB_ADVISOR_RAYJOB" not in env
    assert env["RAYJOB_ADVISOR_RAY_CLUSTER"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}
    }


@pytest.mark.parametrize(("name", "sample"), sample_rayjobs(), ids=[n for n, _ in sample_rayjobs()])
def test_every_kuberay_sample_is_wired_to_report_and_stays_valid(store, name, sample):
    rayjob = copy.deepcopy(sample)
    rayjob["metadata"].setdefault("annotations", {}).update({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000"})
    advice = advise(rayjob, store, policy=PROGRESS, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    if "rayClusterSpec" not in rayjob["spec"]:  # an existing cluster's job: no head pod of its own, no prediction
        assert name == "ray-job.use-existing-raycluster.yaml" and after["spec"] == rayjob["spec"]
        return
    ray = head_pod(after)["containers"][0]
    env = {variable["name"]: variable.get("value") or variable["valueFrom"] for variable in ray["env"]}
    assert env["RAYJOB_ADVISOR_PROGRESS_URL"] == URL and env["RAYJOB_ADVISOR_PROGRESS_CA"] == CA_FILE["value"]
    if "name" in rayjob["metadata"]:
        assert env["RAYJOB_ADVISOR_RAYJOB"] == rayjob["metadata"]["name"]
    else:  # generateName (pytorch-image-classifier)
        assert env["RAYJOB_ADVISOR_RAY_CLUSTER"] == {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}
    assert TOKEN_MOUNT in ray["volumeMounts"]
    assert TOKEN_VOLUME in head_pod(after)["volumes"] and CA_VOLUME in head_pod(after)["volumes"]
    own = head_pod(rayjob)["containers"][0]
    assert ray["env"][: len(own.get("env", []))] == own.get("env", [])  # the sample's own come first, untouched
    assert head_pod(after)["containers"][1:] == head_pod(rayjob)["containers"][1:]


@pytest.mark.parametrize(
    ("policy", "may_resize"),
    [
        (Policy(progress=PROGRESS.progress), True),
        (PROGRESS.model_copy(update={"namespace_labels": {"rayjob-advisor.io/hook-progress": "false"}}), True),
        (PROGRESS, False),
    ],
    ids=["not enabled", "turned off by the namespace", "not at admission"],
)
def test_no_progress_wiring_unless_enabled_before_the_cluster_is_built(store, policy, may_resize):
    advice = advise(job(), store, policy=policy, may_resize=may_resize, now=NOW)
    assert "spec" not in advice.patch and not advice.messages


def test_the_progress_hook_without_progress_reporting_injects_nothing_and_says_so(store):
    labelled = Policy(namespace_labels={"rayjob-advisor.io/hook-progress": "true"})  # no endpoint
    advice = advise(job(), store, policy=labelled, may_resize=True, now=NOW)
    assert "spec" not in advice.patch and ann.PREDICTION in notes_of(advice)
    (message,) = advice.messages
    assert message.reason == "ProgressOff" and message.warning and not message.event
    assert "progress.enabled=false" in advice.warnings[0]
    with pytest.raises(pydantic.ValidationError, match="the progress hook needs progress_url"):
        OperatorConfig(hooks=("progress",))
    assert OperatorConfig(hooks="progress,kueue", progress_url=URL).hooks == ("progress", "kueue")


def test_the_webhook_wires_a_labelled_namespaces_jobs_with_the_cas_configmap_it_is_given():
    progress = {"progress_url": URL, "tls_ca_configmap": CA_CONFIGMAP, "shared_profile_namespaces": ("default",)}
    with running_advisor("webhook", objects=[profile_manifest()], **QUICK_REFITS, **progress) as advisor:
        admitted = admit_in_labelled_namespace(advisor, "rayjob-advisor.io/hook-progress")
        ray = head_pod(admitted)["containers"][0]
        env = {variable["name"]: variable.get("value") for variable in ray["env"]}
        assert env["RAYJOB_ADVISOR_PROGRESS_CA"] == CA_FILE["value"] and env["RAYJOB_ADVISOR_PROGRESS_URL"] == URL
        assert TOKEN_MOUNT in ray["volumeMounts"] and CA_MOUNT in ray["volumeMounts"]
        token, ca = head_pod(admitted)["volumes"][-2:]
        assert token["projected"]["sources"][0]["serviceAccountToken"]["audience"] == advisor.config.progress_audience
        assert ca == CA_VOLUME
        elsewhere, _ = advisor.webhook.admit(job())  # default: no label, no configured hook
        assert head_pod(elsewhere) == head_pod(job())
    assert progress_endpoint(OperatorConfig(**progress)).ca_configmap == CA_CONFIGMAP


KUBERAY = Policy(hooks=frozenset({"kuberay"}))
SAMPLE_CLUSTER = "ray-cluster-kuberay"  # the RayCluster ray-job.use-existing-raycluster.yaml runs on


def kuberay_sample(name: str, sample: dict, **spec: int) -> tuple[dict, dict | None]:
    """(a KubeRay sample asking for advice, with ``spec`` set; the RayCluster it runs on, for the clusterSelector
    one: another sample's cluster)."""
    rayjob = copy.deepcopy(sample)
    rayjob["metadata"].setdefault("annotations", {}).update({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000"})
    rayjob["spec"].update(spec)
    if "rayClusterSpec" in rayjob["spec"]:
        return rayjob, None
    own = dict(sample_rayjobs())["ray-job.sample.yaml"]["spec"]["rayClusterSpec"]
    metadata = {"name": rayjob["spec"]["clusterSelector"]["ray.io/cluster"], "namespace": "default"}
    return rayjob, {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": metadata, "spec": own}


@pytest.mark.parametrize(("name", "sample"), sample_rayjobs(), ids=[n for n, _ in sample_rayjobs()])
def test_the_kuberay_hook_writes_both_deadlines_on_every_sample(store, name, sample):
    rayjob, cluster = kuberay_sample(name, sample)
    advice = advise(rayjob, store, policy=KUBERAY, may_resize=True, now=NOW, cluster=cluster)
    after = applied(rayjob, advice)  # valid against KubeRay's RayJob CRD
    spec = after["spec"]
    model = store.find("default", "synthetic").model
    job = [features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]), cluster)]
    startup, upper = model.startup(job)[0], model.startup_upper(job)[0]
    assert advice.walltime is not None and advice.error is None and upper >= startup
    wanted = hooks.kuberay_deadlines(advice.walltime, upper)  # the start-up's upper quantile, not its median
    assert {field: spec[field] for field in wanted} == wanted
    assert spec["activeDeadlineSeconds"] > spec["preRunningDeadlineSeconds"] >= hooks.PROVISIONING_SECONDS
    assert json.loads(notes_of(advice)[ann.RECOMMENDATION]) == {"kuberay": wanted}  # no deadline: only the hook's


@pytest.mark.parametrize(("name", "sample"), sample_rayjobs(), ids=[n for n, _ in sample_rayjobs()])
def test_the_kuberay_hook_never_changes_a_users_deadline_and_says_when_it_is_lower(store, name, sample):
    rayjob, cluster = kuberay_sample(name, sample, activeDeadlineSeconds=120, preRunningDeadlineSeconds=2**31 - 1)
    advice = advise(rayjob, store, policy=KUBERAY, may_resize=True, now=NOW, cluster=cluster)
    after = applied(rayjob, advice)
    assert (after["spec"]["activeDeadlineSeconds"], after["spec"]["preRunningDeadlineSeconds"]) == (120, 2**31 - 1)
    assert "spec" not in advice.patch or not {"activeDeadlineSeconds", "preRunningDeadlineSeconds"} & set(
        advice.patch["spec"]
    )
    shown = json.loads(notes_of(advice)[ann.RECOMMENDATION])["kuberay"]
    assert shown["reason"] == (
        f"spec.activeDeadlineSeconds=120 is below the advisor's {shown['activeDeadlineSeconds']}: KubeRay may kill "
        "the job before it can finish"
    )


def test_the_kuberay_hook_joins_a_deadlines_recommendation_and_follows_a_resize(store):
    rayjob = deadline_job("enforce", deadline="20s")
    rayjob["spec"]["preRunningDeadlineSeconds"] = 1
    advice = advise(rayjob, store, policy=KUBERAY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    plan = json.loads(after["metadata"]["annotations"][ann.RECOMMENDATION])
    assert advice.resized and plan["replicas"] > 1 and plan["meetsDeadline"] is not None
    wanted = hooks.kuberay_deadlines(plan["startupSeconds"] + plan["upperSeconds"], plan["startupSeconds"])
    assert abs(after["spec"]["activeDeadlineSeconds"] - wanted["activeDeadlineSeconds"]) <= 1  # of the new size
    assert after["spec"]["preRunningDeadlineSeconds"] == 1
    assert "preRunningDeadlineSeconds=1 is below" in plan["kuberay"]["reason"]
    assert "KubeRay may fail the job before it can start" in plan["kuberay"]["reason"]


def test_kuberay_deadlines_are_whole_int32_seconds_of_at_least_one():
    assert hooks.kuberay_deadlines(0.0, 0.0) == {"activeDeadlineSeconds": 600, "preRunningDeadlineSeconds": 600}
    huge = hooks.kuberay_deadlines(1e300, 10.2)
    assert huge == {"activeDeadlineSeconds": hooks.INT32_MAX, "preRunningDeadlineSeconds": 616}
