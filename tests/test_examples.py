"""The shipped examples are valid RayJobs and yield features; the Pollux conversion is faithful."""

from __future__ import annotations

import csv
import math
import string

import pytest
import yaml

from benchmarks import pollux
from rayjob_advisor import contract, features, profiles
from rayjob_advisor_testkit.paths import POLLUX, REPO
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


def test_pollux_conversion_follows_the_documented_rules():
    observations = pollux.pollux_observations(POLLUX, "bert")
    with (POLLUX / "bert" / "placements.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert len(observations) == len(rows) == 540
    for row, run in zip(rows, observations, strict=True):
        workers = sum(int(d) for d in row["placement"])
        assert (run.workers, run.nodes, run.gpus_per_worker) == (workers, len(row["placement"]), 1)
        assert run.batch_size == int(row["local_bsz"]) * workers
        steps = math.ceil(run.dataset_size / run.batch_size)
        assert run.execution_seconds == pytest.approx(steps * float(row["step_time"]))
    fractions = {run.dataset_size / pollux.TRAINING_SET_SIZES["bert"] for run in observations}
    assert len(fractions) == 4 and max(fractions) == pytest.approx(1.0)


def test_the_kuberay_profiling_rayjob_template_renders_a_valid_rayjob():
    template = string.Template((REPO / "hack" / "profile-rayjob.yaml").read_text())
    rendered = template.substitute(
        NAME="profile", SWEEP="--workload digits-cnn --workers 1,2", WHEEL="rayjob_advisor-0.1.0-py3-none-any.whl",
        RAY_VERSION="2.52.0", IMAGE="rayproject/ray:2.52.0-py311", NODES="4", CPUS_PER_NODE="4",
    )  # fmt: skip
    rayjob = yaml.safe_load(rendered)
    assert_valid_rayjob(rayjob)
    assert "rayjob-advisor profile --address auto" in rayjob["spec"]["entrypoint"]


def test_the_shipped_pollux_profiles_are_the_conversion_with_provenance(tmp_path):
    written = pollux.write_shipped(POLLUX, tmp_path)
    assert [path.name for path in written] == [f"pollux-{model}.csv" for model in pollux.MODELS]
    for path in written:
        shipped = profiles.SHIPPED_DATA / path.name
        assert shipped.read_bytes() == path.read_bytes(), "regenerate: python -m benchmarks.pollux --shipped"
        header = [line for line in shipped.read_text().splitlines() if line.startswith("#")]
        assert any(pollux.SOURCE_COMMIT in line and "placements.csv" in line for line in header)
        assert any("Apache-2.0" in line and "Copyright 2020 Petuum, Inc." in line for line in header)
    notice = (profiles.SHIPPED_DATA / "NOTICE").read_text()
    assert "Copyright 2020 Petuum, Inc. and the AdaptDL / Pollux authors" in notice
    assert "Apache License" in (profiles.SHIPPED_DATA / "LICENSE-pollux").read_text()
