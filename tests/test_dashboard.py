"""The Grafana dashboard queries only metrics the code exports, through the $datasource variable."""

from __future__ import annotations

import json
import re

from rayjob_advisor.metrics import Metrics
from rayjob_advisor_testkit.paths import REPO

DASHBOARD = REPO / "charts" / "rayjob-advisor" / "dashboards" / "rayjob-advisor.json"


SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported_series() -> set[str]:
    """Every series name /metrics can carry, by metric type (labelled ones included before their first sample)."""
    families = Metrics().registry.collect()
    return {family.name + suffix for family in families for suffix in SUFFIXES[family.type]}


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
