"""The dashboard picture of the README (docs/dashboard.png), drawn from real metrics by a real Prometheus.

The advisor's controller and webhook run against the test kit's API emulator, each serving /metrics, and a
Prometheus (Debian's, from ``hack/install-promtool``) scrapes both every second while RayJobs go through their
lifecycle: admitted by the webhook (some with a deadline, some in ``enforce`` mode, some of a workload with no
profile), created, started and finished by "KubeRay" with a measured runtime around the prediction (some fail),
while clients send server-side dry runs. Then every panel's queries, read from the chart's dashboard, are asked
of Prometheus's HTTP API and drawn with matplotlib on the dashboard's own grid.

    .venv/bin/pip install -e '.[picture]'   # matplotlib
    .venv/bin/python -m benchmarks.dashboard_picture [--jobs 30] [--out docs/dashboard.png]

About 80 s on 2 cores; everything but the picture is gone afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import importlib.util
import json
import math
import pathlib
import re
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import yaml

from rayjob_advisor import contract as ann
from rayjob_advisor_testkit import prometheus
from rayjob_advisor_testkit.admission import Webhook
from rayjob_advisor_testkit.advisor import QUICK_REFITS, free_port, running_advisor
from rayjob_advisor_testkit.paths import REPO
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest, synthetic_observations
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group
from rayjob_advisor_testkit.resources import AdvisorEmulator

NAMESPACE = "ml-team"
NOISY = "resnet"  # a second profiled workload, of noisier runs than the test kit's WORKLOAD
SCRAPE_SECONDS = 1
RATE_INTERVAL = "15s"  # Grafana's $__rate_interval for 1 s scrapes and a 1 s step would be 4 s: too jumpy to read
JOB_GAP_SECONDS = 1.5  # between two RayJob creations
RUNNING_JOBS = 3  # a job finishes when the one this many after it is created
DRY_RUNS_PER_SECOND = 5
CAPTION_HEIGHT = 0.02  # of the picture, under the panels


@dataclasses.dataclass(frozen=True)
class Series:
    """One line of a panel: its legend, as Grafana writes it, and its samples."""

    legend: str
    key: str  # the labels but the metric's name: the same job has the same colour in every query of a panel
    times: list[float]
    values: list[float]


def legend(template: str, labels: Mapping[str, str]) -> str:
    """Grafana's legend format: ``{{label}}`` replaced by the label's value (empty when the series has none)."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)


def series(result: list[dict[str, Any]], template: str) -> list[Series]:
    """The lines of a Prometheus query's ``result`` (a matrix, or a vector as one-point lines)."""
    lines = []
    for item in result:
        labels = item["metric"]
        points = item.get("values") or [item["value"]]
        key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("__name__", "job", "instance"))
        lines.append(
            Series(legend(template, labels), key, [float(t) for t, _ in points], [float(v) for _, v in points])
        )
    return lines


def scrape_config(targets: Mapping[str, int]) -> dict[str, Any]:
    """Prometheus's configuration: each target (job name: port on this host) every second, as a ServiceMonitor would
    label it (``job`` the chart's Service name, ``namespace``)."""
    return {
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": "rayjob-advisor"}}],
            }
            for job, port in targets.items()
        ],
    }


class PrometheusApi:
    """Prometheus's HTTP API, the part the picture asks."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def get(self, path: str, **query: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}?{urllib.parse.urlencode(query)}", timeout=10) as answer:
            body = answer.read()
        return json.loads(body)["data"] if path.startswith("/api/") else body.decode()

    def query_range(self, expr: str, start: float, end: float) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get(
            "/api/v1/query_range", query=expr, start=str(start), end=str(end), step=str(SCRAPE_SECONDS)
        )["result"]
        return result

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr, time=str(at))["result"]
        return result


@contextlib.contextmanager
def running_prometheus(config: dict[str, Any], folder: pathlib.Path) -> Iterator[PrometheusApi]:
    """A Prometheus server with ``config``, its data in ``folder``, until the block ends."""
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    command = [
        prometheus.tool("prometheus"), f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ]  # fmt: skip
    with (folder / "prometheus.log").open("w") as log, subprocess.Popen(command, stdout=log, stderr=log) as server:
        api = PrometheusApi(port)
        try:
            for _ in range(100):
                with contextlib.suppress(OSError):
                    if "Ready" in api.get("/-/ready"):
                        break
                if server.poll() is not None:
                    raise RuntimeError(f"prometheus exited: {(folder / 'prometheus.log').read_text()}")
                time.sleep(0.1)
            yield api
        finally:
            server.terminate()
            server.wait(timeout=30)


def new_rayjob(index: int, rng: np.random.Generator) -> dict[str, Any]:
    """A RayJob of one of the two profiled workloads (one in ten of a workload nobody profiled), a deadline on half
    of them, ``enforce`` on a quarter."""
    notes = {
        ann.WORKLOAD: "bert" if index % 10 == 7 else NOISY if index % 3 == 2 else WORKLOAD,
        ann.DATASET_SIZE: str(rng.choice([2000, 4000, 8000, 16000])),
        ann.BATCH_SIZE: str(rng.choice([64, 128])),
        ann.WORKERS_FROM: "cluster",
    }
    if index % 2:
        notes[ann.DEADLINE] = "45s"
    if index % 4 == 1:
        notes[ann.MODE] = "enforce"
    rayjob = make_rayjob(annotations=notes, groups=[worker_group(replicas=int(rng.integers(1, 9)), maxReplicas=8)])
    rayjob["metadata"].update(name=f"train-{index:02d}", namespace=NAMESPACE)
    return rayjob


def finish(api: AdvisorEmulator, name: str, rng: np.random.Generator) -> None:
    """Act as KubeRay: the job started 5 s after its creation and ran around its prediction; one in eight fails."""
    stored = api.get("rayjobs", NAMESPACE, name)
    predicted = float(stored["metadata"].get("annotations", {}).get(ann.PREDICTED_RUNTIME_SECONDS, 30))
    started = ann.parse_timestamp(stored["metadata"]["creationTimestamp"]) + dt.timedelta(seconds=5)
    ended = started + dt.timedelta(seconds=predicted * float(np.exp(rng.normal(0.05, 0.15))))
    failed = rng.random() < 1 / 8
    api.set_rayjob_status(NAMESPACE, name, deployment_status="Running", job_status="RUNNING", start_time=started)
    api.set_rayjob_status(
        NAMESPACE, name, deployment_status="Failed" if failed else "Complete",
        job_status="FAILED" if failed else "SUCCEEDED", start_time=started, end_time=ended,
    )  # fmt: skip


def dry_runs(webhook: Webhook, stop: threading.Event, rng: np.random.Generator) -> None:
    """Clients' server-side dry runs (``kubectl apply --dry-run=server``): admission traffic that creates nothing."""
    while not stop.wait(1 / DRY_RUNS_PER_SECOND):
        webhook.review(new_rayjob(int(rng.integers(100)), rng), dry_run=True)


def lifecycle(api: AdvisorEmulator, webhook: Webhook, jobs: int, seed: int) -> None:
    """``jobs`` RayJobs admitted, created and, ``RUNNING_JOBS`` creations later, finished."""
    rng = np.random.default_rng(seed)
    stop = threading.Event()
    traffic = threading.Thread(target=dry_runs, args=(webhook, stop, np.random.default_rng(seed + 1)), daemon=True)
    traffic.start()
    names: list[str] = []
    try:
        for index in range(jobs + RUNNING_JOBS):
            if index < jobs:
                admitted, _ = webhook.admit(new_rayjob(index, rng))
                api.create(admitted)
                names.append(admitted["metadata"]["name"])
            if index >= RUNNING_JOBS:
                finish(api, names[index - RUNNING_JOBS], rng)
            time.sleep(JOB_GAP_SECONDS)
    finally:
        stop.set()
        traffic.join()


def panel_series(api: PrometheusApi, start: float, end: float) -> list[tuple[prometheus.Panel, list[list[Series]]]]:
    """Every panel with the lines of each of its queries: time series over the run, the others at its end."""
    window = f"{math.ceil(end - start)}s"
    answers = []
    for panel in prometheus.dashboard_panels():
        lines = []
        for target in panel.targets:
            expr = prometheus.promql(target.expr, RATE_INTERVAL, window)
            result = api.query_range(expr, start, end) if panel.type == "timeseries" else api.query(expr, end)
            lines.append(series(result, target.legend))
        answers.append((panel, lines))
    return answers


def draw(
    panels: list[tuple[prometheus.Panel, list[list[Series]]]], start: float, caption: str, out: pathlib.Path
) -> None:
    """The panels on the dashboard's grid, in Grafana's dark colours."""
    import matplotlib  # the `picture` extra; only this function needs it

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib import ticker

    rows = max(y + h for panel, _ in panels for _, y, _, h in [panel.grid])
    plt.style.use("dark_background")
    figure = plt.figure(figsize=(16, 16 * rows / 24 * 0.55), facecolor="#111217")
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    formats = {
        "percentunit": ticker.PercentFormatter(1.0, decimals=0),
        "s": ticker.FuncFormatter(lambda v, _: f"{v:g} s" if v >= 1 or v == 0 else f"{v * 1000:g} ms"),
        "ops": ticker.FuncFormatter(lambda v, _: f"{v:g}/s"),
    }
    for panel, lines in panels:
        x, y, w, h = panel.grid
        height = (1 - CAPTION_HEIGHT) / rows  # of one grid row, in the figure's coordinates
        axes = figure.add_axes((x / 24 + 0.035, 1 - (y + h) * height + 0.04, w / 24 - 0.05, h * height - 0.075))
        axes.set_facecolor("#181b1f")
        axes.set_title(panel.title, loc="left", fontsize=11, color="#ccccdc")
        values_format = formats.get(panel.unit, ticker.ScalarFormatter())
        if panel.type == "timeseries":
            colours: dict[str, str] = {}
            for style, target in zip(("-", "--", ":"), lines, strict=False):
                for line in target:
                    colour = colours.setdefault(line.key, palette[len(colours) % len(palette)])
                    axes.plot([t - start for t in line.times], line.values, style, color=colour, label=line.legend)
            axes.yaxis.set_major_formatter(values_format)
            axes.set_xlabel("seconds into the run", fontsize=8)
            if sum(len(target) for target in lines) <= 8:
                axes.legend(fontsize=8, loc="upper left")
            else:
                handles = [
                    matplotlib.lines.Line2D(
                        [], [], linestyle=style, color="#ccccdc", label=re.sub(r"\{\{.*", "", t.legend)
                    )
                    for style, t in zip(("-", "--", ":"), panel.targets, strict=False)
                ]
                axes.legend(handles=handles, fontsize=8, loc="upper left", title="one colour per job")
        elif panel.type == "stat":
            value = lines[0][0].values[-1] if lines[0] else math.nan
            axes.text(0.5, 0.5, values_format(value) if panel.unit else f"{value:g}", ha="center", va="center",
                      fontsize=36, color="#73bf69", transform=axes.transAxes)  # fmt: skip
            axes.axis("off")
        elif panel.type == "piechart":
            slices = [(line.legend, line.values[-1]) for line in lines[0] if line.values[-1] > 0]
            axes.pie([v for _, v in slices], labels=[f"{k} ({v:.0f})" for k, v in slices], colors=palette,
                     textprops={"color": "#ccccdc", "fontsize": 9})  # fmt: skip
        else:  # bargauge
            bars = sorted((line.legend, line.values[-1]) for line in lines[0])
            axes.barh(range(len(bars)), [v for _, v in bars], color="#73bf69", height=0.6)
            for row, (name, value) in enumerate(bars):
                axes.text(0, row + 0.32, f" {name}: {values_format(value)}", va="bottom", fontsize=9, color="#ccccdc")
            axes.set_ylim(-0.5, len(bars))
            axes.set_yticks([])
            axes.xaxis.set_major_formatter(values_format)
    figure.text(0.01, 0.005, caption, fontsize=8, color="#8e8e8e")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100, facecolor=figure.get_facecolor())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "docs" / "dashboard.png")
    args = parser.parse_args()
    try:  # what is missing says so in one line now, not after the run
        prometheus.tool("prometheus")
    except prometheus.MissingTool as missing:
        raise SystemExit(f"benchmarks.dashboard_picture: {missing}") from None
    if importlib.util.find_spec("matplotlib") is None:
        raise SystemExit("benchmarks.dashboard_picture: no matplotlib: .venv/bin/pip install -e '.[picture]'")
    noisy = profile_manifest(synthetic_observations(noise=0.1)[::4], workload=NOISY)
    with tempfile.TemporaryDirectory(prefix="dashboard-") as folder, AdvisorEmulator() as api:
        api.create_namespace(NAMESPACE)
        for profile in (profile_manifest(), noisy):
            api.create({**profile, "metadata": {**profile["metadata"], "namespace": NAMESPACE}})
        ports = {
            "advisor-rayjob-advisor-controller-metrics": free_port(),
            "advisor-rayjob-advisor-webhook": free_port(),
        }
        roles = dict(zip(("controller", "webhook"), ports.values(), strict=True))
        with (
            running_advisor(api=api, metrics_port=roles["controller"], metrics_job_ttl_seconds=15, timeout=60,
                            **QUICK_REFITS) as controller,
            running_advisor("webhook", api=api, metrics_port=roles["webhook"], timeout=60, **QUICK_REFITS) as hook,
            running_prometheus(scrape_config(ports), pathlib.Path(folder)) as server,
        ):  # fmt: skip
            for advisor in (controller, hook):
                advisor.wait_for_model(WORKLOAD, NAMESPACE)
            start = time.time()
            lifecycle(api, hook.webhook, args.jobs, args.seed)
            time.sleep(5 * SCRAPE_SECONDS)
            end = time.time()
            panels = panel_series(server, start, end)
            version = server.get("/api/v1/status/buildinfo")["version"]
    caption = (
        f"rayjob-advisor on the test kit's API emulator, scraped every {SCRAPE_SECONDS} s by Prometheus {version}: "
        f"{args.jobs} RayJobs over {end - start:.0f} s (benchmarks/dashboard_picture.py, seed {args.seed})"
    )
    draw(panels, start, caption, args.out)
    print(f"{args.out}: {caption}")


if __name__ == "__main__":
    main()
