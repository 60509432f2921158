"""The embedded default profile: real runs with provenance, and predict working offline on it."""

from __future__ import annotations

import json

from rayjob_advisor.cli.verbs import main
from rayjob_advisor.observations import read_observations
from rayjob_advisor.profiles.shipped import shipped_data
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit.paths import REPO


def test_the_shipped_profile_is_a_real_sweep_with_provenance():
    path = shipped_data("digits-cnn")
    observations, problems = read_observations(path)
    assert problems == []
    assert len(observations) >= 60
    assert len({o.workers for o in observations}) >= 4 and len({o.dataset_size for o in observations}) >= 4
    assert all(o.source.startswith("sweep:digits-cnn:") and o.startup_seconds > 0 for o in observations)
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert any("cores" in line for line in header) and any("ray " in line and "torch " in line for line in header)


def test_predict_on_the_example_needs_no_other_input(capsys):
    assert main(["predict", "-f", str(REPO / "examples" / "rayjob-digits.yaml"), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["prediction"]["profile"] == "shipped/digits-cnn"  # as the operator names it
    assert document["prediction"]["features"]["workers"] == 2
    assert [row["replicas"] for row in document["what_if"]] == [1, 2, 3, 4]


def test_unknown_workloads_have_no_shipped_profile(capsys):
    assert main(["fit", "--workload", "resnet"]) == 2
    shipped = "digits-cnn, pollux-bert, pollux-cifar10, pollux-deepspeech2, pollux-imagenet, pollux-ncf, pollux-yolov3"
    assert (
        f"no shipped profile for workload 'resnet' (shipped: {shipped}); give --data FILE.csv"
        in capsys.readouterr().err
    )


def test_shipped_profiles_are_fitted_once_a_job_asks_for_one():
    store = ProfileStore()
    assert store.stale() == []  # seven profiles, no fit at start-up
    profile = store.find("team-a", "pollux-imagenet")
    assert store.stale() == [profile] and profile.label == "shipped/pollux-imagenet"
    profile.fit()
    assert store.stale() == [] and profile.model is not None
