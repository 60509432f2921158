"""``kubectl rayjob-advisor``: a real kubectl finds the plugin on the PATH and runs it against the emulator.

The operator predicts as it does in a cluster; kubectl reads the emulator over HTTP with a kubeconfig
of two contexts, and runs the console script ``kubectl-rayjob_advisor`` as pip installs it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator

import pytest

import rayjob_advisor
from rayjob_advisor import contract as ann
from rayjob_advisor.advice import planner, prediction
from rayjob_advisor.advice.features import features_from_rayjob
from rayjob_advisor.cli import kubectl_plugin
from rayjob_advisor.cli.tables import what_if_table
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.transfer import model_on
from rayjob_advisor.profiles.codec import runs_from_k8s
from rayjob_advisor_testkit import lifecycle
from rayjob_advisor_testkit.advisor import QUICK_REFITS, RunningAdvisor, running_advisor
from rayjob_advisor_testkit.emulator import rfc3339
from rayjob_advisor_testkit.paths import REPO
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest, profiled_rayjob, small_profile_runs
from rayjob_advisor_testkit.rayjobs import make_rayjob
from rayjob_advisor_testkit.resources import AdvisorEmulator

KUBECTL = shutil.which("kubectl")
PLUGIN = "kubectl-rayjob_advisor"
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def live() -> Iterator[RunningAdvisor]:
    """The operator; RayJobs in namespace ``team`` are predicted from the RuntimeProfile in ``default`` (shared)."""
    with running_advisor(
        objects=[profile_manifest()], shared_profile_namespaces=("default",), **QUICK_REFITS
    ) as advisor:
        advisor.api.create_namespace("team")
        yield advisor
        assert not [v for v in advisor.api.violations if v.rejected], "the operator wrote an invalid object"


def kubeconfig(server: str) -> dict:
    """Two contexts on the emulator: ``emulator`` (current, namespace default) and ``team`` (namespace team)."""
    contexts = [
        {"name": name, "context": {"cluster": "emulator", "user": "tester", "namespace": namespace}}
        for name, namespace in (("emulator", "default"), ("team", "team"))
    ]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": server}}],
        "users": [{"name": "tester", "user": {}}],
        "contexts": contexts,
        "current-context": "emulator",
    }


def console_script(folder: pathlib.Path) -> None:
    """``kubectl-rayjob_advisor`` in ``folder``, as pip writes the console script pyproject.toml declares."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts[PLUGIN].split(":")
    script = folder / PLUGIN
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n")
    script.chmod(0o755)


@pytest.fixture(scope="module")
def kubectl(live: RunningAdvisor, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """Runs the real kubectl: the plugin on its PATH, the emulator in its kubeconfig (``$KUBECONFIG``)."""
    if KUBECTL is None:
        pytest.skip("needs a kubectl binary on the PATH")
    home = tmp_path_factory.mktemp("kubectl")
    config = home / "config"
    config.write_text(json.dumps(kubeconfig(live.api.url)))
    (home / "bin").mkdir()
    console_script(home / "bin")
    env = {
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),  # kubectl's discovery cache
        "KUBECONFIG": str(config),
        "PYTHONPATH": str(pathlib.Path(rayjob_advisor.__file__).parents[1]),  # this checkout's package
        # OpenBLAS's kernel choice, as this process has it: another kernel may select another model
        **{key: value for key, value in os.environ.items() if key.startswith("OPENBLAS_")},
    }

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        command = [str(KUBECTL), *args]
        return subprocess.run(command, env={**env, **extra}, capture_output=True, text=True, timeout=120, check=False)

    return run


def submit(api: AdvisorEmulator, name: str, namespace: str = "default", **notes: str) -> dict[str, str]:
    """Create a RayJob of 4 replicas and wait for its prediction; its annotations."""
    rayjob = profiled_rayjob(name, **notes)
    rayjob["metadata"]["namespace"] = namespace
    api.create(rayjob)

    def annotations() -> dict[str, str] | None:
        found = lifecycle.notes(api, name, namespace)
        return found if ann.PREDICTION in found and ann.DEADLINE_STATUS in labels(api, name, namespace) else None

    return api.wait_until(annotations, 60)


def labels(api: AdvisorEmulator, name: str, namespace: str = "default") -> dict[str, str]:
    return api.get("rayjobs", namespace, name)["metadata"].get("labels", {})


def fields(text: str) -> dict[str, str]:
    """``kubectl describe``'s ``Key:   value`` lines, by key (indented ones too)."""
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())}


def test_describe_says_the_prediction_plan_eta_and_outcome_in_words(live, kubectl):
    api = live.api
    notes = submit(api, "train", **{ann.DEADLINE: "1h"})
    result = json.loads(notes[ann.PREDICTION])
    plan = json.loads(notes[ann.RECOMMENDATION])
    eta = {ann.ETA: "2026-12-02T12:10:00Z", ann.ETA_UPPER: "2026-12-02T12:12:00Z"}
    api.patch("rayjobs", "default", "train", {"metadata": {"annotations": eta}})  # as the controller does at start

    answer = kubectl("rayjob-advisor", "describe", "train", "-n", "default")
    assert answer.returncode == 0, answer.stderr
    said = fields(answer.stdout)
    assert said["Name"] == "train" and said["Namespace"] == "default" and said["Workload"] == WORKLOAD
    assert said["Prediction"] == (
        f"runs {notes[ann.PREDICTED_RUNTIME]} (median), at most {ann.format_duration(result['upper'])} "
        "at 90% confidence"
    )
    assert said["Model"].startswith(f"{result['model']}, fitted on RuntimeProfile default/{WORKLOAD}")
    assert said["Deadline"].endswith(": on-track") and "(in 59m" in said["Deadline"]
    assert said["Recommendation"] == f"{plan['replicas']} replicas (meets the deadline): {plan['reason']}"
    assert said["ETA"] == "2026-12-02T12:10:00Z (median), at the latest 2026-12-02T12:12:00Z (upper bound)"
    assert said["Error"] == "<none>" and "Actual runtime" not in said

    created = ann.parse_timestamp(api.get("rayjobs", "default", "train")["metadata"]["creationTimestamp"])
    start = created + dt.timedelta(seconds=30)
    api.set_rayjob_status(
        "default", "train", deployment_status="Complete", job_status="SUCCEEDED",
        start_time=rfc3339(start), end_time=rfc3339(start + dt.timedelta(minutes=10)),
    )  # fmt: skip
    api.wait_until(lambda: labels(api, "train")[ann.DEADLINE_STATUS] == "met", 30)
    said = fields(kubectl("rayjob-advisor", "describe", "train", "-n", "default").stdout)
    off = float(api.get("rayjobs", "default", "train")["metadata"]["annotations"][ann.PREDICTION_ERROR])
    assert said["Actual runtime"] == f"10m (the median prediction was {abs(off):.1%} under it)" and off < 0
    assert said["Job status"] == "Complete (SUCCEEDED)" and said["Deadline"].endswith(": met")


def test_kubectl_get_shows_the_label_mirror(live, kubectl):
    api = live.api
    predicted = {
        name: submit(api, name, **deadline)[ann.PREDICTED_RUNTIME]
        for name, deadline in (("roomy", {ann.DEADLINE: "2h"}), ("hopeless", {ann.DEADLINE: "2s"}), ("open", {}))
    }
    columns = "rayjob-advisor.io/predicted,rayjob-advisor.io/deadline-status"
    answer = kubectl("get", "rayjobs", "-n", "default", "-L", columns)
    assert answer.returncode == 0, answer.stderr
    header, *rows = (line.split() for line in answer.stdout.splitlines())
    assert header == ["NAME", "AGE", "PREDICTED", "DEADLINE-STATUS"]
    shown = {row[0]: (row[2], row[3]) for row in rows}
    assert shown["roomy"] == (predicted["roomy"], "on-track")
    assert shown["hopeless"] == (predicted["hopeless"], "at-risk")
    assert shown["open"] == (predicted["open"], "none")


def test_what_if_predicts_the_live_job_at_other_sizes_from_its_profile(live, kubectl):
    submit(live.api, "sizes")
    answer = kubectl("rayjob-advisor", "what-if", "sizes", "--replicas", "1,2,16")
    assert answer.returncode == 0, answer.stderr
    intro, as_it_is, _, title, *table = answer.stdout.splitlines()
    # What `rayjob-advisor predict` computes from the same runs (seed and learned) and the same manifest.
    stored = live.api.get("runtimeprofiles", "default", WORKLOAD)
    _, seed, learned = runs_from_k8s(stored["spec"], stored.get("status"))
    model = RuntimeModel().fit(seed + learned)
    rayjob = live.api.get("rayjobs", "default", "sizes")
    job = features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))
    now = prediction.predict(job, model, f"default/{WORKLOAD}", 0.9)
    rows = prediction.what_if(job, model, 0.9, planner.Prices(), replicas=[1, 2, 16])
    assert intro.startswith(f"RayJob default/sizes: profile default/{WORKLOAD} ({len(seed + learned)} runs; model ")
    assert as_it_is.startswith(f"as it is, 4 replicas (4 Ray Train workers): {ann.format_duration(now.p50)} (median)")
    assert title == "what if (group 'workers'):"
    assert table == what_if_table(rows)
    assert [row.replicas for row in rows] == [1, 2, 16] and rows[0].p50 > rows[1].p50 > rows[2].p50


def test_the_context_names_the_namespace_and_all_namespaces_lists_every_job(live, kubectl, tmp_path, capsys):
    submit(live.api, "solo", namespace="team")
    config = tmp_path / "elsewhere"
    config.write_text(json.dumps(kubeconfig(live.api.url)))
    answer = kubectl("rayjob-advisor", "describe", "solo", "--context", "team", "--kubeconfig", str(config),
                     KUBECONFIG=str(tmp_path / "missing"))  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    assert fields(answer.stdout)["Namespace"] == "team"
    assert fields(answer.stdout)["Model"].split(", ")[1].startswith(f"fitted on RuntimeProfile default/{WORKLOAD}")
    listing = kubectl("rayjob-advisor", "list", "-A")
    header, *rows = (line.split() for line in listing.stdout.splitlines())
    assert header[:3] == ["NAMESPACE", "NAME", "WORKLOAD"] and rows[-1][:3] == ["team", "solo", WORKLOAD]
    assert sorted({row[0] for row in rows}) == ["default", "team"]
    # what-if finds the profile where the operator did: in the shared namespace its prediction names.
    assert plugin(["what-if", "solo", "--context", "team", "--kubeconfig", str(config)]) == 0
    assert capsys.readouterr().out.startswith(f"RayJob team/solo: profile default/{WORKLOAD} (")


def test_a_missing_rayjob_is_kubectls_not_found_line(live, kubectl):
    answer = kubectl("rayjob-advisor", "describe", "nope", "-n", "default")
    assert answer.returncode == 1 and answer.stdout == ""
    assert answer.stderr == 'Error from server (NotFound): rayjobs.ray.io "nope" not found\n'


# The plugin's other answers, without kubectl in between (it passes arguments and streams through unchanged).


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["describe", "train", "-A"], 1, "error: a resource cannot be retrieved by name across all namespaces\n"),
        (["describe", "--context", "nowhere"], 1, 'error: context "nowhere" does not exist\n'),
        (["describe", "-n", "kube-system"], 0, "No resources found in kube-system namespace.\n"),
        (
            ["what-if", "mystery"],
            1,
            "error: no profile yet for workload 'bert': no RuntimeProfile in namespace 'default'",
        ),
        (["what-if", "sizes", "--replicas", "0"], 1, "error: argument --replicas: '0': expected positive integers"),
        (["list", "--watch"], 1, "error: unrecognized arguments: --watch\nSee 'kubectl rayjob-advisor --help'"),
    ],
)
def test_errors_are_one_line_in_kubectls_style(live, tmp_path, capsys, args, status, message):
    rayjob = make_rayjob(annotations={ann.WORKLOAD: "bert", ann.DATASET_SIZE: "100"})
    rayjob["metadata"]["name"] = "mystery"
    if args[:2] == ["what-if", "mystery"]:
        live.api.create(rayjob)
    config = tmp_path / "config"
    config.write_text(json.dumps(kubeconfig(live.api.url)))
    assert plugin([*args, "--kubeconfig", str(config)]) == status
    assert capsys.readouterr().err.startswith(message)


def test_no_kubeconfig_is_one_line_too(tmp_path, capsys):
    assert plugin(["describe", "train", "--kubeconfig", str(tmp_path / "missing")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: no usable kubeconfig: ") and error.count("\n") == 1


def plugin(args: list[str]) -> int:
    """The plugin's exit status, run in this process."""
    try:
        return kubectl_plugin.main(args)
    except SystemExit as exit:  # argparse's usage errors
        return int(exit.code or 0)


def test_describe_reads_hand_edited_annotations_without_failing():
    rayjob = make_rayjob(
        annotations={
            ann.PREDICTION: "{", ann.RECOMMENDATION: '{"replicas": "many", "reason": "why"}',
            ann.ORIGINAL_REPLICAS: '{"replicas": 2, "gpusPerWorker": 1}', ann.DEADLINE: "tomorrow",
            ann.ACTUAL_RUNTIME_SECONDS: "soon", ann.PREDICTION_ERROR: "nan",
        }
    )  # fmt: skip
    said = fields(kubectl_plugin.describe(rayjob, dt.datetime(2026, 12, 2, tzinfo=dt.UTC)))
    assert said["Prediction"] == f"unreadable {ann.PREDICTION} annotation: {{"
    assert said["Recommendation"] == "an unreadable size ('many' replicas) (MISSES the deadline): why"
    assert said["Resized"] == "by the advisor, from 2 replicas x 1 GPUs"
    assert said["Deadline"].startswith("tomorrow: 'tomorrow' is neither an RFC 3339 time")
    assert said["Actual runtime"] == "unreadable ('soon' seconds)" and said["Workload"].startswith("<none>")


def test_what_if_predicts_from_the_runs_of_the_jobs_accelerator(live, tmp_path, capsys):
    """A profile measured on two accelerators: a job selecting the less measured one is predicted from its runs,
    as the operator predicts it, never from the other accelerator's."""
    runs = small_profile_runs()
    on = {
        "a100": [r.model_copy(update={"workload": "mixed", "accelerator": "a100"}) for r in runs * 2],
        "v100": [
            r.model_copy(
                update={"workload": "mixed", "accelerator": "v100", "execution_seconds": 3 * r.execution_seconds}
            )
            for r in runs
        ],
    }
    live.api.create(profile_manifest(on["a100"] + on["v100"], workload="mixed"))
    rayjob = profiled_rayjob("on-v100", **{ann.WORKLOAD: "mixed", ann.EPOCHS: "1", ann.ACCELERATOR: "v100"})
    live.api.create(rayjob)
    config = tmp_path / "config"
    config.write_text(json.dumps(kubeconfig(live.api.url)))
    assert plugin(["what-if", "on-v100", "--kubeconfig", str(config)]) == 0
    as_it_is = capsys.readouterr().out.splitlines()[1]
    job = features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))
    median = {name: model_on(on["a100"] + on["v100"], name).predict([job])[0] for name in on}
    assert median["v100"] > 2 * median["a100"]  # its own runs' model, or the A100's moved by their speed factor
    assert f": {ann.format_duration(median['v100'])} (median)" in as_it_is, as_it_is


def test_what_if_and_describe_say_the_operator_leaves_a_mode_off_job_alone(live, tmp_path, capsys):
    live.api.create(profiled_rayjob("quiet", **{ann.MODE: "off"}))
    config = tmp_path / "config"
    config.write_text(json.dumps(kubeconfig(live.api.url)))
    assert plugin(["what-if", "quiet", "--kubeconfig", str(config)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1] == f"the operator leaves this RayJob alone: its mode is off ({ann.MODE})" and said[-2] == ""
    assert plugin(["describe", "quiet", "--kubeconfig", str(config)]) == 0
    prediction = fields(capsys.readouterr().out)["Prediction"]
    assert prediction.startswith("<none> (not predicted: see Error, or the advisor leaves the job alone: its mode is")


def test_what_if_reads_the_raycluster_a_cluster_selector_job_names(live, tmp_path, capsys):
    own = profiled_rayjob("own-cluster")
    live.api.create({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                     "metadata": {"name": "shared-plugin", "namespace": "default"},
                     "spec": own["spec"]["rayClusterSpec"]})  # fmt: skip
    for name, cluster in (("on-shared-plugin", "shared-plugin"), ("on-no-cluster", "none-here")):
        selected = profiled_rayjob(name)
        selected["spec"] = {"entrypoint": own["spec"]["entrypoint"], "clusterSelector": {"ray.io/cluster": cluster}}
        live.api.create(selected)
    config = tmp_path / "config"
    config.write_text(json.dumps(kubeconfig(live.api.url)))
    assert plugin(["what-if", "on-shared-plugin", "--kubeconfig", str(config)]) == 0
    as_it_is = capsys.readouterr().out.splitlines()[1]
    assert as_it_is.startswith("as it is, 4 replicas (4 Ray Train workers): "), as_it_is
    assert plugin(["what-if", "on-no-cluster", "--kubeconfig", str(config)]) == 1
    assert capsys.readouterr().err == (
        "error: RayCluster 'none-here' in namespace 'default' (spec.clusterSelector) does not exist: the job runs on "
        "it, so its size is there\n"
    )
