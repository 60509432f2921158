"""The Grafana dashboard queries only metrics the code exports, through the $datasource variable, and Prometheus's
promtool evaluates every query to what its panel should show."""

from __future__ import annotations

import json
import math
import re

import yaml

from benchmarks import dashboard_picture
from rayjob_advisor.kube.metrics import ADMISSION_BUCKETS, ERROR_BUCKETS
from rayjob_advisor_testkit import prometheus
from rayjob_advisor_testkit.prometheus import DASHBOARD, exported_series


def test_every_panel_queries_only_exported_metrics():
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_series()
    queried = set()
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            names = set(re.findall(r"\brayjob_advisor_[a-z_]+", target["expr"]))
            assert names, f"{panel['title']}: no rayjob-advisor metric in {target['expr']!r}"
            assert names <= exported, f"{panel['title']}: {sorted(names - exported)} are not exported"
            queried |= names
    expected = {
        "rayjob_advisor_predicted_runtime_seconds", "rayjob_advisor_actual_runtime_seconds",
        "rayjob_advisor_underestimates_total", "rayjob_advisor_deadline_outcomes_total",
        "rayjob_advisor_model_cv_error_ratio", "rayjob_advisor_admission_duration_seconds_bucket",
    }  # fmt: skip
    assert expected <= queried
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]


def histogram(name: str, labels: str, buckets: tuple[float, ...], per_minute: dict[float, int]) -> list[dict]:
    """The bucket and count series of a histogram that gets ``per_minute[v]`` observations of each ``v`` a minute."""
    cumulative = {le: sum(n for v, n in per_minute.items() if v <= le) for le in (*buckets, math.inf)}
    return [
        *({"series": f'{name}_bucket{{{labels}le="{le}"}}', "values": f"0+{n}x120"} for le, n in cumulative.items()),
        {"series": f"{name}_count{{{labels.rstrip(',')}}}", "values": f"0+{sum(per_minute.values())}x120"},
    ]


# Two hours of the advisor's metrics, one sample a minute (promtool's series notation): job a predicted and finished,
# job b running; every minute one resnet job finishes 0.08 off and under-predicted and one bert job 0.25 off, two
# deadlines are met and one missed, 8 admissions take 4 ms and 2 take 40 ms, 6 jobs are predicted, 3 are not
# (errors), 3 resized and 3 failed jobs not learned from.
JOB_A = 'namespace="ml",name="a",uid="u1"'
JOB_B = 'namespace="ml",name="b",uid="u2"'
SERIES = [
    {"series": f"rayjob_advisor_predicted_runtime_seconds{{{JOB_A}}}", "values": "600x120"},
    {"series": f"rayjob_advisor_actual_runtime_seconds{{{JOB_A}}}", "values": "_x100 660x20"},
    {"series": f"rayjob_advisor_predicted_runtime_seconds{{{JOB_B}}}", "values": "_x60 300x60"},
    *histogram("rayjob_advisor_prediction_error_ratio", 'workload="resnet",', ERROR_BUCKETS, {0.08: 1}),
    *histogram("rayjob_advisor_prediction_error_ratio", 'workload="bert",', ERROR_BUCKETS, {0.25: 1}),
    {"series": 'rayjob_advisor_underestimates_total{workload="resnet"}', "values": "0+1x120"},
    {"series": 'rayjob_advisor_deadline_outcomes_total{outcome="met"}', "values": "0+2x120"},
    {"series": 'rayjob_advisor_deadline_outcomes_total{outcome="missed"}', "values": "0+1x120"},
    {"series": 'rayjob_advisor_deadline_outcomes_total{outcome="failed"}', "values": "0x120"},
    # Both roles export the model's error: the panel shows it once.
    {
        "series": 'rayjob_advisor_model_cv_error_ratio{profile="ml/resnet",model="sync-sgd",job="controller"}',
        "values": "0.08x120",
    },
    {
        "series": 'rayjob_advisor_model_cv_error_ratio{profile="ml/resnet",model="sync-sgd",job="webhook"}',
        "values": "0.08x120",
    },
    *histogram("rayjob_advisor_admission_duration_seconds", "", ADMISSION_BUCKETS, {0.004: 8, 0.04: 2}),
    {"series": 'rayjob_advisor_predictions_total{workload="resnet",result="predicted"}', "values": "0+6x120"},
    {"series": 'rayjob_advisor_predictions_total{workload="bert",result="error"}', "values": "0+3x120"},
    {"series": 'rayjob_advisor_rewrites_total{path="webhook"}', "values": "0+3x120"},
    {"series": 'rayjob_advisor_jobs_not_learned_total{outcome="FAILED"}', "values": "0+3x120"},
]
# What each query of each panel gives at the end (rate intervals 5m, range 1h), worked out by hand from SERIES; the
# test rounds the results to 1e-9 (promtool compares floats exactly), which drops the metric's name.
EXPECTED = {
    ("Predicted vs actual runtime per job", "predicted {{namespace}}/{{name}}"): {
        f"{{{JOB_A}}}": 600,
        f"{{{JOB_B}}}": 300,
    },
    ("Predicted vs actual runtime per job", "actual {{namespace}}/{{name}}"): {
        f"{{{JOB_A}}}": 660,
    },
    # 2 a minute, 1 in (0.05, 0.1], 1 in (0.2, 0.3]: the median at the top of the first, p90 0.8 into the second
    ("Prediction error quantiles", "p50"): {"{}": 0.1},
    ("Prediction error quantiles", "p90"): {"{}": 0.28},
    ("Under-prediction rate", "under-predicted"): {"{}": 0.5},  # 60 resnet jobs of 120
    ("Deadline outcomes", "{{outcome}}"): {'{outcome="met"}': 120, '{outcome="missed"}': 60, '{outcome="failed"}': 0},
    ("Model error per profile (cross-validated MAPE)", "{{profile}} ({{model}})"): {
        '{profile="ml/resnet",model="sync-sgd"}': 0.08,
    },
    # 10 a minute, 8 in (0.0025, 0.005], 2 in (0.025, 0.05]: the 5th 5/8 into the first, the 9.9th 1.9/2 into the second
    ("Admission latency", "p50"): {"{}": 0.0040625},
    ("Admission latency", "p99"): {"{}": 0.04875},
    ("Predictions and rewrites", "predictions ({{result}})"): {'{result="predicted"}': 0.1, '{result="error"}': 0.05},
    ("Predictions and rewrites", "rewrites ({{path}})"): {'{path="webhook"}': 0.05},
    ("Predictions and rewrites", "not learned ({{outcome}})"): {'{outcome="FAILED"}': 0.05},
}


def test_promtool_evaluates_every_panel_query_to_what_it_should_show(promtool, tmp_path):
    queries = {
        (panel.title, target.legend): prometheus.promql(target.expr, rate_interval="5m", range_="1h")
        for panel in prometheus.dashboard_panels()
        for target in panel.targets
    }
    assert set(queries) == set(EXPECTED)
    tests = [
        {
            "expr": f"round(({query}) * 1e9) / 1e9",
            "eval_time": "2h",
            "exp_samples": [{"labels": labels, "value": value} for labels, value in EXPECTED[key].items()],
        }
        for key, query in queries.items()
    ]
    unit = {"rule_files": [], "tests": [{"interval": "1m", "input_series": SERIES, "promql_expr_test": tests}]}
    (tmp_path / "dashboard.test.yaml").write_text(yaml.safe_dump(unit))
    assert "SUCCESS" in promtool("test", "rules", str(tmp_path / "dashboard.test.yaml"))


def test_the_picture_names_and_colours_lines_as_grafana_does():
    job = {"namespace": "ml", "name": "a", "uid": "u1"}
    scraped = {"job": "advisor-rayjob-advisor-controller-metrics", "instance": "127.0.0.1:9090"}
    matrix = [{"metric": {"__name__": "rayjob_advisor_predicted_runtime_seconds", **job, **scraped},
               "values": [[10, "600"], [11.5, "601.5"]]}]  # fmt: skip
    vector = [{"metric": {"__name__": "rayjob_advisor_actual_runtime_seconds", **job}, "value": [12, "660"]}]
    (predicted,) = dashboard_picture.series(matrix, "predicted {{namespace}}/{{ name }}{{workload}}")
    (actual,) = dashboard_picture.series(vector, "actual {{namespace}}/{{name}}")
    assert (predicted.legend, predicted.times, predicted.values) == ("predicted ml/a", [10.0, 11.5], [600.0, 601.5])
    assert (actual.legend, actual.times, actual.values) == ("actual ml/a", [12.0], [660.0])
    assert predicted.key == actual.key == "name=a,namespace=ml,uid=u1"  # one colour for the job in both queries
