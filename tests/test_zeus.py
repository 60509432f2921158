"""Zeus's epoch times as runs (``benchmarks.zeus``), and their datasets held out of every setting's choice."""

import pytest

from benchmarks import accuracy, datasets, questions, zeus

HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
TABLE = HEADER + "".join(
    f"cifar100,shufflenetv2,{batch},{optimizer},{power},{seconds},100.0\n"
    for batch, optimizer, power, seconds in (
        (8, "adadelta", 250, 240.31),
        (8, "adadelta", 200, 260.0),
        (8, "adam", 250, 225.4),
        (64, "adadelta", 250, 33.2),
        (64, "adadelta", 150, 45.0),
        (512, "adadelta", 200, 9.5),  # measured only at a lower limit: not a run at the GPU's largest
    )
)


def test_a_run_is_one_epoch_at_the_largest_power_limit_with_the_trained_optimizer():
    runs = zeus.runs(TABLE, "cifar100", "v100")
    assert [(run.batch_size, run.execution_seconds) for run in runs] == [(8, 240.31), (64, 33.2)]
    assert {(run.workers, run.nodes, run.gpus_per_worker, run.epochs) for run in runs} == {(1, 1, 1, 1)}
    assert {run.dataset_size for run in runs} == {50_000} and {run.accelerator for run in runs} == {"v100"}
    assert {run.workload for run in runs} == {"zeus-cifar100-v100"}
    assert zeus.runs(TABLE, "imagenet", "v100") == []  # a workload the trace does not hold


def test_every_workload_and_gpu_is_a_dataset(tmp_path):
    folder = tmp_path / zeus.TRACES
    folder.mkdir(parents=True)
    for gpu in zeus.GPUS:
        (folder / f"summary_power_{gpu}.csv").write_text(TABLE, encoding="utf-8")
    assert zeus.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out").glob("zeus-*.csv"))) == len(zeus.names())
    for name in zeus.names():
        runs = datasets.DATASETS[name]()
        assert {run.workload for run in runs} == {name} and len({run.batch_size for run in runs}) >= 4, name


def test_a_folder_that_is_not_a_zeus_checkout_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        zeus.main([str(tmp_path)])
    assert stopped.value.code == 2
    assert "is not a checkout of https://github.com/ml-energy/zeus" in capsys.readouterr().err


def test_a_new_gpu_is_asked_about_at_the_batches_it_was_not_measured_at():
    runs = datasets.DATASETS["zeus-movielens-p100"]()
    cuts = questions.transfer_cuts("zeus-movielens-p100", runs)
    assert sorted(cut.source for cut in cuts) == ["a40", "rtx6000", "v100"]
    for cut in cuts:
        assert len(cut.target) == questions.TRANSFER_RUNS and len(cut.test) == len(runs) - questions.TRANSFER_RUNS
        assert not {run.batch_size for run in cut.target} & {run.batch_size for run in cut.test}
        assert {run.workload for run in cut.source_runs + cut.target} == {"zeus-movielens"}


def test_transfers_that_cannot_be_asked_are_skipped_with_the_reason():
    runs = datasets.DATASETS["zeus-sentiment140-p100"]()  # 4 runs: all of them the new GPU's few
    rows, skipped = accuracy.transfer_rows("zeus-sentiment140-p100", runs)
    assert rows == [] and len(skipped) == len(zeus.GPUS) - 1
    assert set(skipped.values()) == {"every run is among the new accelerator's few: none left to ask about"}
