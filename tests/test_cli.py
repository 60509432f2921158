"""The evaluate / fit / predict verbs, their JSON shapes and their error messages."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest
import yaml

from rayjob_advisor import contract as ann
from rayjob_advisor.application import advise
from rayjob_advisor.cli import verbs
from rayjob_advisor.cli.verbs import main
from rayjob_advisor.kube.config import load_config
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import write_observations
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit.paths import REPO
from rayjob_advisor_testkit.profiles import synthetic_observations
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

SPLITS = {
    "interpolate-workers",
    "extrapolate-workers",
    "interpolate-size",
    "extrapolate-size",
    "far-extrapolate-workers",
    "extrapolate-batch",
    "extrapolate-small-batch",
    "kfold",
}  # the synthetic profile's 4 sizes over 8x make no far-extrapolate-size apart from extrapolate-size
SELECTABLE = {*CANDIDATES, "combined"}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_evaluate_json_has_the_documented_shape(capsys, profile_csv):
    status, out, _ = run(capsys, "evaluate", "--data", profile_csv, "--format", "json")
    assert status == 0
    document = json.loads(out)
    assert set(document["splits"]) == SPLITS
    assert set(document["splits"]["extrapolate-workers"]) == SELECTABLE
    assert document["selected"] in SELECTABLE and document["selected"] in document["splits"]["kfold"]
    assert set(document["weights"]) == {"inside", "workers", "size", "batch"}


def test_evaluate_against_a_test_file(capsys, profile_csv, tmp_path):
    other = tmp_path / "new-runs.csv"
    write_observations(other, synthetic_observations(seed=9))
    status, out, _ = run(capsys, "evaluate", "--data", profile_csv, "--test", other, "--format", "json")
    document = json.loads(out)
    assert status == 0 and list(document["splits"]) == ["test"]
    assert document["splits"]["test"]["ernest"]["n_test"] == 64


def test_evaluate_table_marks_the_selected_model(capsys, profile_csv):
    status, out, _ = run(capsys, "evaluate", "--data", profile_csv)
    assert status == 0
    selected = out.strip().splitlines()[-1].split()[1]
    assert any(line.split()[1] == selected and line.endswith("*") for line in out.splitlines()[2:-1])


def test_fit_reports_the_selected_model(capsys, profile_csv):
    status, out, _ = run(capsys, "fit", "--data", profile_csv, "--format", "json")
    document = json.loads(out)
    assert status == 0 and document["selected"] in SELECTABLE and document["n_samples"] == 64
    assert set(document["weights"]) == {"inside", "workers", "size", "batch"}
    assert set(document["split_mape"]) == SPLITS and 0 < document["cv_mape"] < 0.5


def write_rayjob(tmp_path, rayjob) -> str:
    path = tmp_path / "rayjob.yaml"
    path.write_text(
        yaml.safe_dump_all([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "code"}}, rayjob])
    )
    return str(path)


def test_predict_gives_the_prediction_what_if_table_and_annotations(capsys, profile_csv, tmp_path):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "128", ann.WORKLOAD: "synthetic"},
        groups=[worker_group(replicas=4, minReplicas=1, maxReplicas=8)],
    )
    status, out, _ = run(
        capsys, "predict", "-f", write_rayjob(tmp_path, rayjob), "--data", profile_csv, "--format", "json"
    )
    assert status == 0
    document = json.loads(out)
    prediction = document["prediction"]
    assert prediction["features"]["workers"] == 4 and prediction["profile"] == "synthetic"
    assert 0 < prediction["p50"] <= prediction["upper"]
    assert [row["replicas"] for row in document["what_if"]] == list(range(1, 9))
    assert json.loads(document["annotations"][ann.PREDICTION]) == prediction
    assert float(document["annotations"][ann.PREDICTED_RUNTIME_SECONDS]) == pytest.approx(prediction["p50"], abs=0.05)

    status, out, _ = run(capsys, "predict", "-f", write_rayjob(tmp_path, rayjob), "--data", profile_csv)
    assert status == 0
    assert "predicted runtime:" in out and "what if" in out and ann.PREDICTED_RUNTIME in out


def test_predict_writes_what_the_operator_writes(capsys, tmp_path, monkeypatch):
    """One forecast: the annotations and labels ``predict`` says it would write are the controller's patch of the
    same job, from the same (shipped) profile and settings, the cleared ``error`` and the label mirror included."""
    now = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
    notes = {ann.WORKLOAD: "digits-cnn", ann.DATASET_SIZE: "32000", ann.BATCH_SIZE: "256", ann.EPOCHS: "2"}
    rayjob = make_rayjob(
        annotations={**notes, ann.DEADLINE: "2026-12-02T12:10:00Z", ann.ERROR: "an old error"},
        groups=[worker_group(replicas=2, minReplicas=1, maxReplicas=4)],
    )
    monkeypatch.setattr(ann, "now", lambda: now)  # the one clock
    status, out, _ = run(capsys, "predict", "-f", write_rayjob(tmp_path, rayjob), "--format", "json")
    assert status == 0
    document = json.loads(out)
    store = ProfileStore()
    store.refit(store.find("default", "digits-cnn"))  # as the operator's refitter does
    patch = advise(rayjob, store, policy=load_config({}, {}).policy({}), may_resize=False, now=now).patch
    assert {"annotations": document["annotations"], "labels": document["labels"]} == patch["metadata"]
    assert document["annotations"][ann.ERROR] is None and set(document["labels"]) == ann.LABEL_KEYS
    assert ann.RECOMMENDATION in document["annotations"]


@pytest.fixture
def no_fit(monkeypatch):
    """Fail any fit: the inputs must be checked before the user waits for one."""

    def fit(self, observations):
        pytest.fail("fitted before the inputs were checked")

    monkeypatch.setattr(RuntimeModel, "fit", fit)


@pytest.mark.parametrize(
    ("annotations", "options", "message"),
    [
        ({}, [], "annotation rayjob-advisor.io/dataset-size is missing"),
        ({ann.DATASET_SIZE: "many"}, [], "rayjob-advisor.io/dataset-size='many': Input should be a valid integer"),
        (
            {ann.DATASET_SIZE: "10", ann.WORKLOAD: "bert"},
            [],
            "no profile for workload 'bert'; known workloads: synthetic",
        ),
        ({ann.DATASET_SIZE: "10"}, ["--confidence", "-1"], "--confidence -1: Input should be greater than 0"),
        ({ann.DATASET_SIZE: "10"}, ["--confidence", "1"], "--confidence 1: Input should be less than 1"),
        ({ann.DATASET_SIZE: "10", ann.SCALE_GROUP: "gpu"}, [], "rayjob-advisor.io/scale-group"),
    ],
)
def test_predict_errors_are_one_clear_line_before_any_fit(
    capsys, profile_csv, tmp_path, no_fit, annotations, options, message
):
    path = write_rayjob(tmp_path, make_rayjob(annotations=annotations))
    status, out, err = run(capsys, "predict", "-f", path, "--data", profile_csv, *options)
    assert status == 2 and out == ""
    assert err.startswith("rayjob-advisor: error: ") and message in err


def test_bad_csv_rows_stop_the_command_unless_skipped(capsys, tmp_path, profile_csv):
    bad = tmp_path / "bad.csv"
    bad.write_text(profile_csv.read_text() + "synthetic,oops,1,64,2,1,0,1,,,10,,x\n")
    status, _, err = run(capsys, "fit", "--data", bad)
    assert status == 2 and f"{bad}:66: column 'dataset_size'" in err
    status, _, err = run(capsys, "fit", "--data", bad, "--skip-bad-rows")
    assert status == 0 and f"warning: skipped {bad}:66" in err


def test_missing_files_and_non_rayjob_manifests(capsys, tmp_path, profile_csv):
    status, _, err = run(capsys, "evaluate", "--data", tmp_path / "absent.csv")
    assert status == 2 and "No such file" in err
    path = tmp_path / "cm.yaml"
    path.write_text("kind: ConfigMap\n")
    status, _, err = run(capsys, "predict", "-f", path, "--data", profile_csv)
    assert status == 2 and "expected exactly one RayJob document, found 0" in err


def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "rayjob_advisor.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "evaluate" in result.stdout and "predict" in result.stdout


def test_predict_with_a_deadline_gives_the_recommendation(capsys, profile_csv, tmp_path):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: "16000", ann.BATCH_SIZE: "64", ann.WORKLOAD: "synthetic", ann.DEADLINE: "1m"},
        groups=[worker_group(replicas=1, minReplicas=1, maxReplicas=8)],
    )
    status, out, _ = run(
        capsys, "predict", "-f", write_rayjob(tmp_path, rayjob), "--data", profile_csv, "--format", "json"
    )
    assert status == 0
    document = json.loads(out)
    recommendation = document["recommendation"]
    assert json.loads(document["annotations"][ann.RECOMMENDATION]) == recommendation
    assert 1 <= recommendation["replicas"] <= 8 and recommendation["group"] == "workers"
    assert isinstance(recommendation["meetsDeadline"], bool) and recommendation["reason"]
    fitting = [row for row in document["what_if"] if row["startup"] + row["upper"] <= 60]
    assert fitting and recommendation["meetsDeadline"]  # the synthetic runs take 10-30 s
    assert recommendation["replicas"] == min(fitting, key=lambda r: (r["cost"], r["replicas"]))["replicas"]
    status, out, _ = run(capsys, "predict", "-f", write_rayjob(tmp_path, rayjob), "--data", profile_csv)
    assert "decision:" in out


def test_run_rejects_bad_settings_with_one_line(capsys, monkeypatch):
    status, _, err = run(capsys, "run", "--role", "webhook", "--kube-api", "http://127.0.0.1:9")
    assert status == 2 and "bad settings: settings: Value error, the webhook role needs tls_cert_file" in err
    monkeypatch.setenv("RAYJOB_ADVISOR_LIVENESS_PORT", "eighty")
    status, _, err = run(capsys, "run")
    assert status == 2 and "bad settings: liveness_port: Input should be a valid integer" in err


def test_run_takes_repeated_shared_profile_namespaces(capsys, monkeypatch):
    seen = {}

    def load(flags):  # the real settings, made invalid so that the operator does not start
        seen.update(flags)
        return load_config({**flags, "role": "webhook"})

    monkeypatch.setattr(verbs, "load_config", load)
    status, _, err = run(capsys, "run", "--shared-profile-namespace", "platform", "--shared-profile-namespace", "ml")
    assert status == 2 and "tls_cert_file" in err and seen["shared_profile_namespaces"] == ["platform", "ml"]


@pytest.mark.parametrize("role", ["controller", "webhook"])
def test_run_without_a_cluster_or_kubeconfig_exits_with_one_line(tmp_path, role):
    """Not in a cluster, KUBECONFIG names no file: one line and status 2, not kopf's retry loop of tracebacks."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "RAYJOB_ADVISOR_"))}
    environment["KUBECONFIG"] = str(tmp_path / "missing-kubeconfig")
    (tmp_path / "tls.crt").touch()
    tls = ["--tls-cert-file", tmp_path / "tls.crt", "--tls-key-file", tmp_path / "tls.crt"] if role == "webhook" else []
    command = [sys.executable, "-m", "rayjob_advisor.cli", "run", "--role", role, "--liveness-port", "0", *tls]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and not done.stdout, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rayjob-advisor: error: no Kubernetes API to talk to: not in a cluster")
    assert f"no usable kubeconfig at {tmp_path / 'missing-kubeconfig'}" in line and "--kube-api" in line


MANIFEST = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: job\n  annotations:\n    {}\n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("rayjob-advisor.io/mode: off", 'YAML reads off as a boolean, [...] quote it: rayjob-advisor.io/mode: "off"'),
        ("rayjob-advisor.io/mode: on", "reads on as a boolean"),
        ("rayjob-advisor.io/release: yes", 'quote it: rayjob-advisor.io/release: "yes"'),
        ("rayjob-advisor.io/mode: no", 'quote it: rayjob-advisor.io/mode: "no"'),
        (
            "rayjob-advisor.io/deadline: 2026-12-02T18:00:00Z",
            'reads 2026-12-02T18:00:00Z as a timestamp, [...] rayjob-advisor.io/deadline: "2026-12-02T18:00:00Z"',
        ),
        (
            "rayjob-advisor.io/dataset-size: 16000",
            'reads 16000 as an integer, [...] rayjob-advisor.io/dataset-size: "16000"',
        ),
        ("rayjob-advisor.io/confidence: 0.9", 'reads 0.9 as a number, [...] rayjob-advisor.io/confidence: "0.9"'),
        ("rayjob-advisor.io/epochs: 010", 'rayjob-advisor.io/epochs: "010"'),  # YAML 1.1 octal: 8, not what was written
        ("rayjob-advisor.io/workload:", 'an empty value (null) [...] write rayjob-advisor.io/workload: ""'),
        ("rayjob-advisor.io/workload: [a, b]", "rayjob-advisor.io/workload: a list where Kubernetes takes a string"),
        ("1: x", "key 1: YAML reads 1 as an integer"),
    ],
)
def test_yaml_typing_surprises_in_annotations_name_the_fix(capsys, tmp_path, no_fit, line, message):
    path = tmp_path / "rayjob.yaml"
    path.write_text(MANIFEST.format(line))
    status, out, err = run(capsys, "predict", "-f", path)
    assert status == 2 and out == "" and err.startswith(f"rayjob-advisor: error: {path}:6: metadata.annotations: ")
    for part in message.split(" [...] "):
        assert part in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file or directory"),
        ("directory", "Is a directory"),
        ("", "expected exactly one RayJob document, found 0"),
        ("kind: ConfigMap\n", "expected exactly one RayJob document, found 0"),
        ("kind: RayJob\n---\nkind: RayJob\n", "expected exactly one RayJob document, found 2"),
        ("kind: RayJob\nmetadata: [\n", "while parsing a flow node"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff", "not a YAML manifest (not UTF-8 text)"),
        ("kind: RayJob\nmetadata: 5\n", "the RayJob's metadata is not a map"),
        ("kind: RayJob\nmetadata:\n  labels: [a]\n", ":3: metadata.labels is not a map"),
        (
            'kind: RayJob\nmetadata:\n  annotations:\n    rayjob-advisor.io/dataset-size: "8"\nspec: 5\n',
            "spec: Input should be a valid dictionary or instance of JobSpec",
        ),
    ],
    ids=[
        "missing",
        "directory",
        "empty",
        "configmap",
        "two-rayjobs",
        "invalid-yaml",
        "binary",
        "metadata",
        "labels",
        "spec",
    ],
)
def test_bad_manifests_are_one_clear_line(capsys, tmp_path, profile_csv, no_fit, content, message):
    path = tmp_path / "rayjob.yaml"
    if content == "directory":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    status, out, err = run(capsys, "predict", "-f", path, "--data", profile_csv)
    assert status == 2 and out == "" and err.startswith("rayjob-advisor: error: ") and message in err


def test_a_binary_observations_file_is_one_clear_line(capsys, tmp_path):
    path = tmp_path / "runs.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    status, _, err = run(capsys, "fit", "--data", path)
    assert status == 2 and err == f"rayjob-advisor: error: {path}: not an observations CSV (not UTF-8 text)\n"


EXAMPLE = REPO / "examples" / "deadline-recommend.yaml"


def example_in_mode(mode: str, tmp_path) -> pathlib.Path:
    """The deadline example in ``mode``, as a file."""
    (rayjob,) = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d.get("kind") == "RayJob"]
    rayjob["metadata"]["annotations"][ann.MODE] = mode
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(rayjob))
    return path


def test_predict_on_a_mode_off_job_says_the_operator_leaves_it_alone_and_writes_nothing(capsys, tmp_path):
    status, out, err = run(capsys, "predict", "-f", example_in_mode("off", tmp_path))
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[-1] == f"the operator leaves this RayJob alone: its mode is off ({ann.MODE}); it writes nothing on it"
    assert "predicted runtime: " in out and "what if (group 'cpu-workers'):" in out  # still a prediction
    assert not [line for line in lines if line.startswith(("decision:", "annotations it would", "labels it would"))]
    status, out, _ = run(capsys, "predict", "-f", example_in_mode("off", tmp_path), "--format", "json")
    document = json.loads(out)
    assert (document["annotations"], document["labels"]) == ({}, {}) and "recommendation" not in document
    assert document["left_alone"] == f"its mode is off ({ann.MODE})" and document["prediction"]["p50"] > 0
    status, out, _ = run(capsys, "predict", "-f", example_in_mode("recommend", tmp_path), "--format", "json")
    document = json.loads(out)  # the same job, advised: what it writes
    assert document["left_alone"] is None and ann.PREDICTION in document["annotations"]


def test_predict_reads_the_manifest_from_standard_input(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(EXAMPLE.read_text()))
    status, out, err = run(capsys, "predict", "-f", "-", "--format", "json")
    from_stdin = json.loads(out)
    status_file, out, _ = run(capsys, "predict", "-f", EXAMPLE, "--format", "json")
    from_file = json.loads(out)
    assert status == status_file == 0 and err == ""
    assert from_stdin["rayjob"] == from_file["rayjob"] and from_stdin["what_if"] == from_file["what_if"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("kind: ConfigMap\n"))
    status, _, err = run(capsys, "predict", "-f", "-")
    assert status == 2 and err == "rayjob-advisor: error: <stdin>: expected exactly one RayJob document, found 0\n"


@pytest.mark.parametrize("output", ["table", "json"])
def test_a_closed_output_pipe_stops_predict_quietly(output):
    """``predict ... | head -1``: the reader has gone before the output is written; no traceback, no error line."""
    command = [sys.executable, "-m", "rayjob_advisor.cli", "predict", "-f", str(EXAMPLE), "--format", output]
    done = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert done.stdout is not None
    done.stdout.close()  # long before the child, still importing, writes
    _, errors = done.communicate(timeout=120)
    assert errors == "" and done.returncode == 128 + signal.SIGPIPE


WARNING_PREDICT = """
import sys
import numpy as np
from rayjob_advisor import application
from rayjob_advisor.cli import verbs

forecast = application.forecast

def warning_forecast(*args, **kwargs):
    np.float64(1.0) / np.float64(0.0)  # NumPy's divide-by-zero RuntimeWarning, as a fit of few runs may give
    return forecast(*args, **kwargs)

application.forecast = warning_forecast
sys.exit(verbs.main(sys.argv[1:]))
"""


def test_no_library_warning_reaches_the_users_terminal():
    command = [sys.executable, "-c", WARNING_PREDICT, "predict", "-f", str(EXAMPLE)]
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONWARNINGS"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment, check=False)
    assert done.returncode == 0 and "predicted runtime: " in done.stdout
    assert done.stderr == "", done.stderr
    shown = subprocess.run(  # asked for (python -W), they show
        [sys.executable, "-W", "default", *command[1:]], capture_output=True, text=True, timeout=120, check=False
    )
    assert "RuntimeWarning: divide by zero" in shown.stderr


def test_predict_says_how_far_beyond_the_profile_a_job_is_and_only_what_it_assumed(capsys, tmp_path):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: "64000", ann.EPOCHS: "5", ann.BATCH_SIZE: "256", ann.WORKLOAD: "digits-cnn"},
        groups=[worker_group(replicas=64, minReplicas=1, maxReplicas=64)],
    )
    status, out, err = run(capsys, "predict", "-f", write_rayjob(tmp_path, rayjob))
    (assumed,) = [line for line in out.splitlines() if line.startswith("assumed:")]
    assert status == 0 and err == "" and "epochs=5" in out  # the job's epochs, used and not listed as assumed
    assert "extrapolation=16x the most profiled workers" in assumed and "epochs=" not in assumed
    status, out, _ = run(capsys, "predict", "-f", write_rayjob(tmp_path, rayjob), "--format", "json")
    assumed_keys = json.loads(out)["prediction"]["assumed"]
    assert assumed_keys["extrapolation"].startswith("16x the most profiled workers; ") and "epochs" not in assumed_keys


def test_a_profile_too_small_to_bound_is_refused_with_the_rule(capsys, tmp_path):
    two_runs = tmp_path / "two.csv"
    write_observations(two_runs, synthetic_observations()[:2])
    rayjob = make_rayjob(annotations={ann.DATASET_SIZE: "8000", ann.WORKLOAD: "synthetic"})
    status, out, err = run(capsys, "predict", "-f", write_rayjob(tmp_path, rayjob), "--data", two_runs)
    assert (status, out) == (2, "")
    assert err == "rayjob-advisor: error: 2 runs cannot fit a prediction: a profile needs 8 runs or more\n"


def test_predict_reads_the_cluster_a_cluster_selector_job_runs_on(capsys, tmp_path, profile_csv):
    notes = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "128"}
    own = make_rayjob(annotations=notes, groups=[worker_group(replicas=4, maxReplicas=8)])
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "shared"},
               "spec": own["spec"]["rayClusterSpec"]}  # fmt: skip
    selected = json.loads(json.dumps(own))
    selected["spec"] = {"entrypoint": own["spec"]["entrypoint"], "clusterSelector": {"ray.io/cluster": "shared"}}
    paths = {}
    for name, manifest in (("own", own), ("selected", selected), ("cluster", cluster)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(manifest))
    _, mine, _ = run(capsys, "predict", "-f", paths["own"], "--data", profile_csv)
    status, theirs, _ = run(capsys, "predict", "-f", paths["selected"], "--cluster", paths["cluster"], "--data",
                            profile_csv)  # fmt: skip
    assert status == 0 and "predicted runtime" in theirs
    predicted = [line for line in theirs.splitlines() if line.startswith("predicted runtime")]
    assert predicted == [line for line in mine.splitlines() if line.startswith("predicted runtime")]
    status, _, err = run(capsys, "predict", "-f", paths["selected"], "--data", profile_csv)
    assert status == 2 and "an existing RayCluster ('shared')" in err and "--cluster" in err
