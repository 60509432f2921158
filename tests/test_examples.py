"""The shipped examples are valid RayJobs and yield features; the Pollux conversion is faithful."""

from __future__ import annotations

import ast
import json
import math
import shutil
import string
import subprocess
import sys
import tomllib
import zlib

import pytest
import yaml

from benchmarks import pollux
from rayjob_advisor import contract
from rayjob_advisor.advice import features
from rayjob_advisor.cli.verbs import main
from rayjob_advisor.profiles.shipped import SHIPPED_DATA
from rayjob_advisor_testkit.advisor import running_advisor
from rayjob_advisor_testkit.paths import POLLUX, REPO, SHARED_VARIABLE
from rayjob_advisor_testkit.profiles import shipped_runs
from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_are_valid_rayjobs_with_features(path):
    (rayjob,) = [d for d in yaml.safe_load_all(path.read_text()) if d.get("kind") == "RayJob"]
    assert_valid_rayjob(rayjob)
    metadata = rayjob["metadata"]
    inputs = contract.parse_inputs(metadata.get("annotations"), metadata.get("labels"))
    job = features.features_from_rayjob(rayjob, inputs)
    assert job.dataset_size and job.workers >= 1


PLACEMENTS = """placement,local_bsz,step_time,sync_time
1,8,0.5,0.0
22,16,0.75,0.25
1111,32,1.25,0.5
4444,64,2.5,1.0
"""


def test_pollux_conversion_follows_the_documented_rules(tmp_path):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "placements.csv").write_text(PLACEMENTS)
    observations = pollux.pollux_observations(tmp_path, "bert")
    expected = [(1, 1, 8, 0.5), (4, 2, 64, 0.75), (4, 4, 128, 1.25), (16, 4, 1024, 2.5)]
    assert [(run.workers, run.nodes, run.batch_size) for run in observations] == [e[:3] for e in expected]
    for run, (*_, step) in zip(observations, expected, strict=True):
        assert run.gpus_per_worker == 1 and run.accelerator == "t4" and run.epochs == 1
        assert run.execution_seconds == pytest.approx(math.ceil(run.dataset_size / run.batch_size) * step)
        assert run.dataset_size in {int(pollux.TRAINING_SET_SIZES["bert"] * f) for f in pollux.SIZE_FRACTIONS}


def test_the_shipped_pollux_profile_follows_the_conversion_rules_row_by_row():
    """Each shipped run names its placement and per-GPU batch (``source``); its workers, nodes, batch, size follow."""
    observations = shipped_runs("pollux-bert")
    assert len(observations) == 540
    for run in observations:
        model, placement, local_batch = (run.source or "").removeprefix("pollux:").split(":")
        workers = sum(int(d) for d in placement)
        assert (model, run.workers, run.nodes, run.gpus_per_worker) == ("bert", workers, len(placement), 1)
        assert run.batch_size == int(local_batch) * workers
        fraction = pollux.SIZE_FRACTIONS[zlib.crc32(f"{placement}:{local_batch}".encode()) % 4]
        assert run.dataset_size == int(pollux.TRAINING_SET_SIZES["bert"] * fraction)
    fractions = {run.dataset_size / pollux.TRAINING_SET_SIZES["bert"] for run in observations}
    assert len(fractions) == 4 and max(fractions) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("sweep", "resume"),
    [
        ("--workload digits-cnn --workers 1,2", ""),
        ("--plan /opt/rayjob-advisor/plan.yaml", "cp /opt/rayjob-advisor/results.csv /tmp/runs.csv && "),
    ],
)
def test_the_kuberay_profiling_rayjob_template_renders_a_valid_rayjob(sweep, resume):
    template = string.Template((REPO / "hack" / "profile-rayjob.yaml").read_text())
    rendered = template.substitute(
        NAME="profile", SWEEP=sweep, RESUME=resume, WHEEL="rayjob_advisor-0.1.0-py3-none-any.whl",
        RAY_VERSION="2.52.0", IMAGE="rayproject/ray:2.52.0-py311", NODES="4", CPUS_PER_NODE="4",
    )  # fmt: skip
    rayjob = yaml.safe_load(rendered)
    assert_valid_rayjob(rayjob)
    assert f"{resume}rayjob-advisor profile --address auto" in rayjob["spec"]["entrypoint"]
    assert sweep in rayjob["spec"]["entrypoint"]


SCRIPT = REPO / "operator" / "rayjob_advisor" / "profiling" / "data_parallel.py"
DIGITS = [p for p in EXAMPLES if "digits-cnn" in p.read_text()]


def rayjob_of(path) -> dict:
    (rayjob,) = [d for d in yaml.safe_load_all(path.read_text()) if d.get("kind") == "RayJob"]
    return rayjob


@pytest.mark.parametrize("path", DIGITS, ids=[p.name for p in DIGITS])
def test_digits_examples_run_the_profiled_script_from_their_configmap(path):
    rayjob = rayjob_of(path)
    annotations, spec = rayjob["metadata"]["annotations"], rayjob["spec"]
    flags = " ".join(
        f"--{key} {annotations[contract.PREFIX + key]}" for key in ("dataset-size", "epochs", "batch-size")
    )
    assert spec["entrypoint"] == f"python /home/ray/samples/train_digits.py {flags}"
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    (mount,) = head["containers"][0]["volumeMounts"]
    (volume,) = [v for v in head["volumes"] if v["name"] == mount["name"]]
    assert mount["mountPath"] == "/home/ray/samples" and volume["configMap"] == {"name": "train-digits"}
    (group,) = spec["rayClusterSpec"]["workerGroupSpecs"]
    images = {c["image"] for c in [*head["containers"], *group["template"]["spec"]["containers"]]}
    assert images == {"rayproject/ray:2.52.0-py311"}  # Python 3.11, as PyTorch 2.13 needs
    environment = yaml.safe_load(spec["runtimeEnvYAML"])
    pin = next(
        d
        for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["profile"]
        if d.startswith("torch")
    )
    assert pin.split()[0] in environment["pip"]["packages"]
    assert environment["env_vars"]["NUM_WORKERS"] == str(group["replicas"])


def test_the_example_script_is_standalone(tmp_path):
    """The ConfigMap holds this one file: it may import nothing of rayjob_advisor, and runs as a script."""
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(ast.parse(SCRIPT.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [node])
    }
    assert not {name for name in imported if name and name.startswith("rayjob_advisor")}
    script = tmp_path / "train_digits.py"
    shutil.copy(SCRIPT, script)
    done = subprocess.run(
        [sys.executable, script, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and "--dataset-size" in done.stdout, done.stderr


def test_enforce_rewrites_the_example_worker_count_and_keeps_its_runtime_env():
    rayjob = {**rayjob_of(REPO / "examples" / "deadline-enforce.yaml")}
    rayjob["metadata"] = {**rayjob["metadata"], "namespace": "default"}
    with running_advisor("webhook") as advisor:
        advisor.wait_for_model("digits-cnn")
        stored, _ = advisor.webhook.admit(rayjob, dry_run=True)
    (group,) = stored["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    before, after = yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"]), yaml.safe_load(stored["spec"]["runtimeEnvYAML"])
    assert after["env_vars"]["NUM_WORKERS"] == str(group["replicas"]) and after["pip"] == before["pip"]
    assert contract.ORIGINAL_REPLICAS in stored["metadata"]["annotations"]


def test_the_shipped_pollux_profiles_name_their_source_and_licence():
    for model in pollux.MODELS:
        header = [line for line in (SHIPPED_DATA / f"pollux-{model}.csv").read_text().splitlines() if line[:1] == "#"]
        assert header == [f"# {line}" for line in pollux.provenance(model)]
        assert any(pollux.SOURCE_COMMIT in line and "placements.csv" in line for line in header)
        assert any("Apache-2.0" in line and "Copyright 2020 Petuum, Inc." in line for line in header)
    notice = (SHIPPED_DATA / "NOTICE").read_text()
    assert "Copyright 2020 Petuum, Inc. and the AdaptDL / Pollux authors" in notice
    assert "Apache License" in (SHIPPED_DATA / "LICENSE-pollux").read_text()


@pytest.mark.skipif(
    not (POLLUX / "bert" / "placements.csv").exists(),
    reason=f"the Pollux traces are not in the repository (optional: ${SHARED_VARIABLE}/datasets/pollux)",
)
def test_the_shipped_pollux_profiles_are_the_conversion_of_the_traces(tmp_path):
    written = pollux.write_shipped(POLLUX, tmp_path)
    assert [path.name for path in written] == [f"pollux-{model}.csv" for model in pollux.MODELS]
    for path in written:
        assert (SHIPPED_DATA / path.name).read_bytes() == path.read_bytes(), "python -m benchmarks.pollux --shipped"


def measured_seconds(model: str, placement: str, local_batch: int, samples: int) -> float:
    """An epoch of ``samples`` at a Pollux placement and per-GPU batch, from the measured step time (which the
    shipped run of that configuration keeps: its execution time over its steps)."""
    (run,) = [r for r in shipped_runs(f"pollux-{model}") if r.source == f"pollux:{model}:{placement}:{local_batch}"]
    step = run.execution_seconds / math.ceil(run.dataset_size / run.batch_size)
    return math.ceil(samples / (local_batch * sum(int(d) for d in placement))) * step


def test_predict_on_the_gpu_example_shows_the_measured_scaling_out_of_the_box(capsys):
    assert main(["predict", "-f", str(REPO / "examples" / "rayjob-pollux-imagenet.yaml"), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["prediction"]["profile"] == "shipped/pollux-imagenet"  # as the operator names it
    used = document["prediction"]["features"]
    assert (used["placement"], used["batch_held"], used["batch_size_per_worker"]) == ("spread", "per-worker", 200)
    rows = {row["replicas"]: row for row in document["what_if"]}
    assert sorted(rows) == list(range(1, 17))
    for replicas, placement in ((1, "1"), (4, "1111"), (8, "2222"), (16, "4444")):  # spread over 4 nodes of 4 T4s
        truth = measured_seconds("imagenet", placement, 200, 1_281_167)
        assert rows[replicas]["p50"] == pytest.approx(truth, rel=0.1)
    assert document["recommendation"]["meetsDeadline"] is True
