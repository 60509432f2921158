"""ElasticFlow's A100 throughputs as runs (``benchmarks.elasticflow``), and their datasets held out of every choice."""

import pytest

from benchmarks import datasets, elasticflow

TABLE = "global_batch_size,1,8,16\n64,4.0,20.0,\n128,2.0,16.0,0\n"


def test_a_row_is_a_strong_scaling_curve_of_steps_per_second():
    runs = {(run.batch_size, run.workers): run for run in elasticflow.runs(TABLE, "resnet50")}
    assert sorted(runs) == [(64, 1), (64, 8), (128, 1), (128, 8)]  # no run where a cell is empty or 0
    # the work: 1,000 steps of the largest global batch; a batch of 64 takes 2,000 steps at 4 and 20 a second
    assert {run.dataset_size for run in runs.values()} == {elasticflow.STEPS * 128}
    assert runs[(64, 1)].execution_seconds == pytest.approx(2000 / 4.0)
    assert runs[(64, 8)].execution_seconds == pytest.approx(2000 / 20.0)
    assert runs[(128, 8)].execution_seconds == pytest.approx(1000 / 16.0)
    assert {run.nodes for run in runs.values()} == {1} and {run.accelerator for run in runs.values()} == {"a100"}


def test_gpus_fill_nodes_of_eight():
    runs = elasticflow.runs("global_batch_size,8,16,64\n64,1.0,2.0,3.0\n", "bert")
    assert [(run.workers, run.nodes) for run in runs] == [(8, 1), (16, 2), (64, 8)]


def test_every_model_is_a_dataset(tmp_path):
    folder = tmp_path / elasticflow.THROUGHPUTS
    folder.mkdir(parents=True)
    for model in elasticflow.MODELS:
        (folder / f"{model}.csv").write_text(TABLE, encoding="utf-8")
    assert elasticflow.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out").glob("elasticflow-*.csv"))) == len(elasticflow.MODELS)
    for name in elasticflow.names():
        runs = datasets.DATASETS[name]()
        assert {run.workload for run in runs} == {name} and len({run.workers for run in runs}) >= 4, name


def test_a_folder_that_is_not_an_elasticflow_checkout_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        elasticflow.main([str(tmp_path)])
    assert stopped.value.code == 2
    assert "is not a checkout of https://github.com/pkusys/ElasticFlow" in capsys.readouterr().err
