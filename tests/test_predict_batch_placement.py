"""`rayjob-advisor predict` shows which batch a resize keeps, the placement hint, and what the model assumed."""

from __future__ import annotations

import json

import yaml

from rayjob_advisor import contract as ann
from rayjob_advisor.cli.verbs import main
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

ONE_PER_NODE = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"ray.io/group": "workers"}}}
            ]
        }
    }
}


def predict(capsys, tmp_path, profile_csv, notes: dict[str, str], pod: dict | None = None, *options: str):
    group = worker_group(replicas=4, minReplicas=1, maxReplicas=8)
    group["template"]["spec"].update(pod or {})
    rayjob = make_rayjob(
        annotations={ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000", **notes},
        groups=[group],
        runtimeEnvYAML="env_vars: {NUM_WORKERS: '4'}",
    )
    path = tmp_path / "rayjob.yaml"
    path.write_text(yaml.safe_dump(rayjob))
    status = main(["predict", "-f", str(path), "--data", str(profile_csv), *options])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return captured.out


def test_a_per_worker_batch_is_shown_and_scales_in_the_what_if_table(capsys, tmp_path, profile_csv):
    notes = {ann.BATCH_SIZE_PER_WORKER: "32"}
    out = predict(capsys, tmp_path, profile_csv, notes, ONE_PER_NODE)
    assert "batch: 128 global = 32 per worker x 4 workers; a resize keeps the per-worker batch fixed" in out
    assert "placement: one-per-node (from the RayJob)" in out
    document = json.loads(predict(capsys, tmp_path, profile_csv, notes, ONE_PER_NODE, "--format", "json"))
    shown = document["prediction"]["features"]
    assert (shown["batch_size"], shown["batch_size_per_worker"], shown["batch_held"]) == (128, 32, "per-worker")
    assert shown["placement"] == "one-per-node"
    assert json.loads(document["annotations"][ann.PREDICTION])["features"] == shown


def test_a_global_batch_held_global_is_shown_so(capsys, tmp_path, profile_csv):
    notes = {ann.BATCH_SIZE: "256", ann.BATCH_SCALING: "global", ann.PLACEMENT: "spread"}
    out = predict(capsys, tmp_path, profile_csv, notes, ONE_PER_NODE)  # the annotation overrides the template
    assert "batch: 256 global = 64 per worker x 4 workers; a resize keeps the global batch fixed" in out
    assert "placement: spread (from the RayJob)" in out


def test_missing_inputs_are_named_and_the_models_assumptions_printed_whatever_their_type(
    capsys, tmp_path, profile_csv, monkeypatch
):
    real = RuntimeModel.assumptions

    def assumptions(self, run):  # the model side (I3) reports strings as well as numbers
        return {**real(self, run), "batch_size_per_worker": 32.0, "placement": "packed"}

    monkeypatch.setattr(RuntimeModel, "assumptions", assumptions)
    out = predict(capsys, tmp_path, profile_csv, {})
    assert "batch: not given; a resize keeps the per-worker batch" in out
    assert "placement: the RayJob gives no hint" in out
    assert "batch_size_per_worker=32, placement=packed" in out
