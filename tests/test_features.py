"""RayJob manifest -> features: quantities, KubeRay's replica rule, groups, every KubeRay sample."""

from __future__ import annotations

import pytest

from rayjob_advisor import contract, features
from rayjob_advisor_testkit.rayjobs import make_rayjob, sample_rayjobs, worker_group


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


@pytest.mark.parametrize(("quantity", "size"), [("4Gi", 4 * 2**30), ("8G", 8 * 10**9), ("1.5Gi", 1.5 * 2**30), ("512Mi", 2**29)])
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
    with pytest.raises(features.UnpredictableJob, match=r"workerGroupSpecs\[0\].*'cpu'"):
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
    assert job.scale_group.max_replicas == features.DEFAULT_MAX_REPLICAS


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
    with pytest.raises(contract.AnnotationError, match="no worker group of that name.*'a', 'b'"):
        extract(make_rayjob(annotations={contract.SCALE_GROUP: "c"}, groups=groups))


def test_suspended_or_empty_scale_group_cannot_be_predicted():
    with pytest.raises(features.UnpredictableJob, match="is suspended"):
        extract(make_rayjob(groups=[worker_group(suspend=True)]))
    with pytest.raises(features.UnpredictableJob, match="has 0 replicas"):
        extract(make_rayjob(groups=[worker_group(replicas=0, minReplicas=0)]))


def test_with_replicas_changes_only_the_scaled_group():
    job = extract(make_rayjob(groups=[worker_group(replicas=2, numOfHosts=2)]))
    bigger = job.with_replicas(5)
    assert (bigger.workers, bigger.scale_group.replicas, job.workers) == (10, 5, 4)


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
SAMPLES = sample_rayjobs()


def test_all_25_samples_are_covered():
    assert len(SAMPLES) == 25


@pytest.mark.parametrize(("name", "rayjob"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_every_kuberay_sample_yields_features_or_a_reason(name, rayjob):
    expected = EXPECTED_SAMPLES.get(name, (1, "small-group"))
    if isinstance(expected, str):
        with pytest.raises(features.UnpredictableJob, match=expected):
            extract(rayjob)
        return
    job = extract(rayjob)
    workers, group = expected
    assert job.workers == workers
    assert (job.scale_group.name if job.scale_group else None) == group
    if group is None:
        assert "head pod" in job.resize_blocker
