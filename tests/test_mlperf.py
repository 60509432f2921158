"""MLPerf Training logs as runs (``benchmarks.mlperf``), and their datasets held out of every setting's choice."""

import json
import pathlib

import pytest

from benchmarks import datasets, mlperf

SYSTEM = {"number_of_nodes": "2", "accelerators_per_node": "4", "accelerator_model_name": "NVIDIA A100-SXM-80GB"}


def _log(path: pathlib.Path, events: list[tuple[int, str, object, dict[str, object]]]) -> pathlib.Path:
    lines = ["some framework output"]
    for time_ms, key, value, metadata in events:
        event = {"namespace": "", "time_ms": time_ms, "key": key, "value": value, "metadata": metadata}
        lines.append(f":::MLLOG {json.dumps(event)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _resnet(tmp_path: pathlib.Path, status: str) -> pathlib.Path:
    return _log(
        tmp_path / "result_0.txt",
        [
            (1_000, "init_start", None, {}),
            (31_000, "global_batch_size", 3264, {}),
            (41_000, "run_start", None, {}),
            (41_000, "train_samples", 1281167, {}),
            (500_000, "eval_accuracy", 0.71, {"epoch_num": 31}),
            (541_500, "eval_accuracy", 0.76, {"epoch_num": 35}),
            (541_500, "run_stop", None, {"status": status}),
        ],
    )


def test_a_resnet_run_is_its_epochs_over_imagenet_on_every_gpu_of_its_nodes(tmp_path):
    run = mlperf.run(_resnet(tmp_path, "success"), "resnet", SYSTEM, "mlperf-resnet-x")
    assert run is not None
    assert (run.dataset_size, run.epochs, run.batch_size) == (1281167, 35, 3264)
    assert (run.workers, run.nodes, run.gpus_per_worker, run.accelerator) == (8, 2, 1, "a100")
    assert (run.execution_seconds, run.startup_seconds) == (500.5, 40.0)


def test_a_bert_run_is_the_samples_it_trained_once(tmp_path):
    log = _log(
        tmp_path / "result_1.txt",
        [
            (0, "init_start", None, {}),
            (5_000, "global_batch_size", 448, {}),
            (9_000, "run_start", None, {}),
            (90_000, "eval_accuracy", 0.72, {"epoch_num": 2801664}),
            (90_010, "train_samples", 2801664, {}),
            (90_020, "run_stop", None, {"status": "success"}),
        ],
    )
    run = mlperf.run(log, "bert", SYSTEM, "mlperf-bert-x")
    assert run is not None
    assert (run.dataset_size, run.epochs, run.execution_seconds) == (2801664, 1, pytest.approx(81.02))


def test_a_llama_run_is_the_sequences_it_trained_by_its_stop_not_the_dataset_it_logs(tmp_path):
    log = _log(
        tmp_path / "result_2.txt",
        [
            (0, "init_start", None, {}),
            (1_000, "global_batch_size", 32, {}),
            (1_000, "train_samples", 1574207408, {}),  # the corpus, not what the run trained
            (90_000, "run_start", None, {}),
            (3_600_000, "eval_accuracy", 3.27, {"samples_count": 196608}),
            (3_600_020, "run_stop", None, {"samples_count": 196608, "status": "success"}),
        ],
    )
    blackwell = {**SYSTEM, "accelerator_model_name": "NVIDIA Blackwell GPU (B200-SXM-180GB)"}
    run = mlperf.run(log, "llama31_8b", blackwell, "mlperf-llama31_8b-x")
    assert run is not None
    assert (run.dataset_size, run.epochs, run.batch_size, run.accelerator) == (196608, 1, 32, "b200")
    assert run.execution_seconds == pytest.approx(3510.02)


def test_a_run_that_did_not_reach_its_target_is_not_a_run(tmp_path):
    assert mlperf.run(_resnet(tmp_path, "aborted"), "resnet", SYSTEM, "mlperf-resnet-x") is None


def test_every_converted_series_is_a_dataset_and_the_held_out_ones_choose_no_setting():
    for name in mlperf.names():
        runs = datasets.DATASETS[name]()
        assert len({run.workers for run in runs}) >= 3, name
        assert {run.workload for run in runs} == {name}
    assert set(mlperf.names()) <= set(datasets.reachable())
    held_out = set(mlperf.names(held_out=True))
    assert held_out and held_out < set(mlperf.names())
    assert not held_out & set(datasets.tuning())
    assert {datasets.family(name) for name in held_out} == {"held-out", "held-out-v1", "held-out-llm"}
    assert datasets.family("mlperf-bert-dell-gb200") == "mlperf"
    assert {"pollux-bert", "mlperf-bert-dell-gb200"} <= set(datasets.tuning())
    assert not set(mlperf.names()) & set(datasets.sweeps())


def test_a_folder_that_is_not_a_results_checkout_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        mlperf.main(["v3.0", str(tmp_path)])
    assert stopped.value.code == 2
    assert "is not a checkout of https://github.com/mlcommons/training_results_v3.0" in capsys.readouterr().err
