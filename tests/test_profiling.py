"""The profiling harness: grids, resuming, failures, RuntimeProfile output, and real Ray Train runs."""

from __future__ import annotations

import json
import os
import sys
import time

import jsonschema
import pytest
import ray.cloudpickle
import yaml

from rayjob_advisor.cli.verbs import main
from rayjob_advisor.observations import Observation, read_observations, write_observations
from rayjob_advisor.profiles.codec import observation_from_k8s
from rayjob_advisor.profiling import harness
from rayjob_advisor_testkit.paths import REPO

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import tests/


def test_grid_is_every_combination_repeat_by_repeat():
    specs = harness.grid("w", [1, 2], [100, 200], [1], [32], [0.5, 1.0], 0.0, repeats=2)
    assert len(specs) == 16
    assert [s.repeat for s in specs] == [0] * 8 + [1] * 8
    assert len({s.source for s in specs}) == 16
    assert specs[0].source == "sweep:w:n100:e1:b32:w1:c0.5:g0:r0"


def fake_observation(spec: harness.RunSpec) -> Observation:
    return Observation.measured(
        spec, nodes=1, execution_seconds=10.0 / spec.workers, startup_seconds=1.0, source=spec.source
    )


def test_an_interrupted_sweep_resumes_without_repeating_or_losing_runs(tmp_path):
    out = tmp_path / "runs.csv"
    specs = harness.grid("w", [1, 2, 4], [100, 200], [1], [32], [1.0], 0.0, repeats=1)
    calls: list[str] = []

    def interrupted(spec):
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C during the 4th run
        calls.append(spec.source)
        return fake_observation(spec)

    with pytest.raises(KeyboardInterrupt):
        harness.sweep(specs, interrupted, out, ["provenance"], progress=False)
    assert [o.source for o in read_observations(out)[0]] == calls

    resumed: list[str] = []
    summary = harness.sweep(specs, lambda s: resumed.append(s.source) or fake_observation(s), out, progress=False)
    assert resumed == [s.source for s in specs[3:]]
    assert (summary.finished, summary.skipped, summary.failed) == (3, 3, 0)
    assert [o.source for o in read_observations(out)[0]] == [s.source for s in specs]
    assert out.read_text().startswith("# provenance\n")


def test_failed_runs_are_recorded_and_retried_on_resume(tmp_path):
    out = tmp_path / "runs.csv"
    specs = harness.grid("w", [1, 2], [100], [1], [32], [1.0], 0.0, repeats=1)

    def second_fails(spec):
        if spec.workers == 2:
            raise harness.RunFailed("ValueError: out of memory")
        return fake_observation(spec)

    summary = harness.sweep(specs, second_fails, out, progress=False)
    assert (summary.finished, summary.failed) == (1, 1)
    failures = harness.failures_path(out).read_text().splitlines()
    assert failures[0] == "source,error,time"
    assert failures[1].startswith(f"{specs[1].source},ValueError: out of memory,")
    retry = harness.sweep(specs, fake_observation, out, progress=False)
    assert (retry.finished, retry.skipped) == (1, 1)


def test_a_sweep_or_plan_with_nothing_left_to_run_starts_no_ray(tmp_path, capsys):
    """Resuming a finished sweep or plan starts no Ray: the first run that needs it does (so here, with an address
    nothing listens on, a start would fail both)."""
    out, plan = tmp_path / "runs.csv", tmp_path / "plan.yaml"
    specs = harness.grid("digits-cnn", [1, 2], [1000], [1], [128], [0.5], 0.0, repeats=1)
    write_observations(out, [fake_observation(spec) for spec in specs])
    nowhere = ["--address", "127.0.0.1:9", "--out", str(out), "--no-progress"]
    argv = ["profile", "--workload", "digits-cnn", "--workers", "1,2", "--dataset-sizes", "1000", "--batch-size", "128",
            "--cpus-per-worker", "0.5", "--repeats", "1", *nowhere]  # fmt: skip
    assert main(argv) == 0
    assert "0 runs finished, 2 already in" in capsys.readouterr().out
    candidates = {"workers": [1, 2], "dataset_sizes": [1000], "batch_sizes": [128]}
    plan.write_text(yaml.safe_dump({"workload": "digits-cnn", "candidates": candidates, "targets": candidates,
                                    "cpus_per_worker": 0.5, "repeats": 1, "max_runs": 2}))  # fmt: skip
    assert main(["profile", "--plan", str(plan), *nowhere]) == 0
    assert "0 runs finished, 0 failed" in capsys.readouterr().out


def test_train_functions_by_name(tmp_path):
    assert harness.load_train_function("digits-cnn") is harness.WORKLOADS["digits-cnn"]
    assert harness.load_train_function("json:dumps") is json.dumps
    with pytest.raises(ValueError, match="unknown workload 'mystery'"):
        harness.load_train_function("mystery")
    with pytest.raises(ValueError, match="json has no function 'nothing'"):
        harness.load_train_function("json:nothing")


def test_emitted_runtime_profile_is_valid_and_round_trips(synthetic, tmp_path, capsys):
    from rayjob_advisor.observations import write_observations

    data = tmp_path / "runs.csv"
    write_observations(data, synthetic)
    assert main(["profile", "--emit-profile", "--data", str(data)]) == 0
    manifest = yaml.safe_load(capsys.readouterr().out)
    crd = yaml.safe_load((REPO / "crds" / "rayjob-advisor.io_runtimeprofiles.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.Draft4Validator(schema).validate(manifest)
    assert (manifest["kind"], manifest["metadata"]["name"], manifest["spec"]["workload"]) == (
        "RuntimeProfile", "synthetic", "synthetic",
    )  # fmt: skip
    back = [observation_from_k8s("synthetic", item) for item in manifest["spec"]["observations"]]
    assert back == synthetic


def test_sweep_options_are_checked(capsys):
    assert main(["profile", "--workload", "digits-cnn"]) == 2
    assert "a sweep needs --workers, --dataset-sizes, --batch-size, --out" in capsys.readouterr().err
    assert (
        main(
            [
                "profile",
                "--workload",
                "x",
                "--workers",
                "1",
                "--dataset-sizes",
                "8",
                "--batch-size",
                "8",
                "--out",
                "o.csv",
            ]
        )
        == 2
    )
    assert "unknown workload 'x'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value"),
    [("--repeats", "0"), ("--repeats", "2,3"), ("--gpus-per-worker", "-1"), ("--gpus-per-worker", "nan"),
     ("--cpus-per-worker", "nan"), ("--workers", "0")],
)  # fmt: skip
def test_bad_sweep_numbers_are_usage_errors_before_ray_starts(option, value, capsys):
    argv = ["profile", "--workload", "digits-cnn", "--workers", "1", "--dataset-sizes", "8", "--batch-size", "8"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--out", "o.csv", option, value])
    assert exited.value.code == 2 and f"argument {option}: {value!r}" in capsys.readouterr().err


# Real Ray Train: one tiny run through the CLI, one failing training function.


@pytest.mark.ray
def test_a_real_ray_train_run_follows_a_plan_and_records_a_sane_row(tmp_path, capsys):
    """One tiny real run, chosen by a plan (``profile --plan``), then found done by the grid sweep of it."""
    out, plan = tmp_path / "runs.csv", tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "workload": "digits-cnn",
                "candidates": {"workers": [1, 2], "dataset_sizes": [1000, 2000], "batch_sizes": [128]},
                "targets": {"workers": [4], "dataset_sizes": [8000], "batch_sizes": [128]},
                "cpus_per_worker": 0.5,
                "repeats": 3,
                "max_runs": 10,
            }
        )
    )
    done = [  # nine runs measured before: the plan's only candidates left are 2 workers on 2000 samples
        Observation(workload="digits-cnn", dataset_size=size, epochs=1, batch_size=128, workers=workers,
                    cpus_per_worker=0.5, gpus_per_worker=0.0, nodes=1, execution_seconds=size / 1e3 / workers + rep / 9)
        for size, workers in ((1000, 1), (2000, 1), (1000, 2))
        for rep in range(3)
    ]  # fmt: skip
    write_observations(out, done, harness.provenance())
    started = time.time()
    assert main(["profile", "--plan", str(plan), "--out", str(out), "--no-progress"]) == 0
    wall = time.time() - started
    printed = capsys.readouterr().out
    assert "1 runs finished, 0 failed" in printed and "stop: the plan's most runs are measured" in printed
    *_, run = read_observations(out)[0]
    assert (run.workload, run.workers, run.nodes, run.dataset_size, run.batch_size) == ("digits-cnn", 2, 1, 2000, 128)
    assert run.node_cpus is not None and 1 <= run.node_cpus <= (os.cpu_count() or 1)  # as Ray counts this node's
    assert 0 < run.execution_seconds < wall and 0 < run.startup_seconds < wall
    assert run.startup_seconds + run.execution_seconds < wall
    assert out.read_text().splitlines()[2].startswith("# python ")  # provenance header
    argv = ["profile", "--workload", "digits-cnn", "--workers", "2", "--dataset-sizes", "2000", "--batch-size", "128",
            "--cpus-per-worker", "0.5", "--repeats", "1", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0  # the grid's run is the plan's: resuming finds it done
    assert "0 runs finished, 1 already in" in capsys.readouterr().out


def failing_training(config):
    raise ValueError(f"cannot train on {config['dataset_size']} samples")


@pytest.mark.ray
def test_a_failing_training_function_is_recorded_as_a_failed_run(tmp_path):
    out = tmp_path / "runs.csv"
    specs = harness.grid("broken", [1], [10], [1], [8], [0.5], 0.0, repeats=1)
    with harness.RaySession() as session:
        runner = harness.RayTrainRunner(failing_training, str(tmp_path), session)
        summary = harness.sweep(specs, runner, out, progress=False)
    assert (summary.finished, summary.failed) == (0, 1)
    assert not out.exists()
    (failure,) = harness.failures_path(out).read_text().splitlines()[1:]
    assert failure.startswith(specs[0].source) and "ValueError: cannot train on 10 samples" in failure
