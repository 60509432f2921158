"""Accelerators: canonical names, where a RayJob says its GPU model, runs per accelerator, fallbacks, comparisons."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import time

import numpy as np
import pytest
import yaml

from rayjob_advisor import contract as ann
from rayjob_advisor.advice import completions, features, planner
from rayjob_advisor.application import Policy, advise
from rayjob_advisor.cli.verbs import main
from rayjob_advisor.errors import AnnotationError, ProfileNotReady
from rayjob_advisor.kube.config import advice_config, load_config
from rayjob_advisor.models import transfer
from rayjob_advisor.models.evaluation import NotEnoughData
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.transfer import TransferredModel, better_model
from rayjob_advisor.observations import (
    CSV_COLUMNS,
    Observation,
    choose_accelerator,
    measured_accelerators,
    read_observations,
    runs_on,
    write_observations,
)
from rayjob_advisor.profiles import history
from rayjob_advisor.profiles.codec import observation_to_k8s, observations_from_k8s
from rayjob_advisor.profiles.profile import Profile
from rayjob_advisor.profiles.refitter import Refitter
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit.emulator import ApiError
from rayjob_advisor_testkit.profiles import fitted_store, profile_manifest, shipped_runs, small_profile_runs
from rayjob_advisor_testkit.rayjobs import make_rayjob, sample_rayjobs, worker_group
from rayjob_advisor_testkit.resources import AdvisorEmulator

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
GPU = {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("NVIDIA-A100-SXM4-80GB", "a100"),  # nvidia.com/gpu.product
        ("NVIDIA-A100-PCIE-40GB", "a100"),
        ("nvidia-tesla-t4", "t4"),  # cloud.google.com/gke-accelerator
        ("nvidia-a100-80gb", "a100"),
        ("nvidia-h100-mega-80gb", "h100"),
        ("Tesla-V100-SXM2-16GB", "v100"),
        ("NVIDIA-H100-80GB-HBM3", "h100"),
        ("nvidia-l4", "l4"),
        ("a10g", "a10g"),  # karpenter.k8s.aws/instance-gpu-name
        ("NVIDIA-A10G", "a10g"),
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-GeForce-RTX-2080-Ti", "rtx2080ti"),
        ("RTX 2080Ti", "rtx2080ti"),
        ("NVIDIA-RTX-A6000", "rtxa6000"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "a100-mig-1g.5gb"),  # a MIG slice is not a whole A100
        ("AMD_Instinct_MI300X_OAM", "mi300x"),  # amd.com/gpu.product-name
        ("NVIDIA A100-SXM4-40GB (400W)", "a100"),  # MLPerf's system descriptions: a power limit
        ("NVIDIA Blackwell GPU GB200", "gb200"),
        ("NVIDIA Blackwell Ultra GPU (GB300)", "gb300"),
        ("Max_1550", "max1550"),  # gpu.intel.com/product
        ("tpu-v6e-slice", "tpu-v6e"),  # cloud.google.com/gke-tpu-accelerator
        ("tpu-v5-lite-podslice", "tpu-v5e"),
        ("  A100 ", "a100"),
        ("My Custom_Accel", "my-custom-accel"),  # no model number: lower-cased, normalised
    ],
)
def test_accelerator_names_are_canonical(text, canonical):
    assert ann.canonical_accelerator(text) == canonical


def test_the_accelerator_annotation_is_parsed_canonical_and_checked():
    assert ann.parse_inputs({ann.ACCELERATOR: "NVIDIA-H100-80GB-HBM3"}).accelerator == "h100"
    assert ann.parse_inputs({}).accelerator is None
    with pytest.raises(AnnotationError, match=r"rayjob-advisor.io/accelerator=' ': .*must not be empty"):
        ann.parse_inputs({ann.ACCELERATOR: " "})


def gpu_job(notes: dict[str, str] | None = None, **template: object) -> dict:
    """A RayJob whose worker group requests a GPU per pod, its pod template spec updated with ``template``."""
    group = worker_group(resources=GPU)
    group["template"]["spec"].update(copy.deepcopy(template))
    return make_rayjob(annotations=notes, groups=[group])


def features_of(rayjob: dict) -> features.Features:
    return features.features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"].get("annotations")))


def accelerator_of(rayjob: dict) -> str | None:
    return features_of(rayjob).accelerator


def required(*terms: list[dict]) -> dict:
    """A required node affinity of ``terms`` (each a list of match expressions)."""
    selector_terms = [{"matchExpressions": expressions} for expressions in terms]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": selector_terms}}}


def holds(label: str, *values: str, operator: str = "In") -> dict:
    return {"key": label, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}, "a100"),
        ({"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}}, "t4"),
        ({"nodeSelector": {"karpenter.k8s.aws/instance-gpu-name": "h100"}}, "h100"),
        ({"nodeSelector": {"eks.amazonaws.com/instance-gpu-name": "l4"}}, "l4"),
        ({"nodeSelector": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}}, "mi300x"),
        ({"affinity": required([holds("nvidia.com/gpu.product", "Tesla-V100-SXM2-16GB")])}, "v100"),
        # both values are A100s, and every ORed term says so
        (
            {
                "affinity": required(
                    [holds("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB")],
                    [holds("cloud.google.com/gke-accelerator", "nvidia-a100-80gb")],
                )
            },
            "a100",
        ),
        (
            {"affinity": required([holds("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3")])},
            None,
        ),
        ({"affinity": required([holds("nvidia.com/gpu.product", "Tesla-T4")], [holds("zone", "a")])}, None),
        ({"affinity": required([holds("nvidia.com/gpu.product", "Tesla-T4", operator="NotIn")])}, None),
        ({"nodeSelector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}}, None),  # no guessing
        ({}, None),
    ],
)
def test_the_accelerator_comes_from_the_scaled_groups_node_selector_or_required_affinity(template, expected):
    assert accelerator_of(gpu_job(**template)) == expected


def test_the_annotation_says_it_when_the_pod_template_does_not_and_wins_when_both_do():
    assert accelerator_of(gpu_job({ann.ACCELERATOR: "nvidia-tesla-v100"})) == "v100"
    selected = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}
    assert accelerator_of(gpu_job({ann.ACCELERATOR: "h100"}, **selected)) == "h100"


def test_the_kuberay_gpu_sample_selects_t4s():
    rayjob = dict(sample_rayjobs())["ray-job.batch-inference.yaml"]
    assert accelerator_of(rayjob) == "t4"


def test_runs_name_their_accelerator_in_a_csv_column_after_nodes(tmp_path):
    assert CSV_COLUMNS[CSV_COLUMNS.index("nodes") + 1] == "accelerator"
    path = tmp_path / "runs.csv"
    path.write_text("dataset_size,workers,accelerator,execution_seconds\n10,1,NVIDIA-A100-SXM4-80GB,5\n10,1,,6\n")
    runs, _ = read_observations(path)
    assert [run.accelerator for run in runs] == ["a100", None]
    write_observations(path, runs)
    assert read_observations(path)[0] == runs
    old = tmp_path / "old.csv"
    old.write_text("dataset_size,workers,execution_seconds\n10,1,5\n")  # files from before the column
    assert read_observations(old)[0][0].accelerator is None


def test_a_runtime_profile_with_accelerators_validates_against_the_crd_and_round_trips():
    runs = [run.model_copy(update={"accelerator": "t4"}) for run in small_profile_runs()]
    manifest = profile_manifest(runs)
    assert {item["accelerator"] for item in manifest["spec"]["observations"]} == {"t4"}
    profile = Profile("default", "synthetic", "synthetic", runs)
    profile.fit()
    with AdvisorEmulator() as api:
        api.create(manifest)
        api.patch_status("runtimeprofiles", "default", "synthetic", {"model": profile.model_status()})
        stored = api.get("runtimeprofiles", "default", "synthetic")
        bad = copy.deepcopy(manifest)
        bad["metadata"]["name"] = "bad"
        bad["spec"]["observations"][0]["accelerator"] = ""
        with pytest.raises(ApiError, match="accelerator"):
            api.create(bad)
    assert observations_from_k8s("synthetic", stored["spec"]["observations"]) == runs
    assert stored["status"]["model"]["accelerator"] == "t4"


def on(runs: list[Observation], accelerator: str | None, slower: float = 1.0) -> list[Observation]:
    return [
        run.model_copy(update={"accelerator": accelerator, "execution_seconds": run.execution_seconds * slower})
        for run in runs
    ]


def test_runs_that_name_no_accelerator_belong_to_every_accelerator():
    runs = [*on(small_profile_runs(), "t4"), *on(small_profile_runs()[:4], None), *on(small_profile_runs()[:8], "a100")]
    assert measured_accelerators(runs) == ("t4", "a100")
    assert len(runs_on(runs, "a100")) == 12 and len(runs_on(runs, "t4")) == 36
    assert choose_accelerator(measured_accelerators(runs), "a100").assumed is None
    assert choose_accelerator((), "a100").used is None  # runs naming none fit any accelerator: nothing assumed


def job_on(accelerator: str | None, workload: str = "synthetic", **notes: str) -> dict:
    annotations = {ann.WORKLOAD: workload, ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "128", **notes}
    if accelerator:
        annotations[ann.ACCELERATOR] = accelerator
    return gpu_job(annotations)


@pytest.fixture(scope="module")
def t4_store() -> ProfileStore:
    return fitted_store(on(small_profile_runs(), "t4"))


@pytest.mark.parametrize(
    ("accelerator", "says"),
    [(None, "does not say which accelerator"), ("h100", "has no runs on h100 (measured on t4)")],
)
def test_a_job_on_an_unknown_or_unmeasured_accelerator_falls_back_and_says_so(t4_store, accelerator, says):
    advice = advise(job_on(accelerator), t4_store, policy=Policy(), may_resize=True, now=NOW)
    prediction = json.loads(advice.patch["metadata"]["annotations"][ann.PREDICTION])
    assert prediction["assumed"]["accelerator"] == "t4" and prediction["features"]["accelerator"] == accelerator
    (message,) = [m for m in advice.messages if m.reason == "OtherAccelerator"]
    assert message.warning and message.event and says in message.text and "default/synthetic" in message.text
    assert any(says in warning for warning in advice.warnings)  # the admission warning kubectl prints


def test_a_job_on_a_measured_accelerator_and_a_profile_without_accelerators_assume_nothing(t4_store):
    advice = advise(job_on("Tesla-T4"), t4_store, policy=Policy(), may_resize=True, now=NOW)
    assert "accelerator" not in json.loads(advice.patch["metadata"]["annotations"][ann.PREDICTION])["assumed"]
    assert advice.messages == ()
    advice = advise(job_on("a100"), fitted_store(small_profile_runs()), policy=Policy(), may_resize=True, now=NOW)
    assert "accelerator" not in json.loads(advice.patch["metadata"]["annotations"][ann.PREDICTION])["assumed"]
    assert advice.messages == ()


def test_another_accelerator_is_fitted_once_a_job_asks_and_refitted_only_when_its_runs_or_source_change():
    store = ProfileStore(shipped=False)
    profile = store.put(
        "default", "p", "synthetic", [*on(small_profile_runs(), "t4"), *on(small_profile_runs(), "a100", 0.3)], []
    )
    profile.fit()
    assert (profile.accelerator, profile.measured, profile.accelerator_fits) == ("a100", ("a100", "t4"), {})
    assert store.stale() == []
    with pytest.raises(ProfileNotReady, match="being fitted on t4"):
        advise(job_on("t4"), store, policy=Policy(), may_resize=True, now=NOW)
    assert store.stale() == [profile]  # the refitter fits it next, off the request path
    profile.fit_accelerators()
    assert store.stale() == []
    t4_model = profile.model_for("t4")[0]
    t4 = advise(job_on("t4"), store, policy=Policy(), may_resize=True, now=NOW)
    a100 = advise(job_on("a100"), store, policy=Policy(), may_resize=True, now=NOW)
    assert t4.p50 == pytest.approx(a100.p50 / 0.3, rel=0.1)  # each from its own runs
    learned = on(small_profile_runs()[:1], "a100", 0.3)
    profile = store.put("default", "p", "synthetic", profile.seed, learned)  # a run on a100 only
    profile.fit()
    assert isinstance(t4_model, TransferredModel)  # t4's runs are a100's slowed down: a100's transferred is exact
    refitted = profile.model_for("t4")[0]
    assert isinstance(refitted, TransferredModel) and refitted.source is profile.model  # the main model changed
    profile.fit_accelerators()
    assert profile.model_for("t4")[0] is refitted  # neither t4's runs nor the main model changed: no refit


def test_the_refitter_fits_an_accelerator_a_job_waits_for_without_refitting_the_profile():
    store = ProfileStore(shipped=False)
    runs = [*on(small_profile_runs(), "t4"), *on(small_profile_runs()[::2], "a100", 0.3)]
    profile = store.put("default", "p", "synthetic", runs, [])
    profile.fit()
    assert profile.model_for("a100") == (None, None)  # asked for: due
    published: list[Profile] = []
    refitter = Refitter(store, published.append, interval=0.05)
    refitter.start()
    try:
        deadline = time.monotonic() + 60
        while profile.model_for("a100")[0] is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        refitter.stop()
    model = profile.model_for("a100")[0]
    assert model is not None and model.n_samples_ == 16
    assert (refitter.fits, published, store.stale()) == (0, [], [])  # the profile's own fit was not redone


# A well measured accelerator and a new one: the shipped real T4 runs of Pollux's CIFAR-10 (every other configuration),
# and "a100", a stand-in law on the other configurations: their measured T4 time x 0.3, times workers^0.3 (it gains
# less at 16 GPUs than at 1, as Sia measured an A100 over a V100), with 5 % noise of its own. `python -m
# benchmarks.transfer` measures the same on the real Sia traces (not shipped).
T4_RUNS = shipped_runs("pollux-cifar10")


def on_a100(runs: list[Observation], batch_exponent: float = 0.0, seed: int = 1) -> list[Observation]:
    """``runs`` (measured on T4s) as the stand-in A100 law would have measured them; with a ``batch_exponent``, times
    (per-GPU batch / 256) ** batch_exponent as well, which no factor of the worker count follows."""
    noise = np.exp(np.random.default_rng(seed).normal(0.0, 0.05, len(runs)))
    return [
        run.model_copy(
            update={
                "accelerator": "a100",
                "execution_seconds": run.execution_seconds
                * 0.3
                * run.workers**0.3
                * (run.batch_size / run.workers / 256) ** batch_exponent
                * float(e),
            }
        )
        for run, e in zip(runs, noise, strict=True)
    ]


@pytest.fixture(scope="module")
def two_accelerators() -> tuple[ProfileStore, list[Observation]]:
    """A profile of T4 and A100 runs, less every eighth A100 run held out."""
    a100 = on_a100(T4_RUNS[1::2])
    held_out = a100[::8]
    store = ProfileStore(shipped=False)
    profile = store.put(
        "default", "cifar10", "pollux-cifar10", [*T4_RUNS[::2], *(r for r in a100 if r not in held_out)], []
    )
    profile.fit()
    profile.model_for("a100" if profile.accelerator == "t4" else "t4")
    profile.fit_accelerators()
    return store, held_out


def gpu_run_job(run: Observation, product: str) -> dict:
    """The RayJob of a run: one GPU per pod, the run's workers and batch, on the nodes ``product`` names."""
    notes = {
        ann.WORKLOAD: "pollux-cifar10",
        ann.DATASET_SIZE: str(run.dataset_size),
        ann.BATCH_SIZE: str(run.batch_size),
    }
    group = worker_group(resources=GPU, replicas=run.workers, maxReplicas=64)
    group["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return make_rayjob(annotations=notes, groups=[group])


def test_a_job_selecting_a100s_is_predicted_from_the_a100_runs_not_the_t4_ones(two_accelerators):
    store, held_out = two_accelerators
    assert len(held_out) >= 10
    actual = np.array([run.execution_seconds for run in held_out])

    def predicted(product: str) -> np.ndarray:
        advice = [
            advise(gpu_run_job(run, product), store, policy=Policy(), may_resize=False, now=NOW) for run in held_out
        ]
        assert all(a.error is None and not a.messages for a in advice)
        return np.array([a.p50 for a in advice])

    own = np.abs(predicted("NVIDIA-A100-SXM4-40GB") / actual - 1)
    other = np.abs(predicted("Tesla-T4") / actual - 1)  # the same jobs as if on T4s
    assert np.median(own) < 0.25 and np.median(other) > 0.5 and np.median(other) > 3 * np.median(own)


def write_rayjob(tmp_path, rayjob: dict) -> str:
    path = tmp_path / "rayjob.yaml"
    path.write_text(yaml.safe_dump(rayjob))
    return str(path)


@pytest.fixture(scope="module")
def two_accelerator_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("accelerators") / "runs.csv"
    gpu_runs = [run.model_copy(update={"gpus_per_worker": 1}) for run in small_profile_runs()]
    write_observations(path, [*on(gpu_runs, "v100"), *on(gpu_runs, "a100", 0.4)])
    return path


def test_predict_compares_accelerators_priced_per_accelerator(capsys, tmp_path, two_accelerator_csv, monkeypatch):
    monkeypatch.setenv("RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES", "A100=4,v100=1")
    rayjob = job_on("v100", **{ann.DEADLINE: "1h"})
    argv = ["predict", "-f", write_rayjob(tmp_path, rayjob), "--data", str(two_accelerator_csv)]
    assert main([*argv, "--accelerators", "a100,NVIDIA-H100-80GB-HBM3,Tesla-V100-SXM2-16GB", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = document["accelerators"]["what_if"]
    assert {row["accelerator"] for row in rows} == {"a100", "v100"}
    assert "no runs on h100 (measured on a100, v100)" in document["accelerators"]["missing"]["h100"]
    by = {(row["accelerator"], row["replicas"]): row for row in rows}
    replicas = sorted({r for _, r in by})
    assert len(by) == len(rows) == 2 * len(replicas) and len(replicas) > 1
    for count in replicas:
        a100, v100 = by["a100", count], by["v100", count]
        assert a100["p50"] == pytest.approx(0.4 * v100["p50"], rel=0.15)  # each from its own runs
        # cost: the pods' CPU and GPU hours at each accelerator's price, over start-up and the median runtime
        gpu_share = {name: 4 * 0.05 + price for name, price in (("a100", 4.0), ("v100", 1.0))}
        assert a100["cost"] / v100["cost"] == pytest.approx(
            gpu_share["a100"] / gpu_share["v100"] * a100["p50"] / v100["p50"], rel=1e-6
        )
        assert all(row["meets_deadline"] is (row["upper"] <= 3600) for row in (a100, v100))
    assert document["prediction"]["assumed"].get("accelerator") is None  # the job's own accelerator was measured
    assert main([*argv, "--accelerators", "a100,h100"]) == 0
    table = capsys.readouterr().out
    assert "what if on other accelerators" in table and "h100         no rows: the profile has no runs on h100" in table
    assert sum(line.startswith("a100 ") for line in table.splitlines()) == len(replicas)


def test_predict_shows_the_assumed_accelerator_and_warns(capsys, tmp_path, two_accelerator_csv):
    argv = ["predict", "-f", write_rayjob(tmp_path, job_on("l4")), "--data", str(two_accelerator_csv)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "assumed: " in captured.out and "accelerator=a100" in captured.out
    assert "warning: profile synthetic has no runs on l4 (measured on a100, v100)" in captured.err


def test_fit_and_evaluate_use_one_accelerators_runs(capsys, two_accelerator_csv):
    assert main(["fit", "--data", str(two_accelerator_csv), "--format", "json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert (document["accelerator"], document["n_samples"]) == ("a100", 32)  # the most measured (a tie: by name)
    assert "runs of a100, v100: using those on a100 (--accelerator)" in captured.err
    assert main(["fit", "--data", str(two_accelerator_csv), "--accelerator", "Tesla-V100-PCIE-32GB"]) == 0
    assert "accelerator: v100" in capsys.readouterr().out
    assert main(["evaluate", "--data", str(two_accelerator_csv), "--accelerator", "l4"]) == 2
    assert "--accelerator l4: the data has no runs on it (measured on a100, v100)" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["", " , "])
def test_predict_rejects_an_empty_accelerator_list(capsys, tmp_path, value):
    with pytest.raises(SystemExit):
        main(["predict", "-f", write_rayjob(tmp_path, job_on(None)), "--accelerators", value])
    assert "expected accelerator names" in capsys.readouterr().err


def test_a_gpu_hour_is_priced_per_accelerator_with_a_default():
    prices = advice_config({"RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES": "NVIDIA-A100-SXM4-80GB=4, t4=0.5"}).prices
    assert prices.accelerator_gpu_hour == {"a100": 4.0, "t4": 0.5} and prices.gpu_hour == 2.5
    job = features_of(job_on("a100"))
    assert prices.worker_hour(job) == pytest.approx(4 * 0.05 + 4.0)
    assert prices.worker_hour(job.model_copy(update={"accelerator": "h100"})) == pytest.approx(4 * 0.05 + 2.5)
    assert planner.Prices().worker_hour(job) == pytest.approx(4 * 0.05 + 2.5)
    assert load_config({"accelerator_gpu_hour_prices": "a100=3"}).prices.accelerator_gpu_hour == {"a100": 3.0}
    with pytest.raises(ValueError, match="expected ACCELERATOR=PRICE pairs"):
        advice_config({"RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES": "a100:3"})


def test_a_finished_job_teaches_a_run_on_its_accelerator_kept_apart_from_other_accelerators():
    rayjob = job_on(None, **{ann.ACCELERATOR: "NVIDIA-A100-SXM4-80GB"})
    rayjob["metadata"].update(uid="u-1", creationTimestamp="2026-12-02T10:00:00Z")
    rayjob["status"] = {
        "jobDeploymentStatus": "Complete",
        "jobStatus": "SUCCEEDED",
        "rayJobInfo": {"startTime": "2026-12-02T10:01:30Z", "endTime": "2026-12-02T10:11:30Z"},
    }
    run = completions.completion(rayjob, features_of(rayjob)).observation
    assert run is not None and run.accelerator == "a100"
    item = observation_to_k8s(run)
    assert item["accelerator"] == "a100"
    learned = history.summarise([item, {**item, "accelerator": "v100"}, item])
    assert sorted((s["configuration"]["accelerator"], s["count"]) for s in learned.summaries) == [
        ("a100", 2), ("v100", 1),
    ]  # fmt: skip


# A new accelerator measured a few times (models/transfer.py): every T4 run, and 5 A100 runs drawn seeded; the other
# A100 runs are held out.
@pytest.fixture(scope="module")
def t4_and_a100() -> tuple[list[Observation], list[Observation], RuntimeModel]:
    t4 = T4_RUNS[::2]
    return t4, on_a100(T4_RUNS[1::2]), RuntimeModel().fit(t4)


def few_and_held_out(new: list[Observation], seed: int, k: int = 5) -> tuple[list[Observation], list[Observation]]:
    order = np.random.default_rng(seed).permutation(len(new))
    return [new[i] for i in order[:k]], [new[i] for i in order[k:]]


def ape(model: RuntimeModel, runs: list[Observation]) -> np.ndarray:
    actual = np.array([run.execution_seconds for run in runs])
    return np.abs(model.predict(runs) / actual - 1.0)


def test_five_runs_on_a_new_accelerator_are_predicted_by_transferring_the_main_ones_shape(t4_and_a100):
    _, a100, main = t4_and_a100
    for seed in range(3):
        few, held_out = few_and_held_out(a100, seed)
        with pytest.raises(NotEnoughData, match="5 runs cannot fit a prediction"):
            RuntimeModel().fit(few)  # too few for a model of its own
        model = better_model(few, "a100", main, "t4")
        assert isinstance(model, TransferredModel)
        assert float(np.mean(ape(model, held_out))) < 0.3  # within 30 % on every draw
        assert float(np.mean(ape(main, held_out))) > 0.5  # the T4 model unchanged (no A100 runs): 2-3x too slow


def test_the_accelerators_own_model_is_kept_once_it_has_many_runs(t4_and_a100):
    """An accelerator whose gain changes with the per-GPU batch, which no factor of the worker count follows."""
    _, _, main = t4_and_a100
    a100 = on_a100(T4_RUNS[1::2], batch_exponent=-0.3)[::3]
    model = better_model(a100, "a100", main, "t4")
    assert type(model) is RuntimeModel and model.n_samples_ == len(a100)
    transferred = TransferredModel(main, "t4").fit(a100)
    assert model.cv_mape_ < transferred.cv_mape_  # the rule: the lower held-out error on the same runs


def test_a_transferred_bound_covers_held_out_runs_at_about_its_confidence_and_agrees_with_its_probabilities(
    t4_and_a100,
):
    _, a100, main = t4_and_a100
    for seed in range(3):
        few, held_out = few_and_held_out(a100, seed)
        model = TransferredModel(main, "t4").fit(few)
        actual = np.array([run.execution_seconds for run in held_out])
        assert 0.8 <= np.mean(actual <= model.predict_upper(held_out, 0.9)) <= 0.99
        jobs = held_out[::40]
        upper = model.predict_upper(jobs, 0.9)
        assert np.all(model.probability_within(jobs, upper) >= 0.9)
        assert np.all(model.probability_within(jobs, upper * 0.98) <= 0.95)
        assert np.all(model.predict(jobs) >= model.floor(jobs)) and np.all(model.trend(jobs) > 0)
        np.testing.assert_allclose(model.startup(jobs), main.startup(jobs))


def linked_runs(accelerator: str, workers: tuple[int, ...], compute: float, sync: float) -> list[Observation]:
    """GPU runs of a step law (no cost per run, as Sia's traces): ``compute`` seconds per sample plus ``sync`` seconds
    per step on the ring's growth, ``2 (W - 1) / W``; 2 workers on 2 nodes (as Sia ran them), more packed 4 to a
    node."""
    return [
        Observation(
            dataset_size=size, epochs=1, batch_size=local * w, workers=w, gpus_per_worker=1.0,
            nodes=2 if w == 2 else -(-w // 4), accelerator=accelerator,
            execution_seconds=-(-size // (local * w)) * (compute * local + sync * 2.0 * (w - 1) / w),
        )
        for w, size, local in itertools.product(workers, (64000, 256000), (32, 64, 128))
    ]  # fmt: skip


def test_a_new_accelerator_on_slower_links_is_priced_its_own_sync():
    """The A100s' links sync in next to no time; the new GPUs compute twice as fast but sync ten times slower, which
    their runs of 2 workers show. A speed factor scales the A100s' sync with the compute: at 16 workers, where the
    step is mostly sync, far too fast (``source``). Priced its own, as measured at 2 workers on the ring's growth,
    the sync holds (``own``); ``blend``, the setting in place, is between the two on every run."""
    main = RuntimeModel().fit(linked_runs("a100", (1, 2, 4, 8, 16), 2e-4, 2e-3))
    new, asked = linked_runs("h100", (1, 2), 1e-4, 2e-2), linked_runs("h100", (16,), 1e-4, 2e-2)
    errors = {}
    for price in ("source", "own", "blend"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(transfer, "SYNC_PRICE", price)
            errors[price] = ape(TransferredModel(main, "a100").fit(new), asked)
    assert errors["source"].max() > 0.5 and errors["own"].max() < 0.01
    assert np.all(errors["blend"] < errors["source"]) and np.all(errors["blend"] > errors["own"])


def test_beyond_the_workers_its_runs_measured_a_transferred_bound_widens_and_its_median_does_not_move(t4_and_a100):
    _, a100, main = t4_and_a100
    model = TransferredModel(main, "t4").fit([run for run in a100 if run.workers <= 2][:8])
    assert model.reach_workers_ == 2
    inside = [run for run in a100 if run.workers == 2][:1]
    beyond = [run for run in a100 if run.workers == 16][:1]
    drifted = [model.predict_upper(runs, 0.9) for runs in (inside, beyond)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transfer, "DRIFT", 0.0)
        undrifted = [model.predict_upper(runs, 0.9) for runs in (inside, beyond)]
        median = model.predict(beyond)
    assert drifted[0] == pytest.approx(undrifted[0])  # none where its runs measured
    assert drifted[1] > 1.05 * undrifted[1]  # log 8 of drift at 16 workers
    assert model.predict(beyond) == pytest.approx(median)
    assert model.probability_within(beyond, undrifted[1]) < 0.9  # the chance is read from the same widened pool


def test_a_job_on_the_new_accelerator_says_it_was_predicted_by_transfer(t4_and_a100, tmp_path, capsys):
    t4, a100, _ = t4_and_a100
    few, held_out = few_and_held_out(a100, 1)
    store = ProfileStore(shipped=False)
    profile = store.put("default", "cifar10", "pollux-cifar10", [*t4, *few], [])
    profile.fit()
    profile.model_for("a100")
    profile.fit_accelerators()
    run = max(held_out, key=lambda run: run.workers)
    advice = advise(gpu_run_job(run, "NVIDIA-A100-SXM4-40GB"), store, policy=Policy(), may_resize=False, now=NOW)
    assumed = json.loads(advice.patch["metadata"]["annotations"][ann.PREDICTION])["assumed"]
    factor = profile.model_for("a100")[0].speed_factor([run])[0]  # type: ignore[union-attr]
    assert assumed["accelerator_transfer"] == f"t4 x {factor:.3g}" and "accelerator" not in assumed
    assert advice.messages == () and advice.p50 == pytest.approx(run.execution_seconds, rel=0.3)
    path = tmp_path / "runs.csv"
    write_observations(path, [*t4, *few])
    assert main(["predict", "-f", write_rayjob(tmp_path, gpu_run_job(run, "A100")), "--data", str(path)]) == 0
    assert f"accelerator_transfer=t4 x {factor:.3g}" in capsys.readouterr().out
