"""The typed RayJob view: status vocabulary, jobs held for the planner and their release, resizes."""

from __future__ import annotations

import copy

import pytest
import yaml

from rayjob_advisor import contract as ann
from rayjob_advisor.advice import features
from rayjob_advisor.kuberay.manifest import merge
from rayjob_advisor.kuberay.rayjob import RayJob, is_finished, is_waiting
from rayjob_advisor.kuberay.training import TrainingCount
from rayjob_advisor_testkit.rayjobs import counted, env, make_rayjob, worker_group


def test_suspended_jobs_are_held_only_when_the_webhook_admitted_them_asking_for_release():
    asking = make_rayjob(annotations={ann.RELEASE: "true"}, suspend=True)
    marked = make_rayjob(annotations={ann.RELEASE: "true", ann.HELD: "true"}, suspend=True)
    assert RayJob(asking, creating=True).hold == RayJob(marked).hold == "suspended"
    assert RayJob(asking).hold is None  # release added after the creation (or unseen by the webhook): not ours
    assert RayJob(make_rayjob(suspend=True)).hold is None  # suspended by someone else, for their reasons
    assert RayJob(make_rayjob(annotations={ann.RELEASE: "true"})).hold is None  # not suspended: nothing to hold
    assert RayJob(marked).release() == {"spec": {"suspend": False}, "metadata": {"annotations": {ann.HELD: None}}}
    assert RayJob(make_rayjob(suspend=True)).release() == RayJob(asking).release() == {}  # not ours to release
    queued = copy.deepcopy(marked)
    queued["metadata"]["labels"] = {ann.KUEUE_QUEUE: "team-a"}
    assert RayJob(queued).hold is RayJob(queued, creating=True).hold is None  # Kueue's suspend, never ours


def test_only_the_webhook_writes_the_held_mark():
    asking = make_rayjob(annotations={ann.RELEASE: "true"}, suspend=True)
    assert RayJob(asking).admitted() == {"metadata": {"annotations": {ann.HELD: "true"}}}
    forged = make_rayjob(annotations={ann.HELD: "true"}, suspend=True)  # without release: no mark
    assert RayJob(forged).admitted() == {"metadata": {"annotations": {ann.HELD: None}}}
    assert RayJob(make_rayjob()).admitted() == {}
    # An UPDATE keeps the mark as it was: added, changed or removed, it comes back.
    assert RayJob(forged).kept_held(make_rayjob()) == {"metadata": {"annotations": {ann.HELD: None}}}
    assert RayJob(make_rayjob()).kept_held(forged) == {"metadata": {"annotations": {ann.HELD: "true"}}}
    assert RayJob(forged).kept_held(forged) == {}


def test_kueue_gates_release_only_ours():
    gated = RayJob(
        make_rayjob(annotations={ann.KUEUE_GATES: "example.com/quota, rayjob-advisor.io/planner"}, suspend=True)
    )
    assert gated.hold == "gated"
    assert gated.release() == {"metadata": {"annotations": {ann.KUEUE_GATES: "example.com/quota"}}}
    alone = RayJob(make_rayjob(annotations={ann.KUEUE_GATES: "rayjob-advisor.io/planner"}))
    assert alone.release() == {"metadata": {"annotations": {ann.KUEUE_GATES: None}}}
    assert RayJob(make_rayjob(annotations={ann.KUEUE_GATES: "example.com/quota"})).hold is None


@pytest.mark.parametrize(
    ("deployment", "waiting", "finished"),
    [(None, True, False), ("", True, False), ("Initializing", True, False), ("Suspended", True, False),
     ("Running", False, False), ("Complete", False, True), ("Failed", False, True)],
)  # fmt: skip
def test_status_vocabulary(deployment, waiting, finished):
    status = {} if deployment is None else {"jobDeploymentStatus": deployment}
    assert (is_waiting(status), is_finished(status)) == (waiting, finished)
    assert (RayJob({"status": status}).waiting, RayJob({"status": status}).finished) == (waiting, finished)


def test_resizing_widens_min_and_max_only_as_needed():
    rayjob = RayJob(
        make_rayjob(groups=[worker_group("a", replicas=1), worker_group("b", replicas=2, minReplicas=2, maxReplicas=3)])
    )
    patch, original = rayjob.resize(1, 6)
    groups = patch["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert [(g["replicas"], g["minReplicas"], g["maxReplicas"]) for g in groups] == [(1, 1, 8), (6, 2, 6)]
    assert original == {"groupName": "b", "replicas": 2, "minReplicas": 2, "maxReplicas": 3}
    patch, _ = rayjob.resize(1, 1)
    group = patch["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 3)
    assert rayjob.body["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["replicas"] == 2  # the body is not touched


@pytest.mark.parametrize(
    ("resources", "params", "expected", "expected_params"),
    [
        (  # limits and requests alike, Ray's num-gpus with them
            {"limits": {"cpu": "4", "nvidia.com/gpu": 2}, "requests": {"cpu": "4", "nvidia.com/gpu": "2"}},
            {"num-gpus": "2", "dashboard-host": "0.0.0.0"},
            {"limits": {"cpu": "4", "nvidia.com/gpu": "4"}, "requests": {"cpu": "4", "nvidia.com/gpu": "4"}},
            {"num-gpus": "4", "dashboard-host": "0.0.0.0"},
        ),
        (  # only where set: Kubernetes defaults the request to the limit, KubeRay num-gpus to the container's
            {"limits": {"amd.com/gpu": "1"}},
            {},
            {"limits": {"amd.com/gpu": "4"}},
            {},
        ),
    ],
)
def test_resizing_gpus_rewrites_every_gpu_quantity_and_num_gpus(resources, params, expected, expected_params):
    rayjob = make_rayjob(groups=[worker_group("cpu"), worker_group("gpu", resources, rayStartParams=params)])
    patch, original = RayJob(rayjob).resize(1, 3, gpus=4.0)
    cpu, gpu = patch["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert gpu["template"]["spec"]["containers"][0]["resources"] == expected
    assert (gpu["rayStartParams"], gpu["replicas"]) == (expected_params, 3)
    assert cpu == rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert original == {"groupName": "gpu", "replicas": 2, "minReplicas": 1, "maxReplicas": 8}
    group = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]
    assert group["template"]["spec"]["containers"][0]["resources"] == resources  # the body is not touched


def test_merge_patches_merge_nested_mappings_and_replace_the_rest():
    target = {"metadata": {"annotations": {"a": "1"}}, "spec": {"suspend": True}}
    source = {"metadata": {"annotations": {"b": None}}, "spec": {"suspend": False, "x": [1]}}
    assert merge(target, source) == {
        "metadata": {"annotations": {"a": "1", "b": None}},
        "spec": {"suspend": False, "x": [1]},
    }
    fresh = merge({}, source)
    source["metadata"]["annotations"]["b"] = "changed"
    assert fresh["metadata"]["annotations"]["b"] is None  # copied, not shared


def training_of(rayjob: dict) -> TrainingCount:
    return features.features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"])).training


def test_the_worker_count_is_rewritten_where_it_was_found_and_nothing_else():
    runtime_env = {"pip": ["torch"], "working_dir": "https://x.io/a.zip", "env_vars": {"NUM_WORKERS": "2", "LR": "1"}}
    rayjob = counted(runtime_env=yaml.safe_dump(runtime_env))
    patch = RayJob(rayjob).set_training_workers(training_of(rayjob), 5)
    assert list(patch["spec"]) == ["runtimeEnvYAML"]
    runtime_env["env_vars"]["NUM_WORKERS"] = "5"
    assert yaml.safe_load(patch["spec"]["runtimeEnvYAML"]) == runtime_env

    rayjob = counted(head_env=env(A="1", NUM_WORKERS="2", B="x"))
    patch = RayJob(rayjob).set_training_workers(training_of(rayjob), 5)
    (head,) = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    (container,) = patch["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    assert container == {**head, "env": env(A="1", NUM_WORKERS="5", B="x")}

    rayjob = counted(submitter_env=env(NUM_WORKERS="2", OTHER="y"))
    patch = RayJob(rayjob).set_training_workers(training_of(rayjob), 5)
    assert patch["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["env"] == env(NUM_WORKERS="5", OTHER="y")


@pytest.mark.parametrize(
    ("entrypoint", "rewritten"),
    [
        ("python train.py --num-workers 2 --epochs 2", "python train.py --num-workers 12 --epochs 2"),
        ("python train.py --num-workers=2  --x=2", "python train.py --num-workers=12  --x=2"),
        ("python train.py --workers '2'", "python train.py --workers '12'"),
    ],
)
def test_an_entrypoint_argument_is_replaced_token_exactly(entrypoint, rewritten):
    rayjob = counted(entrypoint=entrypoint)
    assert RayJob(rayjob).set_training_workers(training_of(rayjob), 12) == {"spec": {"entrypoint": rewritten}}


def test_a_job_that_reads_the_cluster_has_nothing_to_rewrite():
    rayjob = counted({ann.WORKERS_FROM: "cluster"})
    assert RayJob(rayjob).set_training_workers(training_of(rayjob), 5) == {}
