"""RayJob manifest -> features: quantities, KubeRay's replica rule, groups, every KubeRay sample."""

from __future__ import annotations

import pytest

from rayjob_advisor import contract
from rayjob_advisor.advice import features
from rayjob_advisor.errors import AnnotationError, UnpredictableJob
from rayjob_advisor.kuberay.groups import DEFAULT_MAX_REPLICAS
from rayjob_advisor_testkit.rayjobs import counted, env, make_rayjob, sample_rayjobs, worker_group


def extract(rayjob: dict) -> features.Features:
    metadata = rayjob["metadata"]
    return features.features_from_rayjob(rayjob, contract.parse_inputs(metadata.get("annotations")))


@pytest.mark.parametrize(
    ("quantity", "cpus"),
    [("500m", 0.5), ("2", 2.0), (2, 2.0), ("1.5", 1.5), ("0.25", 0.25), ("1e3", 1000.0), ("100m", 0.1)],
)
def test_cpu_quantities(quantity, cpus):
    job = extract(make_rayjob(groups=[worker_group(resources={"requests": {"cpu": quantity}})]))
    assert job.cpus_per_worker == pytest.approx(cpus)


@pytest.mark.parametrize(
    ("quantity", "size"), [("4Gi", 4 * 2**30), ("8G", 8 * 10**9), ("1.5Gi", 1.5 * 2**30), ("512Mi", 2**29)]
)
def test_memory_quantities(quantity, size):
    job = extract(make_rayjob(groups=[worker_group(resources={"limits": {"memory": quantity}})]))
    assert job.memory_bytes_per_worker == size


@pytest.mark.parametrize("quantity", ["two", "", "-1", "1..5", "4GiB"])
def test_bad_quantities_name_the_resource(quantity):
    # The API server's schema rejects these; local files given to the CLI are not checked by it.
    rayjob = make_rayjob(groups=[worker_group(resources={"requests": {"cpu": "1"}})])
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": quantity}
    }
    with pytest.raises(UnpredictableJob, match=r"workerGroupSpecs\[0\].*'cpu'"):
        extract(rayjob)


def test_limits_stand_in_for_missing_requests_and_requests_win():
    resources = {"limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}, "requests": {"cpu": "3"}}
    job = extract(make_rayjob(groups=[worker_group(resources=resources)]))
    assert (job.cpus_per_worker, job.gpus_per_worker, job.memory_bytes_per_worker) == (3.0, 2.0, 8 * 2**30)


def test_any_resource_ending_in_gpu_is_a_gpu_and_tpus_are_other_accelerators():
    resources = {"limits": {"amd.com/gpu": "1", "nvidia.com/gpu": "1", "google.com/tpu": "4"}}
    job = extract(make_rayjob(groups=[worker_group(resources=resources)]))
    assert job.gpus_per_worker == 2.0
    assert job.scale_group.accelerators == {"google.com/tpu": 4.0}
    assert job.cpus_per_worker is None


@pytest.mark.parametrize(
    ("fields", "workers"),
    [
        ({"replicas": 3, "minReplicas": 1, "maxReplicas": 5}, 3),
        ({"replicas": 9, "minReplicas": 1, "maxReplicas": 5}, 5),  # clamped to max
        ({"replicas": 0, "minReplicas": 2, "maxReplicas": 5}, 2),  # raised to min
        ({"replicas": 3, "minReplicas": 6, "maxReplicas": 4}, 4),  # min > max: KubeRay uses max
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 5, "numOfHosts": 4}, 8),  # x hosts
    ],
)
def test_kuberay_replica_rule(fields, workers):
    assert extract(make_rayjob(groups=[worker_group(**fields)])).workers == workers


def test_crd_defaults_apply_when_replicas_are_unset():
    group = worker_group(minReplicas=3)
    del group["replicas"]
    del group["maxReplicas"]
    job = extract(make_rayjob(groups=[group]))
    assert job.workers == 3
    assert job.scale_group.max_replicas == DEFAULT_MAX_REPLICAS


def test_scale_group_defaults_to_the_gpu_group_else_the_largest():
    gpu = worker_group("gpu", resources={"limits": {"nvidia.com/gpu": "1"}}, replicas=1)
    big = worker_group("big", replicas=6)
    small = worker_group("small", replicas=2)
    assert extract(make_rayjob(groups=[big, gpu])).scale_group.name == "gpu"
    assert extract(make_rayjob(groups=[small, big])).scale_group.name == "big"


def test_scale_group_annotation_selects_and_unknown_names_are_reported():
    groups = [worker_group("a", replicas=2), worker_group("b", replicas=4)]
    picked = extract(make_rayjob(annotations={contract.SCALE_GROUP: "a"}, groups=groups))
    assert (picked.scale_group.name, picked.workers) == ("a", 2)
    with pytest.raises(AnnotationError, match=r"no worker group of that name.*'a', 'b'"):
        extract(make_rayjob(annotations={contract.SCALE_GROUP: "c"}, groups=groups))


def test_suspended_or_empty_scale_group_cannot_be_predicted():
    with pytest.raises(UnpredictableJob, match="is suspended"):
        extract(make_rayjob(groups=[worker_group(suspend=True)]))
    with pytest.raises(UnpredictableJob, match="has 0 replicas"):
        extract(make_rayjob(groups=[worker_group(replicas=0, minReplicas=0)]))


def test_with_replicas_changes_only_the_scaled_group():
    job = extract(make_rayjob(groups=[worker_group(replicas=2, numOfHosts=2)]))
    bigger = job.with_replicas(5)
    assert (bigger.workers, bigger.scale_group.replicas, job.workers) == (10, 5, 4)


GPU = {"limits": {"cpu": "4", "nvidia.com/gpu": "1"}, "requests": {"cpu": "4", "nvidia.com/gpu": "1"}}


def gpu_job(resources=GPU, runtime_env="env_vars: {NUM_WORKERS: '2'}", notes=None) -> features.Features:
    """Two pods of ``resources``, the count in ``runtime_env``."""
    spec = {"runtimeEnvYAML": runtime_env} if runtime_env else {}
    return extract(make_rayjob(annotations=notes, groups=[worker_group(resources=resources)], **spec))


def test_with_gpus_changes_the_scaled_groups_gpus_per_worker():
    job = gpu_job()
    assert job.scale_group.gpu_resources == ("nvidia.com/gpu",) and job.gpus_resizable
    more = job.with_replicas(3).with_gpus(4.0)
    assert (more.gpus_per_worker, more.scale_group.gpus, more.workers, job.gpus_per_worker) == (4.0, 4.0, 3, 1.0)


@pytest.mark.parametrize(
    ("job", "why"),
    [
        (gpu_job(resources={"limits": {"cpu": "4"}}), "a CPU-only group"),
        (gpu_job(resources={"limits": {"nvidia.com/gpu": "0"}}), "no GPU"),
        (gpu_job(resources={"limits": {"nvidia.com/gpu": "1", "amd.com/gpu": "1"}}), "two GPU resources, one sum"),
        (gpu_job(runtime_env="env_vars: {NUM_WORKERS: '4'}"), "two Ray Train workers share each pod's GPUs"),
        (gpu_job(notes={contract.WORKERS_FROM: "cluster"}), "the script may count the cluster's GPUs"),
        (gpu_job().model_copy(update={"resize_blocker": "the autoscaler owns it"}), "a group we may not resize"),
    ],
)
def test_gpus_per_worker_stay_where_changing_them_is_not_well_defined(job, why):
    assert not job.gpus_resizable, why


def test_spare_pods_and_unknown_counts_leave_gpus_resizable():
    # a spare pod's worker has the pod's GPUs; an unknown count is planned (enforce then declines: training.blocker)
    assert gpu_job(runtime_env="env_vars: {NUM_WORKERS: '1'}").gpus_resizable
    assert gpu_job(runtime_env=None).gpus_resizable


def test_autoscaling_jobs_are_predicted_but_not_resizable():
    job = extract(make_rayjob())
    rayjob = make_rayjob()
    rayjob["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    assert job.resize_blocker is None
    assert "autoscaler owns the replicas" in extract(rayjob).resize_blocker


# Every KubeRay sample: features, or the specific reason it cannot be predicted.
EXPECTED_SAMPLES = {
    "agent-sandbox/ray-cluster.yaml": (2, "sandbox-executor-workers"),
    "pytorch-mnist/ray-job.pytorch-mnist.yaml": (2, "small-group"),
    "pytorch-resnet-image-classifier/ray-job.pytorch-image-classifier.yaml": (4, "gpu-group"),
    "pytorch-text-classifier/ray-job.pytorch-distributed-training.yaml": (1, None),
    "ray-data-image-resize/ray-data-image-resize-gcsfusecsi-job.yaml": (3, "worker-group"),
    "ray-data-image-resize/ray-job.image-resize.yaml": (4, "small-group"),
    "ray-job.batch-inference.yaml": (1, None),
    "ray-job.interactive-mode.yaml": (1, "default-group"),
    "ray-job.sandbox.yaml": (2, "worker-group"),
    "ray-job.tpu-jax.yaml": (1, "tpu-workers"),
    "ray-job.tpu-v6e-singlehost.yaml": (1, "tpu-group"),
    "ray-job.tpu-v6e-16-multihost.yaml": (4, "tpu-group"),
    "ray-job.tpu-v6e-256-multihost.yaml": (64, "tpu-group"),
    "ray-job.use-existing-raycluster.yaml": "spec.clusterSelector runs the job on an existing RayCluster",
    "ray-job.volcano-scheduler-queue.yaml": (2, "small-group"),
}
# How the samples set their Ray Train worker count; every other one does not say.
TRAINING_COUNTS = {
    "pytorch-mnist/ray-job.pytorch-mnist.yaml": ("env:NUM_WORKERS", "runtimeEnvYAML", 2),
    "pytorch-resnet-image-classifier/ray-job.pytorch-image-classifier.yaml": ("env:NUM_WORKERS", "head env", 4),
}
SAMPLES = sample_rayjobs()


def test_all_25_samples_are_covered():
    assert len(SAMPLES) == 25


@pytest.mark.parametrize(("name", "rayjob"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_every_kuberay_sample_yields_features_or_a_reason(name, rayjob):
    expected = EXPECTED_SAMPLES.get(name, (1, "small-group"))
    if isinstance(expected, str):
        with pytest.raises(UnpredictableJob, match=expected):
            extract(rayjob)
        return
    job = extract(rayjob)
    workers, group = expected
    assert job.workers == workers
    assert (job.scale_group.name if job.scale_group else None) == group
    if group is None:
        assert "head pod" in job.resize_blocker
    training = TRAINING_COUNTS.get(name, ("unknown", None, None))
    assert (job.training.method, job.training.place, job.training.count) == training


# The Ray Train worker count: where a job sets it, and how it goes with the pods.


@pytest.mark.parametrize(
    ("rayjob", "method", "place"),
    [
        (counted(runtime_env="pip: [torch]\nenv_vars:\n  NUM_WORKERS: '2'\n"), "env:NUM_WORKERS", "runtimeEnvYAML"),
        (counted(head_env=env(OTHER="x", NUM_WORKERS="2")), "env:NUM_WORKERS", "head env"),
        (counted(submitter_env=env(NUM_WORKERS="2")), "env:NUM_WORKERS", "submitter env"),
        (counted(entrypoint="python train.py --num-workers 2 --lr 0.1"), "arg:--num-workers", "entrypoint"),
        (counted(entrypoint="python train.py --num-workers=2"), "arg:--num-workers", "entrypoint"),
        (counted(entrypoint="python train.py --num_workers 2"), "arg:--num_workers", "entrypoint"),
        (counted(entrypoint="python train.py --workers '2'"), "arg:--workers", "entrypoint"),
        (counted(entrypoint="python train.py\n  --workers\n  2"), "arg:--workers", "entrypoint"),
    ],
)
def test_the_training_count_is_found_in_each_place_and_syntax(rayjob, method, place):
    job = extract(rayjob)
    assert (job.training.method, job.training.place, job.training.count, job.workers) == (method, place, 2, 2)
    assert job.training.blocker is None


def test_workers_env_and_workers_arg_name_the_variable_or_flag():
    by_env = counted({contract.WORKERS_ENV: "WORLD"}, head_env=env(NUM_WORKERS="9", WORLD="2"))
    assert (extract(by_env).training.method, extract(by_env).training.count) == ("env:WORLD", 2)
    by_arg = counted({contract.WORKERS_ARG: "-n"}, entrypoint="python train.py -n 2 --workers 9")
    assert (extract(by_arg).training.method, extract(by_arg).training.span) == ("arg:-n", (19, 20))
    with pytest.raises(AnnotationError, match="workers-env='WORLD': not set in runtimeEnvYAML"):
        extract(counted({contract.WORKERS_ENV: "WORLD"}, head_env=env(NUM_WORKERS="2")))
    with pytest.raises(AnnotationError, match="workers-arg='-n': not set in the entrypoint"):
        extract(counted({contract.WORKERS_ARG: "-n"}, entrypoint="python train.py --num-workers 2"))


def test_runtime_env_wins_over_the_head_and_the_last_flag_wins():
    both = counted(runtime_env="env_vars: {NUM_WORKERS: '2'}", head_env=env(NUM_WORKERS="9"))
    assert extract(both).training.place == "runtimeEnvYAML"
    entrypoint = "python train.py --workers 9 --workers=2"
    twice = extract(counted(entrypoint=entrypoint))
    assert (twice.training.count, twice.training.span) == (2, (len(entrypoint) - 1, len(entrypoint)))


@pytest.mark.parametrize(
    ("runtime_env", "message"),
    [
        ("env_vars: {NUM_WORKERS: '2'", r"spec.runtimeEnvYAML is not valid YAML at line 1: expected ',' or '}'"),
        ("- pip\n- torch", "spec.runtimeEnvYAML must be a mapping .* not a list"),
        ("env_vars: [NUM_WORKERS]", "env_vars must be a mapping"),
    ],
)
def test_a_malformed_runtime_env_is_a_clear_input_error(runtime_env, message):
    with pytest.raises(UnpredictableJob, match=message):
        extract(counted(runtime_env=runtime_env))


def test_a_job_that_reads_the_cluster_or_says_nothing():
    cluster = extract(counted({contract.WORKERS_FROM: "cluster"}, runtime_env="env_vars: {NUM_WORKERS: '1'}"))
    assert (cluster.training.method, cluster.training.blocker, cluster.workers) == ("cluster", None, 2)
    silent = extract(counted())
    assert (silent.training.method, silent.workers) == ("unknown", 2)  # one per pod: the best guess
    assert all(
        key in silent.training.blocker for key in (contract.WORKERS_ENV, contract.WORKERS_ARG, contract.WORKERS_FROM)
    )


@pytest.mark.parametrize(
    ("rayjob", "problem"),
    [
        (
            counted(head_env=[{"name": "NUM_WORKERS", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]),
            "valueFrom",
        ),
        (counted(entrypoint="python train.py --num-workers $N"), "'$N' in entrypoint is not a positive whole number"),
        (counted(runtime_env="env_vars: {NUM_WORKERS: '0'}"), "is not a positive whole number"),
        (counted(runtime_env="env_vars: {NUM_WORKERS: '3'}"), "on 2 pods is neither at most one worker per pod"),
        (
            counted(head_env=env(NUM_WORKERS="2"), entrypoint="python t.py --workers 2"),
            "sets NUM_WORKERS in head env and --workers in entrypoint",
        ),
    ],
)
def test_counts_that_cannot_be_rewritten_block_resizing_and_say_why(rayjob, problem):
    assert problem in extract(rayjob).training.blocker


@pytest.mark.parametrize(
    ("count", "group", "resized", "expected"),
    [
        (2, {"replicas": 2}, 5, 5),  # one worker per pod
        (3, {"replicas": 4}, 6, 5),  # a spare pod stays spare (Ray's NUM_WORKERS <= replicas)
        (4, {"replicas": 2}, 3, 6),  # two workers per pod
        (4, {"replicas": 2, "numOfHosts": 2}, 3, 6),  # one per host
    ],
)
def test_with_replicas_keeps_the_jobs_relation_of_workers_to_pods(count, group, resized, expected):
    job = extract(counted(runtime_env=f"env_vars: {{NUM_WORKERS: '{count}'}}", **group))
    assert job.workers == count and job.with_replicas(resized).workers == expected


def test_spare_pods_raise_the_fewest_replicas_that_leave_a_worker():
    job = extract(counted(runtime_env="env_vars: {NUM_WORKERS: '1'}", replicas=3, minReplicas=1, maxReplicas=8))
    assert job.replica_range() == (3, 8) and job.with_replicas(3).workers == 1


def batch_job(notes: dict[str, str], workers: int = 4) -> features.Features:
    """One Ray Train worker per pod (NUM_WORKERS in the head's env), with the given batch annotations."""
    return extract(counted(notes, head_env=env(NUM_WORKERS=str(workers)), replicas=workers))


def test_a_per_worker_batch_gives_the_global_one_and_follows_a_resize():
    job = batch_job({contract.BATCH_SIZE_PER_WORKER: "32"})
    assert (job.batch_size, job.batch_size_per_worker, job.batch_held) == (128, 32, "per-worker")
    eight = job.with_replicas(8)
    assert (eight.workers, eight.batch_size, eight.batch_size_per_worker) == (8, 256, 32)
    assert job.with_replicas(2).with_replicas(6).batch_size == 6 * 32  # chained resizes keep the per-worker batch


def test_a_global_batch_keeps_its_per_worker_share_unless_it_is_held_global():
    job = batch_job({contract.BATCH_SIZE: "256"})
    assert (job.batch_size, job.batch_size_per_worker, job.batch_held) == (256, 64, "per-worker")
    assert job.with_replicas(2).batch_size == 128
    held = batch_job({contract.BATCH_SIZE: "256", contract.BATCH_SCALING: "global"})
    assert held.batch_held == "global" and held.with_replicas(2).batch_size == 256
    uneven = batch_job({contract.BATCH_SIZE: "100"}, workers=3)
    assert uneven.batch_size_per_worker == pytest.approx(33.333) and uneven.with_replicas(6).batch_size == 200


def test_no_batch_stays_unknown_at_every_size():
    job = batch_job({})
    assert (job.batch_size, job.batch_size_per_worker, job.batch_held) == (None, None, "per-worker")
    assert job.with_replicas(8).batch_size is None


def test_a_head_only_job_gets_its_batch_and_placement_too():
    rayjob = make_rayjob(annotations={contract.BATCH_SIZE_PER_WORKER: "16", contract.PLACEMENT: "packed"}, groups=[])
    job = extract(rayjob)
    assert (job.batch_size, job.batch_size_per_worker, job.placement) == (16, 16, "packed")


OWN_PODS = {"matchLabels": {"ray.io/group": "workers"}}
MINE = {"matchLabels": {"app": "trainer"}}  # the template's own label
OTHERS = {"matchLabels": {"app": "database"}}
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def required(kind: str, selector: dict | None, key: str = HOST) -> dict:
    term = {"topologyKey": key, **({"labelSelector": selector} if selector is not None else {})}
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def spread(selector: dict, skew: int = 1, key: str = HOST, when: str = "DoNotSchedule") -> dict:
    constraint = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": selector}
    return {"topologySpreadConstraints": [constraint]}


@pytest.mark.parametrize(
    ("pod", "placement"),
    [
        ({}, None),
        (required("podAntiAffinity", OWN_PODS), "one-per-node"),
        (required("podAntiAffinity", MINE), "one-per-node"),
        (
            required(
                "podAntiAffinity",
                {"matchExpressions": [{"key": "ray.io/node-type", "operator": "In", "values": ["worker"]}]},
            ),
            "one-per-node",
        ),
        (required("podAntiAffinity", {"matchExpressions": [{"key": "app", "operator": "Exists"}]}), "one-per-node"),
        (required("podAntiAffinity", {}), "one-per-node"),  # an empty selector selects every pod
        (required("podAntiAffinity", None), None),  # no selector selects none
        (required("podAntiAffinity", OTHERS), None),  # keeps away from other pods, not its own
        (required("podAntiAffinity", {"matchLabels": {"ray.io/group": "other"}}), None),
        (required("podAntiAffinity", OWN_PODS, key=ZONE), None),  # one per zone says nothing of nodes
        (
            required(
                "podAntiAffinity", {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["trainer"]}]}
            ),
            None,
        ),
        (spread(OWN_PODS), "spread"),
        (spread(MINE, when="ScheduleAnyway"), "spread"),
        (spread(OWN_PODS, skew=2), None),
        (spread(OWN_PODS, key=ZONE), None),
        (spread(OTHERS), None),
        (required("podAffinity", OWN_PODS), "packed"),
        (required("podAffinity", OWN_PODS, key=ZONE), None),
        ({**required("podAffinity", OWN_PODS), **spread(OWN_PODS)}, "spread"),  # a required spread wins
        (
            {
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 100, "podAffinityTerm": {"topologyKey": HOST, "labelSelector": OWN_PODS}}
                        ]
                    }
                }
            },
            None,
        ),
    ],
)
def test_placement_hints_from_the_worker_pod_template(pod, placement):
    group = worker_group(replicas=4)
    group["template"]["metadata"] = {"labels": {"app": "trainer"}}
    group["template"]["spec"].update(pod)
    rayjob = make_rayjob(groups=[group])  # validated against the CRD
    assert extract(rayjob).placement == placement


def test_the_placement_annotation_overrides_the_template():
    group = worker_group(replicas=4)
    group["template"]["spec"].update(required("podAntiAffinity", OWN_PODS))
    rayjob = make_rayjob(annotations={contract.PLACEMENT: "packed"}, groups=[group])
    assert extract(rayjob).placement == "packed"
    assert extract(rayjob).with_replicas(2).placement == "packed"


@pytest.mark.parametrize(("name", "rayjob"), sample_rayjobs(), ids=[name for name, _ in sample_rayjobs()])
def test_no_kuberay_sample_hints_a_placement(name, rayjob):
    # None of the samples has a pod (anti-)affinity or a topology spread constraint.
    try:
        job = extract(rayjob)
    except UnpredictableJob:
        return  # spec.clusterSelector: no cluster in the RayJob
    assert job.placement is None
