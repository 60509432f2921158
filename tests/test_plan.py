"""Profiling plans (issue 23): the plan file, the sequential design, resuming, the CLI, a simulation on a trace."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import yaml

from benchmarks import plan as simulation
from rayjob_advisor.cli.verbs import main
from rayjob_advisor.errors import BadPlan
from rayjob_advisor.models import design
from rayjob_advisor.observations import Observation, write_observations
from rayjob_advisor.planning import optimal
from rayjob_advisor.planning import plan as planning
from rayjob_advisor.planning.plan import Plan, PlannedRun
from rayjob_advisor.planning.sequential import cost

SPEC = {
    "workload": "toy",
    "candidates": {"workers": [1, 2, 4], "dataset_sizes": [1000, 4000, 16000], "batch_per_worker": [32, 64]},
    "targets": {"workers": [16], "dataset_sizes": [64000], "batch_per_worker": [64]},
    "gpus_per_worker": 1,
    "workers_per_node": 4,
    "repeats": 2,
}


def lab(run: PlannedRun) -> Observation:
    """A synchronous data-parallel job: compute per sample, a sync per step growing with the ring, a fixed start."""
    steps = -(-run.dataset_size // run.batch_size)
    per_step = 0.002 * run.batch_size / run.workers + (0.05 * (run.workers - 1) / run.workers if run.workers > 1 else 0)
    seconds = 5.0 + steps * per_step * (1.0 + 0.01 * run.repeat)
    return Observation.measured(run, nodes=run.nodes, execution_seconds=seconds)


def follow(plan: Plan, measured: list[Observation]) -> tuple[Plan, list[Observation], list[float | None]]:
    """Run a plan to its end in the lab: what ``profile --plan`` does with Ray Train; with the expected error at
    the targets of every step."""
    errors: list[float | None] = []
    while True:
        planned, _ = planning.advance(plan, measured)
        assert planned.status is not None
        errors.append(planned.status.expected_error)
        if not planned.next:
            return planned, measured, errors
        measured = measured + [lab(run) for run in planned.next]


def test_the_plan_spends_at_most_its_budget_on_fewer_runs_than_the_grid():
    grid = [lab(run) for run in Plan.model_validate({**SPEC, "goal": 0.01}).candidate_runs()]
    budget = 0.25 * cost(grid)
    plan = Plan.model_validate({**SPEC, "budget_seconds": budget})
    planned, measured, _ = follow(plan, [])
    assert planned.status is not None and planned.status.stop == "budget"
    assert 9 <= len(measured) < len(grid) / 2
    assert planned.status.spent <= budget
    assert {run.workers for run in measured} >= {1, 4}  # the design reaches the largest candidates too
    assert planned.status.expected_error is not None and 0 < planned.status.expected_error < 1


def test_a_budget_below_the_seeds_cost_is_not_overspent_by_it(tmp_path: pathlib.Path, capsys):
    """The seed's costs are unknown until a run is measured: with a budget the first run is measured alone, and the
    rest of the seed is held to the budget (the whole seed here costs twice the budget)."""
    grid = [lab(run) for run in Plan.model_validate({**SPEC, "goal": 0.01}).candidate_runs()]
    spec = {**SPEC, "budget_seconds": 0.08 * cost(grid)}
    first, _ = planning.advance(Plan.model_validate(spec), [])
    assert len(first.next) == 1 and first.status is not None and first.status.expected_cost is None
    planned, measured, _ = follow(Plan.model_validate(spec), [])
    assert planned.status is not None and planned.status.stop == "budget"
    assert 1 < len(measured) < 9 and planned.status.spent <= spec["budget_seconds"]
    assert planned.status.expected_error is None  # too few runs for a model: the plan says so rather than overspend
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(spec))
    write_observations(tmp_path / "runs.csv", measured)
    assert main(["plan", str(tmp_path / "plan.yaml"), "--results", str(tmp_path / "runs.csv")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "stop: no run left fits in the budget before the 9 runs a model needs: raise budget_seconds"


def test_the_plan_stops_at_its_goal():
    plan = Plan.model_validate({**SPEC, "goal": 0.5})
    planned, measured, errors = follow(plan, [])
    assert planned.status is not None and planned.status.stop == "goal"
    assert len(measured) < len(plan.candidate_runs()) / 2
    assert errors[-1] is not None and errors[-1] <= 0.5
    assert all(error is None or error > 0.5 for error in errors[:-1])  # not one batch past the goal


def test_a_plan_resumes_from_its_results_and_never_repeats_a_run():
    plan = Plan.model_validate({**SPEC, "goal": 0.01})
    first, _ = planning.advance(plan, [])
    assert len(first.next) == 9 and first.status is not None and first.status.expected_cost is None
    done = [lab(run) for run in first.next[:5]]
    other = Observation(workload="other", dataset_size=1000, workers=1, execution_seconds=1.0)
    resumed, _ = planning.advance(plan, [other, *done])
    assert resumed.status is not None and resumed.status.measured == 5  # the other workload's run is not the plan's
    assert len(resumed.next) == 4
    assert not {(r.key, r.repeat) for r in resumed.next} & {(r.key, r.repeat) for r in first.next[:5]}
    assert all(run.expected_cost is not None and run.expected_cost > 0 for run in resumed.next)
    twice = [lab(first.next[0]), lab(first.next[0])]  # a configuration run twice is its repeats 0 and 1
    used, marked = planning.measured_runs(plan, twice)
    assert len(used) == 2 and sum(marked) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("workload: [", "not a YAML or JSON document"),
        ("- 1\n- 2", "expected a mapping of the plan's fields"),
        (yaml.safe_dump({**SPEC}), "a plan needs budget_seconds, goal or max_runs"),
        (yaml.safe_dump({**SPEC, "goal": 0.1, "candidates": {**SPEC["candidates"], "workers": [0]}}),
         "candidates.workers.0: Input should be greater than 0"),
        (yaml.safe_dump({**SPEC, "goal": 0.1, "targets": {"workers": [8], "dataset_sizes": [10]}}),
         "give batch_per_worker or batch_sizes (global), one of them"),
        (yaml.safe_dump({**SPEC, "goal": 0.1, "budget": 3}), "budget: Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_a_bad_plan_file_is_one_line_of_error(tmp_path: pathlib.Path, capsys, text: str, message: str):
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(BadPlan, match=r"plan\.yaml: "):
        planning.read_plan(path)
    for argv in (["plan", str(path)], ["profile", "--plan", str(path), "--out", str(tmp_path / "runs.csv")]):
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("rayjob-advisor: error: ") and message in line


def test_the_plan_command_prints_and_writes_the_next_runs(tmp_path: pathlib.Path, capsys):
    spec, out, results = tmp_path / "plan.yaml", tmp_path / "next.yaml", tmp_path / "runs.csv"
    spec.write_text(yaml.safe_dump({**SPEC, "budget_seconds": 5000}))
    assert main(["plan", str(spec), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "expected error at the targets: unknown until 9 runs are measured" in printed
    first = planning.read_plan(out)  # with a budget, one run first: it gives the costs a unit
    assert len(first.next) == 1 and first.status is not None and first.status.stop is None
    write_observations(results, [lab(run) for run in first.next])
    assert main(["plan", str(out), "--results", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    seed = planning.read_plan(out)
    assert len(seed.next) == 8 and all(run.expected_cost is not None and run.expected_cost > 0 for run in seed.next)
    assert "expected error at the targets: unknown until 9 runs are measured" in printed
    write_observations(results, [lab(run) for run in [*first.next, *seed.next]])
    assert main(["plan", str(out), "--results", str(results), "--format", "json"]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    assert document["status"]["measured"] == 9 and document["status"]["expected_error"] > 0
    assert document["next"] and all(run["expected_cost"] > 0 for run in document["next"])
    ((target),) = document["status"]["targets"]  # the prediction at the target, from the runs so far
    assert target["workers"] == 16 and 0 < target["seconds"] <= target["upper"]


def test_on_a_trace_the_plan_is_as_good_as_the_grid_for_a_quarter_of_its_cost():
    """The simulation of ``benchmarks.plan`` on the shipped CPU profile (its Done-means, on one trace). Its bound's
    coverage at the 3-4 workers is not asserted: they overload the 2 cores the profile ran on, which no run at 1-2
    workers shows (docs/benchmarks.md: 0.37 here, the grid's 0.10; the Pollux and Sia traces' 0.89-1.00)."""
    result = simulation.simulate("digits-cnn")
    assert result.plan.cost <= simulation.BUDGET * result.grid.cost
    assert result.plan.runs < result.grid.runs
    assert result.plan.mape <= simulation.RATIO * result.grid.mape
    assert result.plan.mape < result.random_mape
    assert result.plan.mape <= result.stated


def test_the_design_updates_its_information_exactly_and_prefers_runs_near_the_target():
    candidates = np.array([[w * 1000.0, 1, w, 32 * w, 1, 1, 1] for w in (1, 2, 4, 8)])
    targets = np.array([[16000.0, 1, 16, 512, 1, 1, 4]])
    seconds = 1.0 + candidates[:, design.WORK] / candidates[:, design.WORKERS] / 100
    variance = optimal.TargetVariance().fit(candidates[:2], seconds[:2], candidates, seconds, targets, np.array([10.0]))
    chosen = variance.choose(np.ones(4), [False, False, True, True], budget=1.0, count=5)
    assert chosen == [3]  # equal costs: the run nearest the target's 16 workers; then the budget is spent
    measured = np.vstack([variance.measured_, variance.candidates_[3]])
    exact = np.linalg.inv(optimal.PRIOR * np.eye(measured.shape[1]) + measured.T @ measured)
    assert np.allclose(variance.inverse_, exact)


def test_the_curved_column_makes_runs_of_the_targets_work_worth_more(monkeypatch):
    """Measured at the least work only, a run of the targets' work lowers the variance at the targets more, against
    one more small run, when the design allows a time per sample that drifts with the work (``optimal.CURVED``)."""

    def row(size: float, workers: int) -> list[float]:
        return [size, 1, workers, 32 * workers, 1, 1, 1]

    measured = np.array([row(size, w) for size in (1000.0, 2000.0) for w in (1, 2, 4)])
    candidates, targets = np.array([row(2000.0, 4), row(32000.0, 4)]), np.array([row(32000.0, 8), row(32000.0, 16)])

    def ratio(curved: bool) -> float:
        monkeypatch.setattr(optimal, "CURVED", curved)
        runs = [(X, 2.0 + X[:, design.WORK] / X[:, design.WORKERS] / 1000) for X in (measured, candidates, targets)]
        gains = optimal.TargetVariance().fit(*(part for pair in runs for part in pair)).gains()
        return float(gains[1] / gains[0])

    assert ratio(True) > ratio(False) > 1.0


def test_profile_with_a_plan_needs_an_out_file_before_ray_starts(tmp_path: pathlib.Path, capsys):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "goal": 0.1}))
    assert main(["profile", "--plan", str(path)]) == 2
    assert capsys.readouterr().err.strip() == "rayjob-advisor: error: a plan needs --out"
