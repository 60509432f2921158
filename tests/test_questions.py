"""The questions of the accuracy table as cuts of a measured dataset (``benchmarks.questions``)."""

from __future__ import annotations

from benchmarks import datasets, questions


def test_a_strong_scaling_cut_keeps_each_global_batch_and_shrinks_the_per_worker_batch():
    """Pollux cifar10 (shipped): 1-4 GPUs trained, 8-16 asked, each asked run at a global batch measured on at least
    two of the trained worker counts, so its per-worker batch is half the trained ones' or less."""
    runs = datasets.DATASETS["pollux-cifar10"]()
    cut = questions.strong_scaling(runs)
    assert not isinstance(cut, str)
    assert {run.workers for run in cut.train} <= {1, 2, 3, 4} and {run.workers for run in cut.test} <= set(range(8, 17))
    for asked in cut.test:
        same = [run for run in cut.train if abs(run.batch_size / asked.batch_size - 1) <= questions.SAME_GLOBAL_BATCH]
        assert len({run.workers for run in same}) >= 2
        trained = min(run.batch_size / run.workers for run in same)
        assert asked.batch_size / asked.workers <= trained / 2 * (1 + questions.SAME_GLOBAL_BATCH)
    assert len(cut.train) < len([run for run in runs if run.workers <= 4])  # not every trained batch is a series


def test_a_dataset_with_one_global_batch_per_scale_has_no_strong_scaling_cut():
    """MLPerf's first family: each scale a separately tuned submission, its own global batch."""
    cut = questions.strong_scaling(datasets.DATASETS["mlperf-resnet-nvidia-h100-eos"]())
    assert isinstance(cut, str) and "global batch" in cut


def test_held_out_questions_are_questions_the_table_asks():
    assert set(questions.HELD_OUT) <= set(questions.QUESTIONS)


def test_a_profile_at_two_worker_counts_is_asked_about_every_count_between():
    runs = datasets.DATASETS["pollux-bert"]()
    cut = questions.workers_two_counts(runs)
    assert not isinstance(cut, str)
    assert {run.workers for run in cut.train} == {1, 16}
    assert {run.workers for run in cut.test} == set(range(2, 16))
    two = [run for run in runs if run.workers in (1, 2)]
    assert questions.workers_two_counts(two) == "no runs on one side"


def test_eight_times_the_workers_is_issue_18s_a100_protocol():
    """ElasticFlow's A100 curves: fitted on one node's 1-8 GPUs, asked about 16-64 on 2-8 nodes."""
    cut = questions.workers_x8(datasets.DATASETS["elasticflow-resnet50"]())
    assert not isinstance(cut, str)
    assert {run.workers for run in cut.train} == {1, 2, 4, 8} and {run.workers for run in cut.test} == {16, 32, 64}
    one_node = questions.workers_x8(datasets.DATASETS["elasticflow-resnet50-cifar10"]())  # 1-8 GPUs: 1 to train on
    assert one_node == "fewer than 2 distinct values to train on"
