"""The accuracy table's summaries (``benchmarks.accuracy``): which rows are of data the settings were chosen on."""

import pytest

from benchmarks import accuracy, datasets, elasticflow, gavel, zeus


def _row(dataset: str, question: str, chosen: float) -> accuracy.Row:
    return accuracy.Row(dataset, question, 10, 5, "combined", chosen, {"sync-sgd": chosen}, 2 * chosen, 1.0)


def test_a_held_out_dataset_or_question_is_summarised_apart_from_the_data_settings_are_chosen_on(capsys):
    rows = [
        _row("pollux-bert", "workers-x4", 0.05),
        _row("pollux-bert", "workers-x4", 0.15),
        _row("pollux-bert", "workers-two-counts", 0.30),  # a held-out question of a tuning dataset
        _row("zeus-movielens-v100", "transfer<-a40", 0.20),  # a held-out dataset
    ]
    accuracy.print_summary(rows, accuracy.held_out)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["chosen", "on", "workers-x4"],
        ["held", "out", "transfer"],
        ["held", "out", "workers-two-counts"],
    ]
    assert "10.0 /   10.0 /   20.0  cov 1.00  1/2 pass" in lines[0]  # 15 % misses workers x4's 10 % target


@pytest.mark.parametrize(
    ("names", "family"),
    [
        (gavel.names(), "held-out-gavel"),
        (elasticflow.names(), "held-out-elasticflow"),
        (zeus.names(), "held-out-zeus"),
        (list(datasets.OWN_RAY_HELD_OUT), "held-out-ray"),
    ],
)
def test_a_held_out_family_is_reachable_reported_apart_and_chooses_no_setting(names: list[str], family: str):
    assert names and set(names) <= set(datasets.reachable()) & set(datasets.HELD_OUT)
    assert not set(names) & set(datasets.tuning())
    assert {datasets.family(name) for name in names} == {family}
