"""Parsing the §3 input annotations into a frozen model; errors name the annotation key."""

from __future__ import annotations

import datetime as dt
import math

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rayjob_advisor import contract as ann
from rayjob_advisor.errors import AnnotationError


def test_all_inputs_parse():
    inputs = ann.parse_inputs(
        {
            ann.WORKLOAD: "digits",
            ann.DEADLINE: "2h30m",
            ann.MODE: "enforce",
            ann.DATASET_SIZE: "60000",
            ann.EPOCHS: "3",
            ann.BATCH_SIZE: "256",
            ann.CONFIDENCE: "0.95",
            ann.SCALE_GROUP: "gpu",
            "unrelated.io/key": "kept out",
        }
    )
    assert (inputs.workload, inputs.mode, inputs.dataset_size, inputs.epochs) == ("digits", "enforce", 60000, 3)
    assert (inputs.batch_size, inputs.confidence, inputs.scale_group) == (256, 0.95, "gpu")
    assert inputs.deadline.after == dt.timedelta(hours=2, minutes=30)
    with pytest.raises(pydantic.ValidationError):
        inputs.mode = "off"  # frozen


def test_defaults_and_where_workload_and_mode_may_come_from():
    inputs = ann.parse_inputs(None, labels={ann.WORKLOAD: "mlp"}, namespace_labels={ann.MODE: "off"})
    assert (inputs.workload, inputs.mode, inputs.confidence, inputs.deadline) == ("mlp", "off", 0.9, None)
    annotated = ann.parse_inputs({ann.MODE: "enforce"}, namespace_labels={ann.MODE: "off"})
    assert annotated.mode == "enforce"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", dt.timedelta(minutes=90)),
        ("45s", dt.timedelta(seconds=45)),
        ("1h", dt.timedelta(hours=1)),
        ("2h30m", dt.timedelta(hours=2, minutes=30)),
        ("1h30m", dt.timedelta(minutes=90)),
        ("1.5h", dt.timedelta(minutes=90)),
        ("1m30.5s", dt.timedelta(seconds=90.5)),
        ("2h5m0s", dt.timedelta(hours=2, minutes=5)),
        (" 90m ", dt.timedelta(minutes=90)),
    ],
)
def test_duration_deadlines_count_from_creation(text, expected):
    created = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
    assert ann.parse_deadline(text).resolve(created) == created + expected


def test_rfc3339_deadlines():
    at = ann.parse_deadline("2026-12-02T18:00:00Z").resolve(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    assert at == dt.datetime(2026, 12, 2, 18, tzinfo=dt.UTC)
    assert ann.parse_deadline("2026-12-02T18:00:00+01:00").at.utcoffset() == dt.timedelta(hours=1)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({ann.DATASET_SIZE: "lots"}, "rayjob-advisor.io/dataset-size='lots': Input should be a valid integer"),
        ({ann.EPOCHS: "0"}, "rayjob-advisor.io/epochs='0': Input should be greater than 0"),
        ({ann.MODE: "always"}, "rayjob-advisor.io/mode='always': Input should be 'off', 'recommend' or 'enforce'"),
        ({ann.CONFIDENCE: "1.5"}, "rayjob-advisor.io/confidence='1.5': Input should be less than 1"),
        ({ann.DEADLINE: "tomorrow"}, "neither an RFC 3339 time"),
        ({ann.DEADLINE: "2026-12-02T18:00:00"}, "has no time zone offset"),
        ({ann.DEADLINE: "0m"}, "rayjob-advisor.io/deadline='0m': Value error, a deadline duration must be positive"),
        ({ann.DEADLINE: "-90m"}, "deadline='-90m': Value error, a deadline duration must be positive"),
        ({ann.DEADLINE: "90"}, "neither an RFC 3339 time (2026-12-02T18:00:00Z) nor a Go duration"),
        ({ann.DEADLINE: "2H"}, "neither an RFC 3339 time"),
        ({ann.DEADLINE: "2d"}, "neither an RFC 3339 time"),  # Go has no day unit
        ({ann.DEADLINE: "87600000h"}, "deadline='87600000h': Value error, a deadline duration must be at most 8784h"),
        ({ann.DATASET_SIZE: "1" + "0" * 400}, "Input should be less than or equal to 1000000000000"),
        ({ann.BATCH_SIZE: "1" + "0" * 40}, "batch-size='1000"),
        ({ann.DEADLINE: "1h-30m"}, "neither an RFC 3339 time"),
        ({ann.DEADLINE: "1h 30m"}, "neither an RFC 3339 time"),
        ({ann.WORKLOAD: "  "}, "rayjob-advisor.io/workload='  ': Value error, must not be empty"),
    ],
)
def test_bad_annotations_name_the_key_and_the_reason(annotations, message):
    with pytest.raises(AnnotationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ann.parse_inputs(annotations)


def test_several_bad_annotations_are_all_reported():
    with pytest.raises(AnnotationError) as raised:
        ann.parse_inputs({ann.EPOCHS: "x", ann.BATCH_SIZE: "-3"})
    assert "epochs" in str(raised.value) and "batch-size" in str(raised.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (-3, "0s"),
        (45.2, "46s"),
        (60, "1m"),
        (1052, "17m32s"),
        (3600, "1h"),
        (7500, "2h5m"),
        (90061, "25h1m1s"),
    ],
)
def test_durations_print_as_go_durations(seconds, text):
    assert ann.format_duration(seconds) == text


@given(st.floats(min_value=0.001, max_value=1e6))
def test_printed_durations_parse_back_as_deadlines(seconds):
    after = ann.parse_deadline(ann.format_duration(seconds)).after
    assert after == dt.timedelta(seconds=math.ceil(seconds))


def test_where_the_training_worker_count_is_set():
    inputs = ann.parse_inputs({ann.WORKERS_ENV: " TRAIN_WORKERS "})
    assert (inputs.workers_env, inputs.workers_arg, inputs.workers_from) == ("TRAIN_WORKERS", None, None)
    assert ann.parse_inputs({ann.WORKERS_ARG: "-n"}).workers_arg == "-n"
    assert ann.parse_inputs({ann.WORKERS_FROM: "cluster"}).workers_from == "cluster"


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({ann.WORKERS_ENV: "NUM WORKERS"}, "rayjob-advisor.io/workers-env='NUM WORKERS': String should match pattern"),
        ({ann.WORKERS_ARG: "num-workers"}, "rayjob-advisor.io/workers-arg='num-workers': String should match pattern"),
        ({ann.WORKERS_ARG: "--workers=4"}, "rayjob-advisor.io/workers-arg='--workers=4': String should match pattern"),
        ({ann.WORKERS_FROM: "env"}, "rayjob-advisor.io/workers-from='env': Input should be 'cluster'"),
        (
            {ann.WORKERS_ENV: "NUM_WORKERS", ann.WORKERS_FROM: "cluster"},
            "set at most one of rayjob-advisor.io/workers-env, rayjob-advisor.io/workers-from",
        ),
    ],
)
def test_bad_worker_count_declarations_name_the_key(annotations, message):
    with pytest.raises(AnnotationError, match=message):
        ann.parse_inputs(annotations)


def test_batch_and_placement_inputs():
    inputs = ann.parse_inputs({ann.BATCH_SIZE_PER_WORKER: "32", ann.PLACEMENT: "spread"})
    assert (inputs.batch_size, inputs.batch_size_per_worker, inputs.batch_scaling) == (None, 32, "per-worker")
    assert inputs.placement == "spread"
    held = ann.parse_inputs({ann.BATCH_SIZE: "256", ann.BATCH_SCALING: "global"})
    assert (held.batch_size, held.batch_scaling, held.placement) == (256, "global", None)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {ann.BATCH_SIZE: "256", ann.BATCH_SIZE_PER_WORKER: "32"},
            "set at most one of rayjob-advisor.io/batch-size (the global batch) and "
            "rayjob-advisor.io/batch-size-per-worker",
        ),
        (
            {ann.BATCH_SIZE_PER_WORKER: "32", ann.BATCH_SCALING: "global"},
            "rayjob-advisor.io/batch-scaling=global keeps a global batch fixed: it needs rayjob-advisor.io/batch-size",
        ),
        ({ann.BATCH_SCALING: "global"}, "batch-scaling=global keeps a global batch fixed"),
        (
            {ann.BATCH_SCALING: "fixed"},
            "rayjob-advisor.io/batch-scaling='fixed': Input should be 'per-worker' or 'global'",
        ),
        (
            {ann.BATCH_SIZE_PER_WORKER: "0"},
            "rayjob-advisor.io/batch-size-per-worker='0': Input should be greater than 0",
        ),
        (
            {ann.PLACEMENT: "anywhere"},
            "rayjob-advisor.io/placement='anywhere': Input should be 'packed', 'spread' or 'one-per-node'",
        ),
        ({ann.EPOCHS: "5000000"}, "rayjob-advisor.io/epochs='5000000': Input should be less than or equal to 1000000"),
        (
            {ann.DATASET_SIZE: str(10**9), ann.EPOCHS: "10000"},
            "rayjob-advisor.io/dataset-size x rayjob-advisor.io/epochs is more than 1e\\+12 samples",
        ),
    ],
)
def test_bad_batch_and_placement_inputs_name_the_keys(annotations, message):
    with pytest.raises(AnnotationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ann.parse_inputs(annotations)


def test_an_absolute_deadline_more_than_a_year_away_is_an_input_error():
    now = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
    near = ann.parse_inputs({ann.DEADLINE: "2027-12-01T12:00:00Z"})
    assert near.within_reach(now) is near
    far = ann.parse_inputs({ann.DEADLINE: "2036-12-02T12:00:00Z"})
    with pytest.raises(AnnotationError, match=r"deadline='2036-12-02T12:00:00\+00:00': more than 8784h from now"):
        far.within_reach(now)
    assert ann.parse_inputs({ann.DEADLINE: "8784h"}).within_reach(now).deadline.after == dt.timedelta(days=366)
