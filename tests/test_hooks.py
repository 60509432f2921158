"""Hooks other schedulers read (Kueue's maxRunDurationSeconds, Karpenter's do-not-disrupt), and suggestedWalltime."""

from __future__ import annotations

import json
import math

import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor import hooks, profiles
from rayjob_advisor.application import Policy, advise
from rayjob_advisor.features import features_from_rayjob
from rayjob_advisor_testkit.advisor import QUICK_REFITS, running_advisor
from rayjob_advisor_testkit.profiles import profile_manifest, synthetic_observations
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group
from tests.test_advise import NOW, applied, deadline_job, notes_of

BOTH = Policy(hooks=frozenset(hooks.HOOKS))


@pytest.fixture(scope="module")
def store() -> profiles.ProfileStore:
    """test_advise's profile: the synthetic runs, fitted."""
    store = profiles.ProfileStore(shipped=False)
    store.put("default", "synthetic", "synthetic", synthetic_observations(), []).fit()
    return store


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


def test_the_webhook_writes_a_namespaces_hooks_at_create():
    shared = {"shared_profile_namespaces": ("default",)}
    with running_advisor("webhook", objects=[profile_manifest()], **QUICK_REFITS, **shared) as advisor:
        advisor.api.create_namespace("batch", {"rayjob-advisor.io/hook-kueue": "true"})
        advisor.wait_for_model("synthetic", "batch")
        advisor.api.wait_until(lambda: "batch" in advisor.memo.namespace_labels)
        rayjob = job()
        rayjob["metadata"]["namespace"] = "batch"
        admitted, _ = advisor.webhook.admit(rayjob)
        assert admitted["metadata"]["annotations"][ann.KUEUE_MAX_RUN_DURATION].isdigit()
        elsewhere, _ = advisor.webhook.admit(job())  # default: no label, no configured hook
        assert ann.PREDICTION in elsewhere["metadata"]["annotations"]
        assert ann.KUEUE_MAX_RUN_DURATION not in elsewhere["metadata"]["annotations"]
