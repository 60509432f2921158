"""Gavel's throughputs as runs (``benchmarks.gavel``), and their datasets held out of every setting's choice."""

import json

import pytest

from benchmarks import datasets, gavel, questions


def _throughputs() -> dict[str, dict[str, dict[str, object]]]:
    def entry(rate: float) -> dict[str, object]:
        return {"null": rate, "('ResNet-18 (batch size 16)', 1)": [1.0, 1.0]}

    resnet = "ResNet-18 (batch size 16)"
    consolidated = {f"('{resnet}', {n})": entry(rate) for n, rate in ((1, 10.0), (2, 16.0), (4, 0.0))}
    consolidated["('CycleGAN', 1)"] = entry(3.0)
    unconsolidated = {f"('{resnet}', {n})": entry(rate) for n, rate in ((1, 10.0), (2, 12.5))}
    return {
        gpu + suffix: table
        for gpu in ("p100", "v100")
        for suffix, table in (("", consolidated), ("_unconsolidated", unconsolidated))
    }


def test_a_throughput_counts_every_workers_steps_at_a_per_worker_batch():
    runs = gavel.runs(_throughputs(), "resnet18", "p100")
    by_placement = {(run.workers, run.nodes): run for run in runs}
    assert sorted(by_placement) == [(1, 1), (2, 1), (2, 2)]  # no run where it did not fit, no other model
    one, packed, spread = by_placement[(1, 1)], by_placement[(2, 1)], by_placement[(2, 2)]
    assert (one.batch_size, packed.batch_size) == (16, 32)
    # an epoch of CIFAR-10: 50,000 / 16 steps of all workers together at 10 and 16 steps/s, 12.5 across servers
    assert one.execution_seconds == pytest.approx(50_000 / 16 / 10, abs=1e-3)
    assert packed.execution_seconds == pytest.approx(50_000 / 16 / 16, abs=1e-3)
    assert spread.execution_seconds == pytest.approx(50_000 / 16 / 12.5, abs=1e-3)
    assert {run.accelerator for run in runs} == {"p100"} and {run.gpus_per_worker for run in runs} == {1}


def test_the_v100s_sharing_a_server_are_left_out_beyond_one_gpu():
    runs = gavel.runs(_throughputs(), "resnet18", "v100")
    assert sorted((run.workers, run.nodes) for run in runs) == [(1, 1), (2, 2)]


def test_a_csv_per_model_and_gpu_type_each_a_dataset(tmp_path):
    source = tmp_path / gavel.THROUGHPUTS
    source.parent.mkdir(parents=True)
    source.write_text(json.dumps({gpu + s: {} for gpu in gavel.GPUS for s in ("", "_unconsolidated")}))
    assert gavel.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out").glob("gavel-*.csv"))) == len(gavel.names())
    for name in gavel.names():
        runs = datasets.DATASETS[name]()
        assert {run.workers for run in runs} == {1, 2, 4, 8}, name
        assert {run.workload for run in runs} == {name}


def test_a_folder_that_is_not_a_gavel_checkout_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        gavel.main([str(tmp_path)])
    assert stopped.value.code == 2
    assert "is not a checkout of https://github.com/stanford-futuredata/gavel" in capsys.readouterr().err


def test_each_gpu_type_is_a_new_accelerator_beside_the_others():
    runs = datasets.DATASETS["gavel-lm-p100"]()
    cuts = questions.transfer_cuts("gavel-lm-p100", runs)
    assert [cut.source for cut in cuts] == ["k80", "v100"]
    for cut in cuts:
        assert {run.workload for run in cut.source_runs + cut.target} == {"gavel-lm"}
        assert {run.accelerator for run in cut.source_runs} == {cut.source}
        assert len(cut.target) == questions.TRANSFER_RUNS and {run.workers for run in cut.target} <= {1, 2}
        assert len(cut.test) == len(runs) - questions.TRANSFER_RUNS
    assert questions.transfer_cuts("pollux-bert", datasets.DATASETS["pollux-bert"]()) == []
