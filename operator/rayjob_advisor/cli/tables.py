"""The tables the command lines print: evaluations, predictions, what-if rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rayjob_advisor import contract
from rayjob_advisor.advice import planner, prediction
from rayjob_advisor.application import Forecast
from rayjob_advisor.models import evaluation
from rayjob_advisor.models.evaluation import COMBINED
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.planning.plan import Plan


def percent(value: float) -> str:
    """A ratio as a percentage with one decimal: ``5.0%``."""
    return f"{100 * value:.1f}%"


def evaluation_table(result: evaluation.Evaluation) -> str:
    """One row per split and candidate; ``bands@0.9``: the coverage per node count (``nodes:coverage/runs``)."""
    header = f"{'split':<24} {'model':<18} {'MAPE':>7} {'p90 APE':>8} {'under':>7} {'cover@0.9':>9} {'n':>5}  bands@0.9"
    lines = [header, "-" * len(header)]
    for split, models in result.splits.items():
        for name, s in models.items():
            mark = " *" if name == result.selected else ""
            coverage = "-" if s.coverage is None else percent(s.coverage)
            bands = " ".join(
                f"{band.removeprefix('nodes=')}:{percent(b.coverage)}/{b.n_test}" for band, b in (s.bands or {}).items()
            )
            lines.append(
                f"{split:<24} {name:<18} {percent(s.mape):>7} {percent(s.p90_ape):>8} "
                f"{percent(s.underprediction_rate):>7} {coverage:>9} {s.n_test:>5}  {bands or '-'}{mark}"
            )
    lines += [f"skipped {split}: {why}" for split, why in result.skipped.items()]
    lines += [f"disqualified {name}: {why}" for name, why in result.disqualified.items()]
    lines += weights_lines(result.weights)
    lines.append(f"selected: {result.selected} ({_WHY[result.selected == COMBINED]}; marked *)")
    return "\n".join(lines)


_WHY = {
    True: "the candidates weighed per kind of question: stacked on the held-out runs of the splits that ask it, "
    "leaning on sync-sgd (a synchronous data-parallel step) where those are few",
    False: "every kind of question put its whole weight on it",
}


def weights_lines(weights: dict[str, dict[str, float]]) -> list[str]:
    """The combination's weights, one line per kind of question (``models.combination``)."""
    return [
        f"weights {kind + ':':<8} " + " + ".join(f"{name} {weight:.2f}" for name, weight in members.items())
        for kind, members in weights.items()
    ]


def accelerator_table(
    rows: list[prediction.AcceleratorOption], missing: dict[str, str], measured: tuple[str, ...]
) -> str:
    """The what-if rows per accelerator, and a line for each accelerator the profile has no runs on."""
    lines = ["what if on other accelerators (each from its own runs):"]
    if not measured:
        lines.append(
            "  note: the profile's runs name no accelerator: every accelerator is predicted from the same runs"
        )
    lines.append(f"{'accelerator':<12} {_SIZE_HEADER} {'deadline':>9}")
    for row in rows:
        meets = "-" if row.meets_deadline is None else "meets" if row.meets_deadline else "MISSES"
        lines.append(f"{row.accelerator:<12} {_size_cells(row)} {meets:>9}")
    lines += [f"{name:<12} no rows: {why}" for name, why in missing.items()]
    return "\n".join(lines)


def prediction_table(seen: Forecast, rows: list[planner.Option]) -> str:
    """What ``predict`` says of a forecast: the prediction, the decision, the what-if rows, what it writes."""
    job, model, result, plan = seen.job, seen.model, seen.prediction, seen.plan
    group = job.scale_group
    where = f"group {group.name!r}: {group.replicas} replicas x {group.num_of_hosts} host(s)" if group else "head pod"
    used = ", ".join(f"{k}={v}" for k, v in result.features.items())
    lines = [
        f"profile: {result.profile} ({model_summary(model)})",
        f"features: {used} ({where})",
        f"predicted runtime: {runtime_summary(result, seen.startup)}",
    ]
    lines += [_batch_line(result.features), _placement_line(result.features)]
    if result.assumed:
        lines.append(f"assumed: {assumptions_summary(result)}")
    if job.resize_blocker:
        lines.append(f"not resizable: {job.resize_blocker}")
    if plan is not None:
        verdict = "meets" if plan.meets_deadline else "MISSES"
        lines.append(f"decision: {plan.size} ({verdict} the deadline) - {plan.reason}")
    lines += ["", f"what if ({where.split(':')[0]}):", *what_if_table(rows)]
    if seen.left_alone:
        release = "; it only lets it go on (it is held for the advisor)" if seen.patch else ""
        lines += ["", f"the operator leaves this RayJob alone: {seen.left_alone}; it writes nothing on it{release}"]
        return "\n".join(lines)
    metadata = seen.patch.get("metadata") or {}
    for kind in ("annotations", "labels"):
        written = metadata.get(kind) or {}
        lines += ["", f"{kind} it would write:" if written else f"{kind} it would write: none"]
        lines += [f"  {key}: {'(removed)' if value is None else value}" for key, value in written.items()]
    return "\n".join(lines)


def model_summary(model: RuntimeModel) -> str:
    """``540 runs; model sync-sgd, cross-validated MAPE 5.0%`` (``predict`` and the kubectl plugin say it)."""
    return f"{model.n_samples_} runs; model {model.selected_}, cross-validated MAPE {percent(model.cv_mape_)}"


def assumptions_summary(result: prediction.Prediction) -> str:
    """What the model assumed, and whence (``predict`` and the kubectl plugin's ``describe`` say it)."""
    return f"{result.assumptions} (from the profile: not in the job, or never varied in the profile)"


def runtime_summary(result: prediction.Prediction, startup: float) -> str:
    """The median, the upper bound at its confidence and the job's expected start-up, in Go durations."""
    return (
        f"{contract.format_duration(result.p50)} (median), "
        f"{contract.format_duration(result.upper)} (upper bound at {result.confidence:g}), "
        f"plus about {contract.format_duration(startup)} start-up"
    )


def what_if_table(rows: Sequence[planner.Option]) -> list[str]:
    """The what-if table, a size a row (``predict`` and ``kubectl rayjob-advisor what-if`` print it)."""
    return [_SIZE_HEADER, *(_size_cells(row) for row in rows)]


_SIZE_HEADER = (
    f"{'replicas':>8} {'GPUs/worker':>11} {'workers':>8} {'start-up':>10} {'median':>10} {'upper':>10} {'cost':>10}"
)


def _size_cells(row: planner.Option) -> str:
    """A size's cells of a what-if table: its size, expected start-up, runtimes and cost."""
    durations = " ".join(f"{contract.format_duration(seconds):>10}" for seconds in (row.startup, row.p50, row.upper))
    return f"{row.replicas:>8} {row.gpus_per_worker:>11g} {row.workers:>8} {durations} {row.cost:>10.4f}"


def _batch_line(used: dict[str, Any]) -> str:
    """Which batch the job gave and which one a resize keeps (the batch rule of ``contract``)."""
    if used.get("batch_size") is None:
        return "batch: not given; a resize keeps the per-worker batch"
    return (
        f"batch: {used['batch_size']:g} global = {used['batch_size_per_worker']:g} per worker x {used['workers']} "
        f"workers; a resize keeps the {used['batch_held']} batch fixed"
    )


def _placement_line(used: dict[str, Any]) -> str:
    hint = used.get("placement")
    return f"placement: {hint} (from the RayJob)" if hint else "placement: the RayJob gives no hint"


_STOPS = {
    "goal": "the expected error at the targets is within the goal",
    "budget": "no run left fits in the budget",
    "runs": "the plan's most runs are measured",
    "exhausted": "every candidate run is measured",
}


def plan_table(plan: Plan) -> str:
    """A plan's next runs, then where it stands: cost so far and expected, expected error at the targets."""
    status = plan.status
    unit = "GPU-seconds" if plan.gpus_per_worker > 0 else "CPU-seconds"
    header = (
        f"{'workers':>7} {'nodes':>5} {'dataset':>9} {'epochs':>6} {'batch':>6} {'repeat':>6} {'seconds':>9} "
        f"{'cost':>9}"
    )
    lines = [header, "-" * len(header)] if plan.next else []
    for run in plan.next:
        seconds = "?" if run.expected_seconds is None else f"{run.expected_seconds:.1f}"
        cost = "?" if run.expected_cost is None else f"{run.expected_cost:.1f}"
        lines.append(
            f"{run.workers:>7} {run.nodes:>5} {run.dataset_size:>9} {run.epochs:>6} {run.batch_size:>6} "
            f"{run.repeat:>6} {seconds:>9} {cost:>9}"
        )
    if status is None:
        return "\n".join(lines)
    expected = "unknown until the first runs" if status.expected_cost is None else f"{status.expected_cost:.1f}"
    error = (
        f"within +{percent(status.expected_error)} of the prediction at {status.confidence:g} confidence"
        if status.expected_error is not None
        else f"unknown until {evaluation.MIN_HELD_OUT} runs are measured"
    )
    lines += [
        f"at the target: {target.workers} workers, {target.dataset_size} samples x {target.epochs} epochs, batch "
        f"{target.batch_size}: {target.seconds:.1f}s, at most {target.upper:.1f}s"
        for target in status.targets
    ]
    lines += [
        f"measured: {_runs(status.measured)}, {status.spent:.1f} {unit}",
        f"expected cost with the next runs: {expected}"
        + ("" if plan.budget_seconds is None else f" (budget {plan.budget_seconds:g})"),
        f"expected error at the targets: {error}" + ("" if plan.goal is None else f" (goal {percent(plan.goal)})"),
        f"stop: {_stop(status.stop, status.expected_error)}"
        if status.stop
        else f"next: {_runs(len(plan.next))}, then plan again",
    ]
    return "\n".join(lines)


def _runs(count: int) -> str:
    """``1 run``, ``9 runs``: a plan's first step measures one."""
    return f"{count} run" if count == 1 else f"{count} runs"


def _stop(stop: str, expected_error: float | None) -> str:
    """Why the plan stopped; a budget spent before there is a model says what to change."""
    if stop == "budget" and expected_error is None:
        return f"{_STOPS[stop]} before the {evaluation.MIN_HELD_OUT} runs a model needs: raise budget_seconds"
    return _STOPS[stop]
