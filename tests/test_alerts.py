"""The chart's PrometheusRule: off by default, kube-prometheus-stack's conventions, and checked and unit-tested by
Prometheus's own promtool (scenarios in tests/promtool/alerts.test.yaml), on the rules the chart renders."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from rayjob_advisor.kube.metrics import Metrics
from rayjob_advisor_testkit.chart import by_kind, render
from rayjob_advisor_testkit.paths import REPO
from rayjob_advisor_testkit.prometheus import exported_series

ALERTS = {
    "RayJobAdvisorUpperBoundCoverageLow",
    "RayJobAdvisorPredictionErrorHigh",
    "RayJobAdvisorDeadlineMissRateHigh",
    "RayJobAdvisorWebhookLatencyHigh",
    "RayJobAdvisorDown",
}
UNIT_TESTS = REPO / "tests" / "promtool" / "alerts.test.yaml"
RUNBOOKS = REPO / "docs" / "runbooks.md"
ENABLED = {"metrics": {"prometheusRule": {"enabled": True}}}


def prometheus_rule(values: dict) -> dict:
    (rule,) = by_kind(render(values), "PrometheusRule")
    return rule


def alerts(rule: dict) -> list[dict]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def write_rules(rule: dict, folder: pathlib.Path) -> pathlib.Path:
    """The rule groups as a Prometheus rule file, as the operator hands them to Prometheus."""
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return path


@pytest.fixture(scope="module")
def rule() -> dict:
    return prometheus_rule(ENABLED)


def test_alerts_are_off_by_default():
    assert not by_kind(render({}), "PrometheusRule")


def test_the_rule_follows_kube_prometheus_stack_conventions():
    rule = prometheus_rule({"metrics": {"prometheusRule": {"enabled": True, "labels": {"release": "kps"}}}})
    assert rule["metadata"]["labels"]["release"] == "kps" and rule["metadata"]["namespace"] == "ops"
    assert {a["alert"] for a in alerts(rule)} == ALERTS
    headings = {line[3:].strip().lower() for line in RUNBOOKS.read_text().splitlines() if line.startswith("## ")}
    for alert in alerts(rule):
        assert alert["labels"]["severity"] in {"info", "warning", "critical"}, alert["alert"]
        assert set(alert["annotations"]) == {"summary", "description", "runbook_url"}, alert["alert"]
        page, anchor = alert["annotations"]["runbook_url"].split("#")
        assert page.endswith("/docs/runbooks.md") and anchor == alert["alert"].lower() and anchor in headings


def test_without_the_webhook_only_the_controller_is_watched(promtool, tmp_path):
    rule = prometheus_rule({**ENABLED, "webhook": {"enabled": False}})
    assert "RayJobAdvisorWebhookLatencyHigh" not in {a["alert"] for a in alerts(rule)}
    assert [a["labels"]["component"] for a in alerts(rule) if a["alert"] == "RayJobAdvisorDown"] == ["controller"]
    promtool("check", "rules", str(write_rules(rule, tmp_path)))


def test_promtool_checks_the_rules(promtool, rule, tmp_path):
    assert "SUCCESS: 6 rules found" in promtool("check", "rules", str(write_rules(rule, tmp_path)))


def test_every_alert_fires_in_a_scenario_and_none_in_a_healthy_one(promtool, rule, tmp_path):
    tests = yaml.safe_load(UNIT_TESTS.read_text())
    checks = [check for group in tests["tests"] for check in group["alert_rule_test"]]
    assert {c["alertname"] for c in checks if c["exp_alerts"]} == ALERTS
    healthy = [g for g in tests["tests"] if g["name"].startswith("a healthy")]
    assert {c["alertname"] for g in healthy for c in g["alert_rule_test"] if not c["exp_alerts"]} == ALERTS
    tests["rule_files"] = [str(write_rules(rule, tmp_path))]
    (tmp_path / "alerts.test.yaml").write_text(yaml.safe_dump(tests))
    assert "SUCCESS" in promtool("test", "rules", str(tmp_path / "alerts.test.yaml"))


def test_the_rules_query_only_metrics_the_advisor_exports(rule):
    queried = {name for a in alerts(rule) for name in re.findall(r"\brayjob_advisor_[a-z_]+", a["expr"])}
    exported = exported_series()
    assert queried <= exported, sorted(queried - exported)


def test_deadline_outcomes_and_rewrites_count_from_zero():
    """increase() ignores a series' first sample: one that appeared at 1 would hide the first miss from the alert."""
    samples = {(s.name, tuple(s.labels.values())): s.value for f in Metrics().registry.collect() for s in f.samples}
    for outcome in ("met", "missed", "failed"):
        assert samples[("rayjob_advisor_deadline_outcomes_total", (outcome,))] == 0
    for path in ("controller", "webhook"):
        assert samples[("rayjob_advisor_rewrites_total", (path,))] == 0
