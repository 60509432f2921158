"""Prometheus's own tools (Debian's ``prometheus`` package, from ``hack/install-promtool``), the dashboard's queries,
and the series the advisor exports.

The alert rules and the Grafana dashboard are checked by ``promtool`` and pictured from a real ``prometheus``, not
by regular expressions: this module finds the binaries and turns the dashboard's panels into plain PromQL.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import sys
from typing import Literal

from rayjob_advisor.kube.metrics import Metrics
from rayjob_advisor_testkit.paths import CHART

DASHBOARD = CHART / "dashboards" / "rayjob-advisor.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
"""The series of each metric type, by their suffix to the metric's name."""


class MissingTool(RuntimeError):
    """A Prometheus binary is not installed: its message is the one line to show."""


def tool(name: Literal["promtool", "prometheus"]) -> str:
    """The path of ``name``: in the running virtualenv's ``bin`` (where the set-up puts it), else on ``PATH``."""
    here = pathlib.Path(sys.executable).parent
    found = shutil.which(name, path=os.pathsep.join([str(here), os.environ.get("PATH", "")]))
    if found is None:
        raise MissingTool(f"{name} is not installed (neither in {here} nor on PATH): run hack/install-promtool")
    return found


@dataclasses.dataclass(frozen=True)
class Target:
    """One query of a panel: its PromQL, with Grafana's variables, and its legend (``{{label}}`` templates)."""

    expr: str
    legend: str


@dataclasses.dataclass(frozen=True)
class Panel:
    title: str
    type: str  # Grafana's panel type: timeseries, stat, piechart, bargauge
    targets: tuple[Target, ...]
    unit: str  # Grafana's unit of the values: s, percentunit, ops, or "" (none)
    grid: tuple[int, int, int, int]  # x, y, width, height on Grafana's grid, 24 columns wide


def dashboard_panels() -> list[Panel]:
    """The panels of the chart's dashboard, in order."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        Panel(
            panel["title"],
            panel["type"],
            tuple(Target(t["expr"], t.get("legendFormat", "")) for t in panel["targets"]),
            panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""),
            (grid["x"], grid["y"], grid["w"], grid["h"]),
        )
        for panel in dashboard["panels"]
        for grid in [panel["gridPos"]]
    ]


def promql(expr: str, rate_interval: str, range_: str) -> str:
    """``expr`` as Prometheus takes it: Grafana's ``$__rate_interval`` and ``$__range`` replaced by durations."""
    query = expr.replace("$__rate_interval", rate_interval).replace("$__range", range_)
    if "$" in query:
        raise ValueError(f"a Grafana variable this module does not know is left in {query!r}")
    return query


def exported_series() -> set[str]:
    """Every series name /metrics can carry, by metric type (labelled ones included before their first sample)."""
    families = Metrics().registry.collect()
    return {family.name + suffix for family in families for suffix in SUFFIXES[family.type]}
