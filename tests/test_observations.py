"""Observation CSV: round trip, defaults, and bad rows located by file, line and column."""

from __future__ import annotations

import pytest

from rayjob_advisor.errors import ObservationsError
from rayjob_advisor.observations import CSV_COLUMNS, append_observation, read_observations, write_observations

HEADER = ",".join(CSV_COLUMNS)


def write(tmp_path, text: str):
    path = tmp_path / "runs.csv"
    path.write_text(text)
    return path


def test_round_trip_keeps_every_value(tmp_path, synthetic):
    path = tmp_path / "runs.csv"
    write_observations(path, synthetic)
    loaded, problems = read_observations(path)
    assert problems == []
    assert loaded == synthetic
    assert path.read_text().splitlines()[0] == HEADER


def test_only_required_columns_and_empty_cells_mean_unknown(tmp_path):
    path = write(tmp_path, "dataset_size,workers,execution_seconds,epochs\n1000,2,30.5,\n")
    (run,), _ = read_observations(path)
    assert (run.dataset_size, run.workers, run.execution_seconds) == (1000, 2, 30.5)
    assert run.epochs is None and run.batch_size is None and run.nodes is None


def test_bad_rows_are_reported_with_file_line_column_and_reason(tmp_path):
    path = write(
        tmp_path,
        "dataset_size,workers,execution_seconds\n"
        "1000,2,30\n"
        "abc,2,30\n"  # line 3: not an integer
        "1000,0,30\n"  # line 4: workers must be positive
        "1000,2\n"  # line 5: missing cell
        "\n"
        "1000,2,-1\n",  # line 7: negative time
    )
    with pytest.raises(ObservationsError) as raised:
        read_observations(path)
    found = [(p.line, p.column) for p in raised.value.problems]
    assert found == [(3, "dataset_size"), (4, "workers"), (5, None), (7, "execution_seconds")]
    message = str(raised.value)
    assert f"{path}:3: column 'dataset_size': Input should be a valid integer" in message
    assert f"{path}:4: column 'workers': Input should be greater than 0" in message
    assert "expected 3 cells, found 2" in message


def test_skipping_bad_rows_keeps_every_good_row_and_returns_the_bad_ones(tmp_path):
    path = write(tmp_path, "dataset_size,workers,execution_seconds\n1000,2,30\nx,2,30\n2000,4,20\n")
    good, problems = read_observations(path, skip_bad_rows=True)
    assert [o.dataset_size for o in good] == [1000, 2000]
    assert [(p.line, p.column) for p in problems] == [(3, "dataset_size")]


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("dataset_size,workers,seconds", "column 'seconds': unknown column"),
        ("dataset_size,workers", "column 'execution_seconds': required column is missing"),
        ("dataset_size,workers,execution_seconds,workers", "column 'workers': column appears twice"),
    ],
)
def test_bad_headers_are_rejected(tmp_path, header, reason):
    with pytest.raises(ObservationsError, match=reason):
        read_observations(write(tmp_path, header + "\n1,1,1\n"))


def test_empty_file_and_nodes_beyond_workers(tmp_path):
    with pytest.raises(ObservationsError, match="the file is empty"):
        read_observations(write(tmp_path, ""))
    with pytest.raises(ObservationsError, match=r":2: .*nodes \(3\) cannot exceed workers \(2\)"):
        read_observations(write(tmp_path, "dataset_size,workers,nodes,execution_seconds\n10,2,3,5\n"))


def test_comment_lines_before_the_header_are_provenance(tmp_path, synthetic):
    path = tmp_path / "runs.csv"
    write_observations(path, synthetic[:2], comments=["measured on 2 cores", "ray 2.60.0"])
    assert path.read_text().startswith("# measured on 2 cores\n# ray 2.60.0\nworkload,")
    loaded, _ = read_observations(path)
    assert loaded == synthetic[:2]


def test_append_creates_then_appends(tmp_path, synthetic):
    path = tmp_path / "runs.csv"
    append_observation(path, synthetic[0], comments=["sweep"])
    append_observation(path, synthetic[1], comments=["ignored once the file exists"])
    assert read_observations(path)[0] == synthetic[:2]
    assert path.read_text().count("#") == 1


def test_appending_to_a_file_with_an_older_header_rewrites_it_with_the_full_one(tmp_path, synthetic):
    """A sweep resumed on a CSV from before a column was added: its row would shift the old header's cells."""
    path = tmp_path / "runs.csv"
    path.write_text("# measured on 2 cores, ray 2.60\ndataset_size,workers,execution_seconds\n1000,2,5.5\n")
    append_observation(path, synthetic[0])
    comment, header, *rows = path.read_text().splitlines()
    assert comment == "# measured on 2 cores, ray 2.60" and header == HEADER and len(rows) == 2
    runs = read_observations(path)[0]
    assert (runs[0].dataset_size, runs[0].workers, runs[0].execution_seconds) == (1000, 2, 5.5)
    assert runs[1] == synthetic[0]
